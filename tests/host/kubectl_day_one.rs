//! What a kubectl user does on day one, with the machine's real kubectl against
//! `koord --role=all --embedded`: create (protobuf bodies), server-side dry run,
//! server-side apply with a conflict, diff, logs (-f, --timestamps), exec with an exit
//! code, `kubectl run` without a scheduler name, top, explain, auth can-i, wait and delete
//! --wait.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, http_get, wait_until};

struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Out {
        use std::io::Write;
        let mut child = self.cmd(args).spawn().expect("run kubectl");
        if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
            input.write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    fn ok(&self, args: &[&str]) -> String {
        self.ok_in(args, None)
    }

    fn ok_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.run(args, stdin);
        assert_eq!(o.code, 0, "kubectl {args:?}:\n{}\n{}", o.stderr, o.stdout);
        o.stdout
    }
}

fn cm(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: demo\ndata:\n  a: \"{value}\"\n"
    )
}

const TALKER: &str = r#"{"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "talker",
  "image": "busybox", "command": ["sh", "-c", "echo hello; echo world; sleep 3600"],
  "env": [{"name": "GREETING", "value": "hi"}],
  "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "32Mi"}}}]}}"#;

fn creates_and_dry_runs(k: &Kubectl) {
    k.ok(&["create", "namespace", "demo"]);
    k.ok(&[
        "create",
        "configmap",
        "cm1",
        "-n",
        "demo",
        "--from-literal=a=1",
    ]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "demo",
        "--from-literal=p=q",
    ]);
    k.ok(&[
        "create",
        "deployment",
        "web",
        "-n",
        "demo",
        "--image=busybox",
        "--",
        "sleep",
        "1d",
    ]);
    let image = k.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        "demo",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "busybox");
    k.ok(&["scale", "deploy", "web", "-n", "demo", "--replicas=3"]);
    let replicas = k.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        "demo",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas, "3", "kubectl scale through the scale subresource");
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "s1",
            "-n",
            "demo",
            "-o",
            "jsonpath={.data.p}"
        ]),
        "cQ=="
    );
    let dry = k.ok(&[
        "create",
        "configmap",
        "dry",
        "-n",
        "demo",
        "--from-literal=x=y",
        "--dry-run=server",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert!(!dry.is_empty(), "a server-side dry run fills in the uid");
    assert_ne!(
        k.run(&["get", "configmap", "dry", "-n", "demo"], None).code,
        0,
        "nothing stored"
    );
}

fn applies_server_side_and_diffs(k: &Kubectl) {
    k.ok_in(
        &["apply", "--server-side", "-f", "-"],
        Some(&cm("ssa", "1")),
    );
    k.ok_in(
        &["apply", "--server-side", "-f", "-"],
        Some(&cm("ssa", "1")),
    );
    let clash = k.run(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&cm("ssa", "2")),
    );
    assert_ne!(
        clash.code, 0,
        "a second manager changing a's value conflicts"
    );
    assert!(
        clash
            .stderr
            .contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.a"),
        "{}",
        clash.stderr
    );
    k.ok_in(
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&cm("ssa", "2")),
    );
    let managers = k.ok(&[
        "get",
        "cm",
        "ssa",
        "-n",
        "demo",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert!(managers.contains("other"), "{managers}");
    assert_eq!(
        k.ok(&["get", "cm", "ssa", "-n", "demo", "-o", "jsonpath={.data.a}"]),
        "2"
    );
    let same = k.run(
        &["diff", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&cm("ssa", "2")),
    );
    assert_eq!(
        same.code, 0,
        "no difference: {}{}",
        same.stdout, same.stderr
    );
    let changed = k.run(
        &["diff", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&cm("ssa", "3")),
    );
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(changed.stdout.contains("+  a: \"3\""), "{}", changed.stdout);
}

fn logs_and_exec(k: &Kubectl) {
    k.ok(&[
        "run",
        "talker",
        "-n",
        "demo",
        "--image=busybox",
        "--restart=Never",
        &format!("--overrides={TALKER}"),
    ]);
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/talker",
        "-n",
        "demo",
        "--timeout=60s",
    ]);
    assert!(wait_until(Duration::from_secs(10), || {
        k.run(&["logs", "talker", "-n", "demo"], None).stdout == "hello\nworld\n"
    }));
    let stamped = k.ok(&["logs", "talker", "-n", "demo", "--timestamps", "--tail=1"]);
    let (ts, msg) = stamped.trim_end().split_once(' ').unwrap();
    assert_eq!(msg, "world");
    assert!(
        ts.ends_with('Z') && ts.len() == 30,
        "RFC 3339 with nanoseconds: {ts}"
    );
    let mut follow = k
        .cmd(&["logs", "-f", "talker", "-n", "demo"])
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "hello");
    assert_eq!(lines.next().unwrap().unwrap(), "world");
    follow.kill().unwrap();
    follow.wait().unwrap();
    let exec = k.run(
        &[
            "exec",
            "talker",
            "-n",
            "demo",
            "--",
            "sh",
            "-c",
            "echo $GREETING; exit 3",
        ],
        None,
    );
    assert_eq!(
        (exec.code, exec.stdout.as_str()),
        (3, "hi\n"),
        "{}",
        exec.stderr
    );
    assert_eq!(
        k.ok_in(
            &["exec", "-i", "talker", "-n", "demo", "--", "cat"],
            Some("piped\n")
        ),
        "piped\n"
    );
}

