//! In-process scheduling throughput with the default koord profile, kube-scheduler's
//! `SchedulingBasic` shape (nodes 4 CPU / 32 Gi / 110 pods, pods requesting 100m / 500 Mi):
//! 10,000 pods at 500 and 5,000 nodes, plus a variant with a NodeMetric on every node and
//! LoadAware thresholds on. Each pod is scheduled and assumed, as in the live loop; binding
//! (an API call) is not part of this number. Budget: ≥ 5,000 pods/s at 5,000 nodes.
//! Run: `cargo bench --bench scheduler`.

use std::sync::Arc;
use std::time::Instant;

use koord::scheduler::config;
use koord::scheduler::framework::runtime::Scope;
use koord::scheduler::framework::{ClusterState, PodInfo};
use serde_json::json;

const PODS: usize = 10_000;

const LOADAWARE: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {disabled: [{name: "*"}], enabled: [{name: PrioritySort}]}
    filter: {enabled: [{name: LoadAwareScheduling}]}
    score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
    reserve: {enabled: [{name: LoadAwareScheduling}]}
  pluginConfig:
  - name: LoadAwareScheduling
    args: {usageThresholds: {cpu: 65, memory: 95}}
"#;

fn cluster(nodes: usize, metrics: bool, now_ms: i64) -> ClusterState {
    let mut c = ClusterState::default();
    c.now_ms = now_ms;
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms - 5_000)
        .unwrap()
        .to_string();
    for i in 0..nodes {
        let name = format!("node-{i}");
        c.upsert_node(Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}),
            )
            .unwrap(),
        ));
        if metrics {
            c.upsert_metric(Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": {},
                "status": {"updateTime": t, "nodeMetric": {"nodeUsage": {"resources": {"cpu": format!("{}m", (i % 10) * 200), "memory": "4Gi"}}}}})).unwrap()));
        }
    }
    c
}

fn pods() -> Vec<PodInfo> {
    (0..PODS)
        .map(|i| {
            PodInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "namespace": "default"},
                "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}})).unwrap()))
        })
        .collect()
}

fn run(name: &str, nodes: usize, cfg: &config::SchedulerConfig, metrics: bool) {
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let mut c = cluster(nodes, metrics, now);
    let pods = pods();
    let t = Instant::now();
    let mut start = 0;
    let mut placed = 0;
    for p in &pods {
        let r = fw.schedule(p, &c, Scope::Live { start });
        start = (start + r.processed) % nodes;
        if let Some(n) = r.node {
            c.assume(p, &n);
            placed += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{name:<44} {nodes:>5} nodes: {:>8.0} pods/s ({placed} of {PODS} placed in {secs:.2} s)",
        PODS as f64 / secs
    );
}

fn main() {
    let default = config::default_config().unwrap();
    let loadaware = config::resolve(Some((LOADAWARE, "bench"))).unwrap();
    for nodes in [500, 5000] {
        run("default koord profile", nodes, &default, false);
        run(
            "LoadAware thresholds, NodeMetric on every node",
            nodes,
            &loadaware,
            true,
        );
    }
}
