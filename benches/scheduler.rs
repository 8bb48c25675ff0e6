//! In-process scheduling throughput with the default koord profile, kube-scheduler's
//! `SchedulingBasic` shape (nodes 4 CPU / 32 Gi / 110 pods, pods requesting 100m / 500 Mi):
//! 10,000 pods at 500 and 5,000 nodes, plus a variant with a NodeMetric on every node and
//! LoadAware thresholds on. Each pod is scheduled and assumed, as in the live loop; binding
//! (an API call) is not part of this number. Budget: ≥ 5,000 pods/s at 5,000 nodes.
//! The NUMA variant gives every node 32 CPUs (2 sockets × 2 NUMA nodes × 4 cores × 2
//! threads) and a NodeResourceTopology, and schedules LSR koord-prod pods asking 2 whole
//! CPUs, so NodeNUMAResource picks a cpuset for each on every feasible node it scores.
//! The Reservation variant holds 1,000 Available reservations; every tenth pod owns one.
//! The ElasticQuota + Coscheduling variant (the default profile, both plugins tracking):
//! 100 quotas (10 parents × 10 leaves, min 20 / max 200 CPUs each leaf), 5,000 quota pods
//! spread over them and 500 gangs of 10 pods (Strict, min 10); every pod is known to the
//! cluster before the run (pending pods count in quota requests and gang children), and
//! goes through PreEnqueue, the cycle, Reserve, assume and Permit, its gang released when
//! its tenth member passes.
//! Every variant drives `scheduler::cycle::run`, the cycle the live scheduler and `koord
//! explain` share, with the live scheduler's plugin-duration sampling on. Printed: pods/s
//! and the CPU the process spent per pod (steadier than wall time on a shared machine). `BENCH_NODES=5000` and `BENCH_ONLY=<name part>` narrow the run.
//! Run: `cargo bench --bench scheduler`.

use std::sync::Arc;
use std::time::Instant;

use koord::scheduler::config;
use koord::scheduler::cycle::{self, Outcome, Permit};
use koord::scheduler::framework::runtime::{Framework, Scope};
use koord::scheduler::framework::{ClusterState, PodInfo};
use serde_json::json;

mod common;

const PODS: usize = 10_000;

/// This process's CPU seconds so far (all threads).
fn cpu() -> f64 {
    common::cpu_secs(std::process::id())
}

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

/// kube-scheduler's defaults with LoadAwareScheduling and none of Koordinator's other
/// plugins (NodeNUMAResource, Reservation, DeviceShare, ElasticQuota, Coscheduling): what
/// those cost a plain pod is the difference to the default profile.
const NO_NUMA: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {disabled: [{name: "*"}], enabled: [{name: PrioritySort}]}
    filter: {enabled: [{name: LoadAwareScheduling}]}
    score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
    reserve: {enabled: [{name: LoadAwareScheduling}]}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: LeastAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: kubernetes.io/batch-cpu, weight: 1}, {name: kubernetes.io/batch-memory, weight: 1}]
  - name: LoadAwareScheduling
    args: {filterExpiredNodeMetrics: false, nodeMetricExpirationSeconds: 300, resourceWeights: {cpu: 1, memory: 1},
      usageThresholds: {cpu: 0, memory: 0}, estimatedScalingFactors: {cpu: 85, memory: 70}}
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

/// A NodeResourceTopology for a 2 × 2 × 4 × 2 node.
fn nrt(name: &str) -> koord::api::topology::NodeResourceTopology {
    let detail: Vec<serde_json::Value> = (0..32u32)
        .map(|id| json!({"id": id, "core": id / 2, "socket": id / 16, "node": id / 8}))
        .collect();
    let zones: Vec<serde_json::Value> = (0..4)
        .map(|n| {
            json!({"name": format!("node-{n}"), "type": "Node", "resources": [
            {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
            {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"}]})
        })
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": {
        "node.koordinator.sh/cpu-topology": json!({"detail": detail}).to_string()}},
        "topologyPolicies": ["None"], "zones": zones}))
    .unwrap()
}

