//! Koordinator's helm chart, run as a cluster runs it (see `podrun`): on the embedded API
//! server with RBAC and CRD schemas enforced, the chart's objects are applied as they are
//! — its CRDs (over koord's), ServiceAccounts, ClusterRoles and bindings, ConfigMaps,
//! webhook configurations, Deployments and DaemonSet (chart v1.8.0 at its default values,
//! tests/fixtures/koordinator) — and each container runs with koord's binary under its
//! `command`, as its ServiceAccount. Each passes the chart's readiness probe and does its
//! job (`rolejobs`), and no role logs a request refused (403 or 422). One setting is an
//! operator's: LowNodeLoad, which the chart ships commented out, is switched on (with a
//! 2 s interval, so the test does not wait 50 s for five passes).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::common::wait_until;
use crate::podrun::{Cluster, NAMESPACE, Running, Workload, docs_of, logs, refused};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/koordinator");
const NODE: &str = "chart-node";
const HOT: &str = "hot-node";

fn fixture(path: &str) -> Vec<Value> {
    docs_of(&std::fs::read_to_string(Path::new(FIXTURES).join(path)).unwrap())
}

fn fixture_dir(dir: &str) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(Path::new(FIXTURES).join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| docs_of(&std::fs::read_to_string(f).unwrap()))
        .collect()
}

/// The chart's ConfigMaps by name, with LowNodeLoad switched on as an operator would.
pub(crate) fn config_maps() -> BTreeMap<String, ConfigMap> {
    [
        "koord-scheduler-config.yaml",
        "koord-descheduler-config.yaml",
        "slo-controller-config.yaml",
    ]
    .iter()
    .flat_map(|f| fixture(f))
    .map(|d| {
        let mut cm: ConfigMap = serde_json::from_value(d).unwrap();
        if let Some(text) = cm
            .data
            .as_mut()
            .and_then(|d| d.get_mut("koord-descheduler-config"))
        {
            *text = with_lownodeload(text);
        }
        (cm.metadata.name.clone().unwrap(), cm)
    })
    .collect()
}

/// The descheduler configuration with LowNodeLoad enabled, every 2 s.
pub(crate) fn with_lownodeload(text: &str) -> String {
    let commented = "    # disable LowNodeLoad by default\n    # balance:\n    #   enabled:\n    #   - name: LowNodeLoad\n";
    let enabled = "    balance:\n      enabled:\n      - name: LowNodeLoad\n";
    let out = if text.contains(enabled) {
        text.to_string()
    } else {
        assert!(text.contains(commented), "fixture layout changed:\n{text}");
        text.replace(commented, enabled)
    };
    out.replace("deschedulingInterval: 10s", "deschedulingInterval: 2s")
}

/// Where the chart's device daemon writes (its hostPath, the koordlet's default).
const DEVICE_FILE: &str = "/var/run/koordlet/xpu-device-infos/ic-device";

/// The device daemon, run as the chart runs it, writes the host's devices where the
/// koordlet reads them (root only: the path is the host's /var/run).
fn check_device_daemon(running: &Running) {
    if !crate::common::is_root() {
        eprintln!("skipped the device daemon's file check: {DEVICE_FILE} needs root");
        return;
    }
    let written = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(DEVICE_FILE)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
            .is_some()
    });
    assert!(
        written,
        "no device list at {DEVICE_FILE}:\n{}",
        running.koord.logs()
    );
}

/// What the chart's koord-manager template creates besides its Deployment and RBAC: the
/// manager's ServiceAccount and the webhook Secret (empty on a fresh install; the manager
/// writes the certificates into it). The webhook Service comes with its endpoint.
async fn manager_objects(c: &kube::Client) {
    let pp = PostParams::default();
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "koordinator-webhook-certs",
        "namespace": NAMESPACE}}))
        .unwrap();
    Api::<Secret>::namespaced(c.clone(), NAMESPACE)
        .create(&pp, &s)
        .await
        .unwrap();
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "koord-manager",
        "namespace": NAMESPACE}}))
    .unwrap();
    Api::<ServiceAccount>::namespaced(c.clone(), NAMESPACE)
        .create(&pp, &sa)
        .await
        .unwrap();
}

/// Runs every workload of `docs` on `node`; the manager's webhook port, once it runs.
pub(crate) async fn run_all(
    cluster: &Cluster,
    docs: &[Value],
    cms: &BTreeMap<String, ConfigMap>,
) -> (Vec<Running>, u16) {
    let mut running = Vec::new();
    let mut webhook = 0;
    for w in Workload::all(docs) {
        let r = cluster.run(&w, NODE, cms).await;
        if let Some(p) = r.ports.get(&9876) {
            webhook = *p;
        }
        running.push(r);
    }
    for r in &running {
        r.wait_ready(Duration::from_secs(60));
    }
    (running, webhook)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_koord_under_its_crds_and_rbac() {
    // The device daemon writes into the host's /var/run; remove what it leaves.
    let device_dir = Path::new(DEVICE_FILE).parent().unwrap();
    let made = [device_dir, device_dir.parent().unwrap()].map(|d| (d, !d.exists()));
    let cluster = Cluster::start(&[(NODE, "32", "64Gi"), (HOT, "8", "16Gi")]).await;
    let c = cluster.client();
    let cms = config_maps();
    let mut docs = fixture_dir("crds");
    docs.extend(fixture_dir("rbac"));
    docs.extend(cms.values().map(|cm| serde_json::to_value(cm).unwrap()));
    docs.extend(fixture("webhookconfiguration.yaml"));
    let workloads = fixture("chart-workloads.yaml");
    docs.extend(workloads.iter().cloned());
    cluster.apply(&docs).await;
    manager_objects(&c).await;
    crate::rolejobs::hot_node(&c, HOT).await;
    let (running, webhook) = run_all(&cluster, &workloads, &cms).await;
    assert!(webhook > 0, "the chart's manager declares its webhook port");
    crate::rolejobs::webhook_endpoint(&c, NAMESPACE, webhook).await;
    if let Some(d) = running.iter().find(|r| r.name == "koord-device-daemon") {
        check_device_daemon(d);
    }
    let all_logs = || logs(&running);
    crate::rolejobs::check(&c, NODE, HOT, &all_logs).await;
    let refusals = refused(&running);
    assert!(
        refusals.is_empty(),
        "requests refused under the chart's RBAC and CRDs:\n{}",
        refusals.join("\n")
    );
    drop(running);
    let _ = std::fs::remove_file(DEVICE_FILE);
    for (d, _) in made.iter().filter(|(_, new)| *new) {
        let _ = std::fs::remove_dir(d);
    }
    let mut cluster = cluster;
    cluster.api.stop().await;
}
