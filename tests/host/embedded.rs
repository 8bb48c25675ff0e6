//! `koord --role=all --embedded`: ready, the local node visible to kubectl, a clean
//! SIGTERM, and data kept on disk across a restart.

use crate::common;

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use common::{Koord, free_port, http_get, wait_until};

fn start(dir: &std::path::Path, api: u16, admin: SocketAddr) -> Koord {
    start_with(dir, api, admin, "embedded", &[])
}

/// `koord --role=all --embedded` with its node runtime under a cgroup parent named after
/// `name`, plus `envs`.
pub(crate) fn start_with(
    dir: &std::path::Path,
    api: u16,
    admin: SocketAddr,
    name: &str,
    envs: &[(&str, &str)],
) -> Koord {
    let parent = format!("koord-test-{}-{name}", std::process::id());
    let pods = format!("127.0.0.1:{}", free_port());
    let mut all = vec![
        (
            "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
            parent.as_str(),
        ),
        ("KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR", pods.as_str()),
    ];
    all.extend_from_slice(envs);
    Koord::start(
        &[
            "--role=all",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{api}"),
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.to_str().unwrap(),
            "--node-name",
            "koord-node",
        ],
        &all,
        dir,
    )
}

fn kubectl(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Option<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kcache"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn embedded_all_roles_start_serve_kubectl_and_keep_data() {
    // From start: the koordlet's first report (5 s in) must see a quiet node.
    let _cpu = common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut koord = start(dir.path(), api, admin);
    let ready = wait_until(Duration::from_secs(30), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(
        ready,
        "not ready: {:?}\n{}",
        http_get(admin, "/readyz"),
        koord.logs()
    );
    let (_, body) = http_get(admin, "/readyz").unwrap();
    assert!(
        body.contains("[+]apiserver ok") && body.contains("[+]scheduler ok"),
        "{body}"
    );
    assert!(dir.path().join("kubeconfig").exists());

    match kubectl(dir.path(), &["get", "nodes"], None) {
        Some(nodes) => assert!(nodes.contains("koord-node"), "{nodes}"),
        None => eprintln!("kubectl not on PATH; node check skipped"),
    }
    run_examples(dir.path(), &koord);
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\ndata:\n  a: \"1\"\n";
    let _ = kubectl(dir.path(), &["apply", "-f", "-"], Some(cm));

    koord.signal("TERM");
    let status = koord
        .wait_exit(Duration::from_secs(30))
        .expect("no exit after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", koord.logs());
    assert!(
        dir.path().join("apiserver").is_dir(),
        "sled data stays on disk"
    );

    // The data is still there after a restart.
    let mut again = start(dir.path(), api, admin);
    assert!(wait_until(Duration::from_secs(30), || http_get(
        admin, "/readyz"
    )
    .is_some_and(|(s, _)| s == 200)));
    if let Some(out) = kubectl(
        dir.path(),
        &["get", "configmap", "kept", "-o", "jsonpath={.data.a}"],
        None,
    ) {
        assert_eq!(out, "1");
    }
    if let Some(body) = kubectl(
        dir.path(),
        &["get", "node", "koord-node", "-o", "json"],
        None,
    ) {
        let node: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            node["status"]["capacity"]["cpu"]
                .as_str()
                .unwrap()
                .parse::<u32>()
                .unwrap()
                >= 1
        );
    }
    again.signal("TERM");
    assert_eq!(
        again
            .wait_exit(Duration::from_secs(30))
            .and_then(|s| s.code()),
        Some(0)
    );
}

/// The example LS and BE pods are scheduled by koord-scheduler and run on the embedded node
/// runtime; the BE pod once the colocation loop put batch resources on the node (root only).
fn run_examples(dir: &std::path::Path, koord: &Koord) {
    if !common::is_root() {
        eprintln!("skipping the example pods: the node runtime needs root");
        return;
    }
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/");
    if kubectl(dir, &["apply", "-f", examples], None).is_none() {
        eprintln!("kubectl not on PATH; example pods skipped");
        return;
    }
    let started = std::time::Instant::now();
    // Polled every 2 s: kubectl itself costs CPU, and a busy node has no batch capacity.
    // Usually ~10 s; up to 80 s covers a first NodeMetric report taken while the machine
    // was busy (too little batch capacity) and the next one, 60 s later.
    let running = wait_until(Duration::from_secs(80), || {
        std::thread::sleep(Duration::from_secs(2));
        let out = kubectl(dir, &["get", "pods", "-o", "wide"], None).unwrap_or_default();
        ["ls-cpu-loop", "be-cpu-loop"].iter().all(|p| {
            out.lines()
                .any(|l| l.starts_with(p) && l.contains("Running") && l.contains("koord-node"))
        })
    });
    eprintln!("example pods Running after {:?}", started.elapsed());
    let allocatable = [
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[*].status.allocatable}",
    ];
    assert!(
        running,
        "{}\nnode allocatable: {}\n{}",
        kubectl(dir, &["get", "pods", "-o", "wide"], None).unwrap_or_default(),
        kubectl(dir, &allocatable, None).unwrap_or_default(),
        koord.logs()
    );
    kubectl(dir, &["delete", "-f", examples], None);
}