fn numa_cluster(nodes: usize, now_ms: i64) -> ClusterState {
    let mut c = ClusterState::default();
    c.now_ms = now_ms;
    for i in 0..nodes {
        let name = format!("node-{i}");
        c.upsert_node(Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}),
            )
            .unwrap(),
        ));
        c.upsert_topology(&nrt(&name));
    }
    c
}

fn lsr_pods() -> Vec<PodInfo> {
    (0..PODS)
        .map(|i| {
            PodInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "namespace": "default",
                    "labels": {"koordinator.sh/qosClass": "LSR"}},
                "spec": {"schedulerName": "koord-scheduler", "priority": 9500, "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}})).unwrap()))
        })
        .collect()
}

/// Every pod through the one scheduling cycle the live scheduler runs (`cycle::run`:
/// PreEnqueue, Filter/Score, Reserve, PreBind, assume, Permit); returns (placed, released
/// at Permit).
fn drive(fw: &Framework, c: &mut ClusterState, pods: &[PodInfo], nodes: usize) -> (usize, usize) {
    let (mut start, mut placed, mut released) = (0, 0, 0);
    for p in pods {
        let a = cycle::run(fw, p, c, Scope::Live { start });
        if let Some(r) = &a.result {
            start = (start + r.processed) % nodes;
        }
        match a.outcome {
            Outcome::Placed { permit, .. } => {
                placed += 1;
                if let Permit::Allowed { released: r } = permit {
                    released += r.len();
                }
            }
            Outcome::Reservation { .. } => placed += 1,
            _ => {}
        }
    }
    (placed, released)
}

fn run_full(
    name: &str,
    nodes: usize,
    cfg: &config::SchedulerConfig,
    mut c: ClusterState,
    pods: &[PodInfo],
) {
    if skipped(name) {
        return;
    }
    let fw = framework(cfg);
    fw.setup(&mut c);
    let (t, cpu0) = (Instant::now(), cpu());
    let (placed, released) = drive(&fw, &mut c, pods, nodes);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{name:<44} {nodes:>5} nodes: {:>8.0} pods/s, {:>4.0} µs CPU per pod ({placed} of {} placed, {released} released at Permit, in {secs:.2} s)",
        pods.len() as f64 / secs,
        (cpu() - cpu0) * 1e6 / pods.len() as f64,
        pods.len()
    );
}

/// The profile's framework, its sampled plugin timings going to the scheduler's metrics
/// as in the live scheduler.
fn framework(cfg: &config::SchedulerConfig) -> Framework {
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let metrics = Arc::new(koord::scheduler::metrics::SchedulerMetrics::default());
    let _ = fw.observer.set(metrics.observer());
    fw
}

/// `BENCH_ONLY=<substring>` runs only the variants whose name contains it.
fn skipped(name: &str) -> bool {
    std::env::var("BENCH_ONLY").is_ok_and(|only| !name.contains(&only))
}

fn run_numa(nodes: usize, cfg: &config::SchedulerConfig) {
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    run_full(
        "NodeNUMAResource, LSR pods pinned 2 CPUs",
        nodes,
        cfg,
        numa_cluster(nodes, now),
        &lsr_pods(),
    );
}

/// 1,000 Available reservations of 1 CPU for app=web, one on every fifth node; every
/// tenth pod is an owner (allocateOnce: each reservation takes one).
fn run_reservations(nodes: usize, cfg: &config::SchedulerConfig) {
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let mut c = cluster(nodes, false, now);
    for i in 0..1000 {
        let r = json!({"metadata": {"name": format!("r-{i}"), "uid": format!("ru-{i}")},
            "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
            "status": {"phase": "Available", "nodeName": format!("node-{}", (i * 5) % nodes), "allocatable": {"cpu": "1", "memory": "1Gi"}}});
        c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    }
    let pods: Vec<PodInfo> = (0..PODS)
        .map(|i| {
            let app = if i % 10 == 0 { "web" } else { "other" };
            PodInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "namespace": "default", "labels": {"app": app}},
                "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}})).unwrap()))
        })
        .collect();
    run_full(
        "Reservation, 1,000 reservations, 1/10 owners",
        nodes,
        cfg,
        c,
        &pods,
    );
}

