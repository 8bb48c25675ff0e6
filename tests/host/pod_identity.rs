//! A pod of `koord --role=all --embedded` runs as its ServiceAccount, as on a cluster: the
//! API server's ServiceAccount admission gives it a `kube-api-access-*` volume, the node
//! runtime fills it (a token bound to the pod, `ca.crt`, `namespace`) and mounts it at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in the container's own mount namespace,
//! and the machine's real kubectl inside the pod finds the API server in-cluster, is that
//! ServiceAccount, may list pods where its Role allows and gets kube's 403 elsewhere. The
//! token stops working once the pod is gone; the host never sees the mount.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, http_get, wait_until};

const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

fn kubectl(dir: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kcache"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn ok(dir: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out, err) = kubectl(dir, args, stdin);
    assert!(ok, "kubectl {args:?}:\n{err}\n{out}");
    out
}

fn kubectl_bin() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v kubectl"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

const RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: team-a}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: team-a}
"#;

/// The pod: kubectl in-cluster (no kubeconfig anywhere it looks), and a second container
/// of another user that reads its token.
fn probe(kubectl: &Path) -> String {
    let k = kubectl.display();
    let script = format!(
        "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; \
         {k} auth whoami -o jsonpath='{{.status.userInfo.username}}'; echo; \
         {k} get pods -n team-a -o name; {k} get pods -n team-b 2>&1; echo done; sleep 3600"
    );
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "team-a"},
        "spec": {"serviceAccountName": "reader", "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "client", "image": "busybox", "command": ["sh", "-c", script],
                 "env": [{"name": "KUBECONFIG", "value": "/nonexistent/kubeconfig"},
                         {"name": "HOME", "value": "/tmp"}]},
                {"name": "nobody", "image": "busybox",
                 "command": ["sh", "-c", format!("wc -c < {TOKEN}; sleep 3600")],
                 "securityContext": {"runAsUser": 65534, "runAsGroup": 65534}}]}})
    .to_string()
}

#[test]
fn a_pod_runs_as_its_service_account_with_a_projected_token() {
    let Some(kubectl_path) = kubectl_bin() else {
        eprintln!("skipped: no kubectl on PATH");
        return;
    };
    if !common::is_root() {
        eprintln!("skipped: the embedded node runtime needs root for cgroups and mounts");
        return;
    }
    let token_on_host = Path::new(TOKEN).exists();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let api = free_port();
    let koord = super::embedded::start_with(d, api, admin, "identity", &[]);
    let ready = wait_until(Duration::from_secs(30), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "not ready:\n{}", koord.logs());
    ok(d, &["apply", "-f", "-"], Some(RBAC));
    // The ServiceAccount controller gives every namespace its `default`, and the root CA
    // publisher its `kube-root-ca.crt`.
    let published = wait_until(Duration::from_secs(10), || {
        kubectl(
            d,
            &["get", "sa/default", "cm/kube-root-ca.crt", "-n", "team-b"],
            None,
        )
        .0
    });
    assert!(
        published,
        "default ServiceAccount and kube-root-ca.crt in team-b"
    );
    let ca = ok(
        d,
        &[
            "get",
            "cm/kube-root-ca.crt",
            "-n",
            "team-b",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ],
        None,
    );
    assert!(ca.contains("BEGIN CERTIFICATE"), "{ca}");
    ok(d, &["create", "-f", "-"], Some(&probe(&kubectl_path)));
    let volume = ok(
        d,
        &[
            "get",
            "pod",
            "probe",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.spec.volumes[0].name}",
        ],
        None,
    );
    assert!(volume.starts_with("kube-api-access-"), "{volume}");
    let logs = |c: &str| kubectl(d, &["logs", "probe", "-n", "team-a", "-c", c], None).1;
    let done = wait_until(Duration::from_secs(60), || logs("client").contains("done"));
    assert!(
        done,
        "client logs:\n{}\nkoord:\n{}",
        logs("client"),
        koord.logs()
    );
    let out = logs("client");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "team-a", "{out}");
    assert_eq!(lines[1], "system:serviceaccount:team-a:reader", "{out}");
    assert!(lines.contains(&"pod/probe"), "{out}");
    assert!(
        out.contains(
            "pods is forbidden: User \"system:serviceaccount:team-a:reader\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-b\""
        ),
        "{out}"
    );
    let read = wait_until(Duration::from_secs(10), || {
        logs("nobody")
            .trim()
            .parse::<usize>()
            .is_ok_and(|n| n > 100)
    });
    assert!(read, "another user reads the token: {}", logs("nobody"));
    // `kubectl exec` runs in the container's mount namespace; the host sees no token.
    let token = ok(
        d,
        &[
            "exec", "probe", "-n", "team-a", "-c", "client", "--", "cat", TOKEN,
        ],
        None,
    );
    assert!(token.len() > 100, "{token}");
    assert_eq!(
        Path::new(TOKEN).exists(),
        token_on_host,
        "the mount stays in the pod"
    );
    let as_pod = |t: &str| {
        let server = format!("--server=https://127.0.0.1:{api}");
        let ca = format!(
            "--certificate-authority={}",
            d.join("pki").join("ca.crt").display()
        );
        let bearer = format!("--token={t}");
        let args = [
            "--kubeconfig=/dev/null",
            &server,
            &ca,
            &bearer,
            "get",
            "pods",
            "-n",
            "team-a",
        ];
        let out = Command::new("kubectl").args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    assert!(
        as_pod(&token).0,
        "the pod's token works: {}",
        as_pod(&token).1
    );
    ok(
        d,
        &[
            "delete",
            "pod",
            "probe",
            "-n",
            "team-a",
            "--wait",
            "--timeout=60s",
        ],
        None,
    );
    let (works, err) = as_pod(&token);
    assert!(
        !works && err.contains("Unauthorized"),
        "a bound token dies with its pod: {err}"
    );
    let volumes = d.join("noderuntime").join("volumes");
    let left = std::fs::read_dir(&volumes).map(|r| r.count()).unwrap_or(0);
    assert_eq!(left, 0, "the pod's volume files are removed");
    drop(koord);
}
