//! The real binary with every role: readiness is earned, the admin endpoint serves its
//! four paths, and SIGTERM drains cleanly with exit 0.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Koord, free_port, http_get, wait_until};

/// A stand-in API server that answers `/version` and nothing else: enough for roles that
/// only check reachability.
struct StandIn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    fn start(port: u16) -> StandIn {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        StandIn {
            stop,
            thread: Some(thread),
        }
    }
}

fn answer(mut stream: std::net::TcpStream) {
    stream.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let body = if request_line.contains("/version") {
        r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"x","gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z","goVersion":"go","compiler":"gc","platform":"linux/amd64"}"#
    } else {
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}"#
    };
    let status = if request_line.contains("/version") {
        "200 OK"
    } else {
        "404 Not Found"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn kubeconfig(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             contexts:\n- name: s\n  context:\n    cluster: s\n    user: s\ncurrent-context: s\nusers:\n- name: s\n  user: {{}}\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn all_roles_earn_readiness_and_drain_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let kc = kubeconfig(dir.path(), api_port);
    let mut koord = Koord::start(
        &[
            "--role=all",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            "test-node",
        ],
        &[],
        dir.path(),
    );

    // The API server is not up yet: the admin endpoint answers, but not ready.
    assert!(
        wait_until(Duration::from_secs(20), || http_get(admin, "/readyz")
            .is_some()),
        "admin endpoint never came up:\n{}",
        koord.logs()
    );
    let (status, body) = http_get(admin, "/readyz").unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("[-]scheduler not ready"), "{body}");
    assert_eq!(http_get(admin, "/healthz").unwrap().0, 200);

    let _standin = StandIn::start(api_port);
    assert!(
        wait_until(Duration::from_secs(20), || http_get(admin, "/readyz")
            .is_some_and(|(s, _)| s == 200)),
        "never became ready:\n{}\n{}",
        http_get(admin, "/readyz").map(|r| r.1).unwrap_or_default(),
        koord.logs()
    );
    let (_, body) = http_get(admin, "/readyz").unwrap();
    for role in [
        "manager",
        "scheduler",
        "descheduler",
        "koordlet",
        "runtime-proxy",
    ] {
        assert!(body.contains(&format!("[+]{role} ok")), "{body}");
    }

    let (status, metrics) = http_get(admin, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(metrics.contains("koord_build_info"), "{metrics}");
    assert!(
        metrics.contains("koord_component_ready{component=\"koordlet\"} 1"),
        "{metrics}"
    );

    let (status, cfg) = http_get(admin, "/debug/config").unwrap();
    assert_eq!(status, 200);
    let cfg: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    assert_eq!(cfg["common"]["adminAddr"], admin.to_string());
    assert_eq!(cfg["common"]["nodeName"], "test-node");

    let started = Instant::now();
    koord.signal("TERM");
    let status = koord
        .wait_exit(Duration::from_secs(30))
        .expect("did not exit within the grace period");
    assert_eq!(status.code(), Some(0), "{}", koord.logs());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(koord.logs().contains("drained cleanly"), "{}", koord.logs());
}

#[test]
fn runtime_proxy_alone_needs_no_cluster_and_logs_json() {
    let dir = tempfile::tempdir().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut koord = Koord::start(
        &[
            "--role=runtime-proxy",
            "--admin-addr",
            &admin.to_string(),
            "--log-format=json",
        ],
        &[],
        dir.path(),
    );
    assert!(wait_until(Duration::from_secs(20), || http_get(
        admin, "/readyz"
    )
    .is_some_and(|(s, _)| s == 200)));
    koord.signal("INT");
    let status = koord.wait_exit(Duration::from_secs(30)).expect("no exit");
    assert_eq!(status.code(), Some(0), "{}", koord.logs());
    let first = koord.logs().lines().next().unwrap_or_default().to_string();
    let line: serde_json::Value = serde_json::from_str(&first).expect("json logs");
    assert!(line.get("level").is_some(), "{first}");
}
