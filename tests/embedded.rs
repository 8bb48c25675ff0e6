//! `koord --role=all --embedded`: ready, the local node visible to kubectl, a clean
//! SIGTERM, and data kept on disk across a restart.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, free_port, http_get, wait_until};

fn start(dir: &std::path::Path, api: u16, admin: SocketAddr) -> Koord {
    let parent = format!("koord-test-{}-embedded", std::process::id());
    let pods = format!("127.0.0.1:{}", free_port());
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
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            ("KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR", pods.as_str()),
        ],
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
    let api_addr: SocketAddr = format!("127.0.0.1:{api}").parse().unwrap();
    let (code, body) = http_get(api_addr, "/api/v1/nodes/koord-node").unwrap();
    assert_eq!(code, 200, "{body}");
    let node: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        node["status"]["capacity"]["cpu"]
            .as_str()
            .unwrap()
            .parse::<u32>()
            .unwrap()
            >= 1
    );
    again.signal("TERM");
    assert_eq!(
        again
            .wait_exit(Duration::from_secs(30))
            .and_then(|s| s.code()),
        Some(0)
    );
}

/// The example LS and BE pods run on the embedded node runtime within seconds (root only).
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
    let running = wait_until(Duration::from_secs(20), || {
        let out = kubectl(dir, &["get", "pods", "-o", "wide"], None).unwrap_or_default();
        ["ls-cpu-loop", "be-cpu-loop"].iter().all(|p| {
            out.lines()
                .any(|l| l.starts_with(p) && l.contains("Running") && l.contains("koord-node"))
        })
    });
    assert!(
        running,
        "{}\n{}",
        kubectl(dir, &["get", "pods", "-o", "wide"], None).unwrap_or_default(),
        koord.logs()
    );
    kubectl(dir, &["delete", "-f", examples], None);
}