fn tops_explains_and_can_i(k: &Kubectl) {
    assert!(
        wait_until(Duration::from_secs(30), || k
            .run(&["top", "node"], None)
            .code
            == 0),
        "kubectl top node: {}",
        k.run(&["top", "node"], None).stderr
    );
    // Pod usage arrives with the next NodeMetric report: every 15 s in embedded mode, as
    // metrics-server's resolution.
    assert!(
        wait_until(Duration::from_secs(35), || {
            k.run(&["top", "pod", "talker", "-n", "demo"], None).code == 0
        }),
        "kubectl top pod: {}",
        k.run(&["top", "pod", "talker", "-n", "demo"], None).stderr
    );
    let explained = k.ok(&["explain", "pod.spec.containers"]);
    assert!(
        explained.contains("List of containers belonging to the pod"),
        "{explained}"
    );
    assert_eq!(k.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    // `nodemetrics` is Koordinator's NodeMetric (CRD groups come before the aggregated
    // metrics.k8s.io in discovery, as kube-apiserver orders them).
    let versions = k.ok(&[
        "get",
        "nodemetrics",
        "-o",
        "jsonpath={.items[*].apiVersion}",
    ]);
    assert!(versions.starts_with("slo.koordinator.sh/"), "{versions}");
}

/// No kube-scheduler here: a pod without a schedulerName is scheduled by koord.
fn runs_without_a_scheduler_name(k: &Kubectl) {
    k.ok(&[
        "run",
        "solo",
        "-n",
        "demo",
        "--image=busybox",
        "--",
        "sleep",
        "3600",
    ]);
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/solo",
        "-n",
        "demo",
        "--timeout=60s",
    ]);
    let by = k.ok(&[
        "get",
        "pod",
        "solo",
        "-n",
        "demo",
        "-o",
        "jsonpath={.spec.schedulerName}",
    ]);
    assert_eq!(by, "default-scheduler");
    k.ok(&[
        "delete",
        "pod",
        "solo",
        "-n",
        "demo",
        "--wait",
        "--timeout=60s",
    ]);
}

#[test]
fn kubectl_day_one_against_embedded_koord() {
    let Some(_) = std::env::var_os("PATH").filter(|_| {
        Command::new("kubectl")
            .arg("version")
            .arg("--client")
            .output()
            .is_ok()
    }) else {
        eprintln!("skipped: no kubectl on PATH");
        return;
    };
    if !common::is_root() {
        eprintln!("skipped: the embedded node runtime needs root for cgroups");
        return;
    }
    let _cpu = common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let koord = super::embedded::start_with(dir.path(), free_port(), admin, "dayone", &[]);
    let ready = wait_until(Duration::from_secs(30), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "not ready:\n{}", koord.logs());
    let k = Kubectl {
        kubeconfig: dir.path().join("kubeconfig"),
        cache: dir.path().join("kcache"),
    };
    creates_and_dry_runs(&k);
    applies_server_side_and_diffs(&k);
    logs_and_exec(&k);
    runs_without_a_scheduler_name(&k);
    tops_explains_and_can_i(&k);
    k.ok(&[
        "delete",
        "pod",
        "talker",
        "-n",
        "demo",
        "--wait",
        "--timeout=60s",
    ]);
    assert_ne!(
        k.run(&["get", "pod", "talker", "-n", "demo"], None).code,
        0,
        "gone once delete returned"
    );
    drop(koord);
}