/// What a local user without the kubeconfig gets: 401 (over HTTPS or plain HTTP), no pod
/// stored, nothing run; and the files that hold credentials and objects are private.
#[test]
fn strangers_get_401_and_files_are_private() {
    let _cpu = common::cpu_exclusive();
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let koord = start(dir.path(), api, admin);
    assert!(
        wait_until(Duration::from_secs(30), || {
            http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
        }),
        "{}",
        koord.logs()
    );
    let marker = format!("{}-stranger", common::marker());
    let outcome = stranger_posts_a_pod(api, &dir.path().join("kubeconfig"), &marker);
    assert_eq!(outcome.lines().next(), Some("https 401"), "{outcome}");
    assert!(outcome.contains("plain refused"), "{outcome}");
    if common::is_root() {
        assert!(outcome.contains("kubeconfig unreadable"), "{outcome}");
    }
    std::thread::sleep(Duration::from_secs(2));
    if let Some(pods) = kubectl(dir.path(), &["get", "pods", "-A", "-o", "name"], None) {
        assert!(!pods.contains("stranger"), "the pod was stored: {pods}");
    }
    let running = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
    });
    assert!(!running, "the stranger's command runs");

    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("kubeconfig")), 0o600);
    assert_eq!(mode(dir.path()), 0o700, "the data directory");
    for sub in ["apiserver", "pki"] {
        let path = dir.path().join(sub);
        assert_eq!(mode(&path), 0o700, "{sub}");
        for f in std::fs::read_dir(&path).unwrap().flatten() {
            if f.file_type().unwrap().is_file() {
                assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
            }
        }
    }
}

/// Runs python3 (as `nobody` when this test is root) posting a pod without credentials;
/// prints what happened, one finding per line.
fn stranger_posts_a_pod(port: u16, kubeconfig: &std::path::Path, marker: &str) -> String {
    use std::os::unix::process::CommandExt;
    let script = r#"
import http.client, json, ssl, sys
port, kubeconfig, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stranger"},
       "spec": {"nodeName": "koord-node", "containers": [{"name": "c", "image": "busybox",
                "command": ["sh", "-c", "sleep 600 # " + marker]}]}}
c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl._create_unverified_context(), timeout=10)
c.request("POST", "/api/v1/namespaces/default/pods", body=json.dumps(pod),
          headers={"Content-Type": "application/json"})
print("https", c.getresponse().status)
try:
    p = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    p.request("POST", "/api/v1/namespaces/default/pods", body=json.dumps(pod),
              headers={"Content-Type": "application/json"})
    print("plain answered", p.getresponse().status)
except Exception as e:
    print("plain refused", type(e).__name__)
try:
    open(kubeconfig).read()
    print("kubeconfig readable")
