//! Two `koord --role=all --embedded` on one machine with default flags (each with a data
//! dir of its own): the second finds the API server's and the admin endpoint's default
//! ports taken and uses free ones; the webhook port is free in embedded mode anyway. Each
//! kubeconfig reaches its own API server.

use crate::common;

use std::time::Duration;

use common::{Koord, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

async fn client_of(dir: &std::path::Path) -> Option<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).ok()?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .ok()?;
    kube::Client::try_from(cfg).ok()
}

async fn reachable(dir: &std::path::Path) -> bool {
    let Some(c) = client_of(dir).await else {
        return false;
    };
    Api::<ConfigMap>::namespaced(c, "default")
        .list(&Default::default())
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_embedded_instances_run_side_by_side_with_default_flags() {
    let _cpu = common::cpu_exclusive();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let start = |d: &tempfile::TempDir| {
        let data = d.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        Koord::start(
            &[
                "--role=all",
                "--embedded",
                "--data-dir",
                data.to_str().unwrap(),
            ],
            // The node runtime needs root; this is about the listeners.
            &[("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false")],
            d.path(),
        )
    };
    let data = [dirs[0].path().join("data"), dirs[1].path().join("data")];
    let first = start(&dirs[0]);
    let up = eventually(Duration::from_secs(30), || reachable(&data[0])).await;
    assert!(up, "first:\n{}", first.logs());
    let second = start(&dirs[1]);
    let up = eventually(Duration::from_secs(30), || reachable(&data[1])).await;
    assert!(up, "second:\n{}\nfirst:\n{}", second.logs(), first.logs());
    // Each is its own cluster: what one stores the other does not see.
    let a = client_of(&data[0]).await.unwrap();
    let b = client_of(&data[1]).await.unwrap();
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "only-in-a"}})).unwrap();
    Api::<ConfigMap>::namespaced(a, "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let in_b = Api::<ConfigMap>::namespaced(b, "default")
        .get_opt("only-in-a")
        .await
        .unwrap();
    assert!(in_b.is_none());
    assert!(
        second
            .logs()
            .contains("koord: admin endpoint at http://127.0.0.1:")
            || first
                .logs()
                .contains("koord: admin endpoint at http://127.0.0.1:"),
        "one of them moved its admin endpoint:\n{}",
        second.logs()
    );
    drop(second);
    drop(first);
}
