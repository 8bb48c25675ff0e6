//! One descheduling pass (LowNodeLoad + MigrationController's filter and limits) at 1,000
//! nodes / 10,000 pods, 10 % of the nodes hot — the work the descheduler's leader does every
//! `deschedulingInterval`. Budget: < 200 ms per pass and ≤ 64 MiB RSS for the process
//! (measured here as this process's VmRSS with the whole world in memory: pods as the
//! slim views the live role keeps).
//!
//! Then the process the budget is about: `koord --embedded --sim-nodes=1000` with 10,000
//! pods (500 ReplicaSets) and 1,000 NodeMetrics written over HTTP, and a separate
//! `koord --role=descheduler` (dry run, a pass every 5 s) listing and deciding; its peak
//! and final RSS (VmHWM, VmRSS) and CPU per pass. `DESCHEDULER_SKIP_PROCESS=1` skips it.
//! Run: `cargo bench --bench descheduler`.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::slo::NodeMetric;
use koord::descheduler::configfile as config;
use koord::descheduler::framework::Plugins;
use koord::descheduler::framework::podview::PodView;
use koord::descheduler::framework::world::World;
use serde_json::json;

mod common;

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
        Vec::<std::sync::Arc<PodView>>::new(),
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
            // Each pod becomes its view at once, as the live role's paged list does.
            pods.push(std::sync::Arc::new(PodView::from(&serde_json::from_value::<Pod>(json!({"metadata": {"name": pname, "namespace": format!("ns-{}", p % 5), "uid": pname,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs, "controller": true}]},
                "spec": {"nodeName": name, "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})).unwrap())));
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
    World::build(
        nodes.into_iter().map(std::sync::Arc::new),
        pods,
        metrics,
        &[],
        &others,
    )
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
    in_process();
    if std::env::var("DESCHEDULER_SKIP_PROCESS").is_err() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(process::run());
    }
}

fn in_process() {
    let now = k8s_openapi::jiff::Timestamp::now();
    let w = world(&now.to_string());
    let rss_world = rss_mib();
    let cfg = config::parse(CONFIG, "bench").unwrap();
    let mut times = Vec::new();
    let mut evictions = 0;
    for _ in 0..20 {
        let mut plugins = Plugins::build(&cfg, 0, koord::descheduler::plugins::registry).unwrap();
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

/// `koord --role=descheduler` as its own process against an embedded API server.
mod process {
    use std::time::{Duration, Instant};

    use futures::StreamExt;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use koord::api::slo::NodeMetric;
    use kube::Api;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::common::{cpu_secs, embedded, free_port, koord, ready, wait};
    use super::{NODES, PODS_PER_NODE};

    fn status_kib(pid: u32, field: &str) -> f64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    }

    async fn objects(client: &kube::Client) {
        let pp = PostParams::default();
        let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let mut uids = Vec::new();
        for r in 0..500 {
            let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": format!("rs-{r}")},
                "spec": {"replicas": 20, "selector": {"matchLabels": {"rs": format!("rs-{r}")}},
                    "template": {"metadata": {"labels": {"rs": format!("rs-{r}")}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
            .unwrap();
            uids.push(rs_api.create(&pp, &rs).await.unwrap().metadata.uid.unwrap());
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        futures::stream::iter(0..NODES * PODS_PER_NODE)
            .for_each_concurrent(64, |i| {
                let (pods, r) = (pods.clone(), i % 500);
                let uid = uids[r].clone();
                async move {
                    let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("pod-{i}"), "labels": {"rs": format!("rs-{r}")},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{r}"), "uid": uid, "controller": true}]},
                        "spec": {"nodeName": format!("sim-node-{}", i / PODS_PER_NODE), "schedulerName": "koord-scheduler",
                            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]}}))
                    .unwrap();
                    pods.create(&PostParams::default(), &p).await.unwrap();
                }
            })
            .await;
        let metrics: Api<NodeMetric> = Api::all(client.clone());
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        futures::stream::iter(0..NODES)
            .for_each_concurrent(16, |n| {
                let (metrics, now) = (metrics.clone(), now.clone());
                async move {
                    let name = format!("sim-node-{n}");
                    let cpu = if n % 10 == 0 { "2600m" } else { "800m" };
                    let pm: Vec<_> = (0..PODS_PER_NODE)
                        .map(|p| json!({"namespace": "default", "name": format!("pod-{}", n * PODS_PER_NODE + p),
                            "podUsage": {"resources": {"cpu": cpu, "memory": "4Gi"}}}))
                        .collect();
                    let m: NodeMetric = serde_json::from_value(json!({"apiVersion": "slo.koordinator.sh/v1alpha1",
                        "kind": "NodeMetric", "metadata": {"name": name}, "spec": {}}))
                    .unwrap();
                    metrics.create(&PostParams::default(), &m).await.unwrap();
                    let node_cpu = if n % 10 == 0 { "27" } else { "9" };
                    let st = json!({"status": {"updateTime": now,
                        "nodeMetric": {"nodeUsage": {"resources": {"cpu": node_cpu, "memory": "40Gi"}}, "systemUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}},
                        "podsMetric": pm}});
                    metrics
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(st))
                        .await
                        .unwrap();
                }
            })
            .await;
    }

    /// The config file, plus `DESCHEDULER_CHILD_ENV` (`K=V,K=V`) for experiments.
    fn child_env(conf: &std::path::Path) -> Vec<(&'static str, String)> {
        let mut env = vec![("KOORD_DESCHEDULER__CONFIG_FILE", conf.display().to_string())];
        for kv in std::env::var("DESCHEDULER_CHILD_ENV")
            .unwrap_or_default()
            .split(',')
        {
            if let Some((k, v)) = kv.split_once('=') {
                env.push((String::leak(k.to_string()), v.to_string()));
            }
        }
        env
    }

    pub async fn run() {
        let dir = tempfile::tempdir().unwrap();
        let (server, kubeconfig, client) = embedded(dir.path(), &[], NODES as u32, "128Gi").await;
        let t = Instant::now();
        objects(&client).await;
        let made = t.elapsed().as_secs_f64();
        let conf = dir.path().join("descheduler.yaml");
        // The in-process pass's profile, as a dry run every 5 s.
        let config = super::CONFIG.replacen(
            "kind: DeschedulerConfiguration\n",
            "kind: DeschedulerConfiguration\ndeschedulingInterval: 5s\ndryRun: true\n",
            1,
        );
        std::fs::write(&conf, config).unwrap();
        let admin = format!("127.0.0.1:{}", free_port());
        let d = koord(
            &[
                "--role=descheduler".into(),
                "--kubeconfig".into(),
                kubeconfig.display().to_string(),
                "--admin-addr".into(),
                admin.clone(),
                "--data-dir".into(),
                dir.path().join("desched").display().to_string(),
            ],
            &child_env(&conf),
        );
        wait("descheduler ready", || ready(&admin));
        let rss_ready = status_kib(d.pid(), "VmRSS:") / 1024.0;
        let cpu0 = cpu_secs(d.pid());
        let secs = 60.0;
        let hwm_ready = status_kib(d.pid(), "VmHWM:") / 1024.0;
        std::thread::sleep(Duration::from_secs_f64(secs));
        let cpu = cpu_secs(d.pid()) - cpu0;
        let passes = secs / 5.0;
        let (hwm, rss) = (
            status_kib(d.pid(), "VmHWM:") / 1024.0,
            status_kib(d.pid(), "VmRSS:") / 1024.0,
        );
        println!(
            "koord --role=descheduler against --embedded --sim-nodes={NODES}, {} pods, {NODES} NodeMetrics (written in {made:.1} s), dry run every 5 s for {secs:.0} s: peak RSS {hwm:.1} MiB, RSS {rss:.1} MiB at the end, {rss_ready:.1} MiB when ready (peak {hwm_ready:.1} MiB by then) ({}), CPU {:.0} ms per pass ({:.1} % of a core)",
            NODES * PODS_PER_NODE,
            if hwm <= 64.0 {
                "within 64 MiB"
            } else {
                "OVER 64 MiB"
            },
            cpu * 1000.0 / passes,
            cpu * 100.0 / secs,
        );
        drop(d);
        drop(server);
    }
}