except PermissionError:
    print("kubeconfig unreadable")
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.args([
        "-c",
        script,
        &port.to_string(),
        kubeconfig.to_str().unwrap(),
        marker,
    ])
    .current_dir("/");
    if common::is_root() {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().expect("run python3");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What a client was told last about one ConfigMap.
#[derive(Debug, Clone, PartialEq)]
enum Acked {
    Present(String),
    Absent,
    /// A request was in flight when the server died: either outcome is fine.
    Unknown,
}

type Ledger = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Acked>>>;

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn rv_of(cm: &k8s_openapi::api::core::v1::ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// One writer: creates, patches and deletes its own ConfigMaps until the server dies,
/// recording every acknowledged outcome and the highest resourceVersion it was given.
async fn writer(
    client: kube::Client,
    prefix: String,
    ledger: Ledger,
    max_rv: std::sync::Arc<std::sync::atomic::AtomicU64>,
    mut seed: u64,
) {
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
    let mut live: Vec<String> = Vec::new();
    for i in 0.. {
        let roll = xorshift(&mut seed) % 10;
        let (name, after) = if live.is_empty() || roll < 5 {
            (format!("{prefix}-{i}"), Acked::Present(i.to_string()))
        } else if roll < 8 {
            let n = live[(xorshift(&mut seed) as usize) % live.len()].clone();
            (n, Acked::Present(i.to_string()))
        } else {
            let n = live.swap_remove((xorshift(&mut seed) as usize) % live.len());
            (n, Acked::Absent)
        };
        let before = ledger.lock().unwrap().insert(name.clone(), Acked::Unknown);
        let data = serde_json::json!({"data": {"v": i.to_string()}});
        let result = match (&after, &before) {
            (Acked::Absent, _) => cms.delete(&name, &DeleteParams::default()).await.map(|_| 0),
            (_, Some(Acked::Present(_))) => cms
                .patch(&name, &PatchParams::default(), &Patch::Merge(&data))
                .await
                .map(|c| rv_of(&c)),
            _ => {
                let cm = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name}, "data": {"v": i.to_string()}
                }))
                .unwrap();
                cms.create(&PostParams::default(), &cm)
                    .await
                    .map(|c| rv_of(&c))
            }
        };
        match result {
            Ok(rv) => {
                max_rv.fetch_max(rv, std::sync::atomic::Ordering::SeqCst);
                if after != Acked::Absent && !live.contains(&name) {
                    live.push(name.clone());
                }
                ledger.lock().unwrap().insert(name, after);
            }
            Err(_) => return,
        }
    }
}

/// `kill -9` at random moments while clients write: after each restart every acknowledged
/// write is there, no acknowledged deletion is undone, and new resourceVersions are above
/// every acknowledged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write() {
    let _cpu = common::cpu_exclusive();
    use std::sync::atomic::AtomicU64;
    let dir = tempfile::tempdir().unwrap();
    let ledger: Ledger = Default::default();
    let max_rv = std::sync::Arc::new(AtomicU64::new(0));
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed: {seed}");
    for round in 0..5 {
        let api = free_port();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut koord = Koord::start(
            &[
                "--embedded",
                "--embedded-addr",
                &format!("127.0.0.1:{api}"),
                "--admin-addr",
                &admin.to_string(),
                "--data-dir",
                dir.path().to_str().unwrap(),
            ],
            &[("KOORD_EMBEDDED__REGISTER_LOCAL_NODE", "false")],
            dir.path(),
        );
        let ready = tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(30), || {
                http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
            })
        });
        assert!(ready.await.unwrap(), "round {round}: {}", koord.logs());
        let client = client_of(dir.path()).await;
        check_ledger(&client, &ledger, &max_rv, round).await;
        let writers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(writer(
                    client.clone(),
                    format!("r{round}-w{w}"),
                    ledger.clone(),
                    max_rv.clone(),
                    xorshift(&mut seed),
                ))
            })
            .collect();
        let wait = 200 + xorshift(&mut seed) % 1300;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        koord.signal("KILL");
        koord.wait_exit(Duration::from_secs(10)).expect("killed");
        for w in writers {
            let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
        }
    }
    let acked = ledger.lock().unwrap().len();
    eprintln!("{acked} ConfigMaps written over 5 crashes");
    assert!(acked > 50, "too few writes to mean anything: {acked}");
}

async fn client_of(dir: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

/// Every entry of the ledger holds on the restarted server; unknown ones take what is
/// there. A fresh write's resourceVersion is above every acknowledged one.
async fn check_ledger(
    client: &kube::Client,
    ledger: &Ledger,
    max_rv: &std::sync::atomic::AtomicU64,
    round: usize,
) {
    use kube::api::{Api, ListParams, PostParams};
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let list = cms.list(&ListParams::default()).await.unwrap();
    let actual: std::collections::BTreeMap<String, String> = list
        .items
        .iter()
        .filter_map(|c| {
            let v = c.data.as_ref()?.get("v")?.clone();
            Some((c.metadata.name.clone()?, v))
        })
        .collect();
    let mut lost = Vec::new();
    for (name, want) in ledger.lock().unwrap().iter_mut() {
        let got = actual
            .get(name)
            .map_or(Acked::Absent, |v| Acked::Present(v.clone()));
        if *want == Acked::Unknown {
            *want = got;
        } else if *want != got {
            lost.push(format!("{name}: acknowledged {want:?}, found {got:?}"));
        }
    }
    assert!(lost.is_empty(), "round {round}: {lost:#?}");
    let probe = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("probe-{round}")}
    }))
    .unwrap();
    let rv = rv_of(&cms.create(&PostParams::default(), &probe).await.unwrap());
    let acked = max_rv.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        rv > acked,
        "round {round}: new resourceVersion {rv} <= acknowledged {acked}"
    );
}
