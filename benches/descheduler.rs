//! One descheduling pass (LowNodeLoad + MigrationController's filter and limits) at 1,000
//! nodes / 10,000 pods, 10 % of the nodes hot — the work the descheduler's leader does every
//! `deschedulingInterval`. Budget: < 200 ms per pass and ≤ 64 MiB RSS for the process
//! (measured here as this process's VmRSS with the whole world in memory, the same objects
//! the live role lists). Run: `cargo bench --bench descheduler`.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::slo::NodeMetric;
use koord::descheduler::config;
use koord::descheduler::framework::Plugins;
use koord::descheduler::framework::world::World;
use serde_json::json;

const NODES: usize = 1_000;
const PODS_PER_NODE: usize = 10;

const CONFIG: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance: {enabled: [{name: LowNodeLoad}]}
  pluginConfig:
  - name: MigrationController
    args: {maxMigratingPerNode: 2}
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
      anomalyCondition: {consecutiveAbnormalities: 1}
"#;

fn world(now: &str) -> World {
    let (mut nodes, mut pods, mut metrics, mut others) = (
        Vec::<Node>::new(),
        Vec::<Pod>::new(),
        Vec::<NodeMetric>::new(),
        Vec::new(),
    );
    for n in 0..NODES {
        let name = format!("node-{n}");
        let hot = n % 10 == 0;
        nodes.push(
            serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}}))
            .unwrap(),
        );
        let mut pm = Vec::new();
        for p in 0..PODS_PER_NODE {
            let pname = format!("pod-{n}-{p}");
            let rs = format!("rs-{}", (n * PODS_PER_NODE + p) % 500);
            pods.push(serde_json::from_value(json!({"metadata": {"name": pname, "namespace": format!("ns-{}", p % 5), "uid": pname,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs, "controller": true}]},
                "spec": {"nodeName": name, "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})).unwrap());
            let cpu = if hot { "2600m" } else { "800m" };
            pm.push(json!({"namespace": format!("ns-{}", p % 5), "name": pname, "podUsage": {"resources": {"cpu": cpu, "memory": "4Gi"}}}));
        }
        metrics.push(serde_json::from_value(json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": name}, "spec": {}, "status": {"updateTime": now,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "10", "memory": "40Gi"}}, "systemUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}},
            "podsMetric": pm}})).unwrap());
    }
    for r in 0..500 {
        others.push(json!({"kind": "ReplicaSet", "metadata": {"name": format!("rs-{r}"), "uid": format!("rs-{r}")}, "spec": {"replicas": 20}}));
    }
    World::build(nodes, pods, metrics, &[], &others)
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let now = k8s_openapi::jiff::Timestamp::now();
    let w = world(&now.to_string());
    let rss_world = rss_mib();
    let cfg = config::parse(CONFIG, "bench").unwrap();
    let mut times = Vec::new();
    let mut evictions = 0;
    for _ in 0..20 {
        let mut plugins = Plugins::build(&cfg, 0).unwrap();
        let t = Instant::now();
        let r = plugins.run(&w, now.as_millisecond());
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        evictions = r.evictions.len();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let median = times[times.len() / 2];
    let rss = rss_mib();
    println!(
        "descheduler pass, {NODES} nodes / {} pods (100 hot): median {median:.1} ms (min {:.1}, max {:.1}), {evictions} migrations planned ({}), RSS {rss:.1} MiB ({}; {rss_world:.1} MiB once the world was built)",
        NODES * PODS_PER_NODE,
        times[0],
        times[times.len() - 1],
        if median < 200.0 {
            "within the 200 ms budget"
        } else {
            "OVER the 200 ms budget"
        },
        if rss <= 64.0 {
            "within 64 MiB"
        } else {
            "OVER 64 MiB"
        },
    );
}