fn quota(name: &str, parent: Option<&str>, min: u32, max: u32) -> koord::api::quota::ElasticQuota {
    let mut labels = serde_json::Map::new();
    if let Some(p) = parent {
        labels.insert("quota.scheduling.koordinator.sh/parent".into(), json!(p));
    } else {
        labels.insert(
            "quota.scheduling.koordinator.sh/is-parent".into(),
            json!("true"),
        );
    }
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"min": {"cpu": min.to_string(), "memory": format!("{}Gi", min * 4)},
            "max": {"cpu": max.to_string(), "memory": format!("{}Gi", max * 4)}}}),
    )
    .unwrap()
}

fn quota_gang_pods() -> Vec<Arc<k8s_openapi::api::core::v1::Pod>> {
    (0..PODS)
        .map(|i| {
            let meta = if i % 2 == 0 {
                json!({"name": format!("q-{i}"), "namespace": "default",
                    "labels": {"quota.scheduling.koordinator.sh/name": format!("leaf-{}", (i / 2) % 100)}})
            } else {
                let g = (i / 2) % 500;
                json!({"name": format!("g{g}-{i}"), "namespace": "default",
                    "annotations": {"gang.scheduling.koordinator.sh/name": format!("gang-{g}"),
                        "gang.scheduling.koordinator.sh/min-available": "10"}})
            };
            Arc::new(serde_json::from_value(json!({"metadata": meta,
                "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}})).unwrap())
        })
        .collect()
}

fn run_quota_gang(nodes: usize, cfg: &config::SchedulerConfig) {
    let name = "ElasticQuota 100 quotas + 500 gangs";
    if skipped(name) {
        return;
    }
    let fw = framework(cfg);
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let mut c = cluster(nodes, false, now);
    fw.setup(&mut c);
    for p in 0..10 {
        c.quotas
            .upsert(&quota(&format!("parent-{p}"), None, 200, 2000))
            .unwrap();
        for l in 0..10 {
            let q = quota(
                &format!("leaf-{}", p * 10 + l),
                Some(&format!("parent-{p}")),
                20,
                200,
            );
            c.quotas.upsert(&q).unwrap();
        }
    }
    let pods = quota_gang_pods();
    for p in &pods {
        c.upsert_pod(p.clone());
    }
    let infos: Vec<PodInfo> = pods.into_iter().map(PodInfo::new).collect();
    let (t, cpu0) = (Instant::now(), cpu());
    let (placed, released) = drive(&fw, &mut c, &infos, nodes);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{name:<44} {nodes:>5} nodes: {:>8.0} pods/s, {:>4.0} µs CPU per pod ({placed} of {PODS} placed, {released} released at Permit, in {secs:.2} s)",
        PODS as f64 / secs,
        (cpu() - cpu0) * 1e6 / PODS as f64
    );
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
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    run_full(name, nodes, cfg, cluster(nodes, metrics, now), &pods());
}

fn main() {
    let default = config::default_config().unwrap();
    let loadaware = config::resolve(Some((LOADAWARE, "bench"))).unwrap();
    let no_numa = config::resolve(Some((NO_NUMA, "bench"))).unwrap();
    let sizes: Vec<usize> = match std::env::var("BENCH_NODES") {
        Ok(v) => v.split(',').filter_map(|n| n.parse().ok()).collect(),
        Err(_) => vec![500, 5000],
    };
    for nodes in sizes {
        run("default koord profile", nodes, &default, false);
        run(
            "kube-scheduler defaults + LoadAware only",
            nodes,
            &no_numa,
            false,
        );
        run(
            "LoadAware thresholds, NodeMetric on every node",
            nodes,
            &loadaware,
            true,
        );
        run_numa(nodes, &default);
        run_reservations(nodes, &default);
        run_quota_gang(nodes, &default);
    }
}
