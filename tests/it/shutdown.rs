//! The real binary with every role: readiness is earned, the admin endpoint serves its
//! four paths, and SIGTERM drains cleanly with exit 0.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Koord, free_port, http_get, kubeconfig, wait_until};

/// A real embedded API server on `port`, started late so the roles first see none.
fn start_api(port: u16) -> (tokio::runtime::Runtime, common::TestApi) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    let api = rt.block_on(common::TestApi::start_with(opts));
    (rt, api)
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
    assert_eq!(http_get(admin, "/livez").unwrap().0, 200, "alive");
    let (status, body) = http_get(admin, "/healthz").unwrap();
    assert_eq!(status, 503, "never synced, not healthy: {body}");
    assert!(body.contains("[-]scheduler never ready"), "{body}");

    let (rt, mut api) = start_api(api_port);
    assert!(
        wait_until(Duration::from_secs(20), || http_get(admin, "/readyz")
            .is_some_and(|(s, _)| s == 200)),
        "never became ready:\n{}\n{}",
        http_get(admin, "/readyz").map(|r| r.1).unwrap_or_default(),
        koord.logs()
    );
    assert_eq!(
        http_get(admin, "/healthz").unwrap().0,
        200,
        "synced once: healthy"
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
    rt.block_on(api.stop());
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
