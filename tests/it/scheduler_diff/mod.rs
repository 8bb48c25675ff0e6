//! The live scheduler and `koord explain schedule` are two drivers of one cycle: on seeded
//! random clusters (NodeMetrics with and without `spec`, CPU topologies, GPUs, an
//! ElasticQuota, a pending Reservation and its owners, a gang, a gang placed in its network
//! topology, pods of every QoS and size, some with pod-level resources, some under a NUMA
//! topology policy with GPUs spread over NUMA nodes, a Reservation taking over a running pod,
//! MetaX GPUs locked per pod (DevicePluginAdaption), a gang scheduled inline, NPU shares by
//! GPU shared-resource template, spreading by `matchLabelKeys` with `nodeTaintsPolicy`, the
//! scheduler-name label; then fixed parts: a claim provisioned under CSIStorageCapacity,
//! devices taken by `device-allocate-hint` strategies and exclusive policies, a Reservation
//! that preempts, a profile scoring by `RequestedToCapacityRatio`) each new pod is first
//! explained on a snapshot of the API server, then created and scheduled by the live
//! scheduler running in process with its real watches. Every pod must land on the node
//! explain chose, and that node must be one of explain's highest `total`s; a gang's members
//! together on the nodes explain chose for them (the live queue may take them in either
//! order); the devices live wrote on a pod are the ones explain gave it, and a preemption
//! explain nominates deletes the victims it named and places the preemptor there.
//! `KOORD_DIFF_SEEDS=N` runs more seeds.

mod api;
mod cluster;
mod extra;

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::TestApi;
use api::{create, leave, live_result, snapshot};
use cluster::Rng;
use koord::explain::schedule::Placement;
use koord::kernel::{Shutdown, Tasks};
use serde_json::{Value, json};

/// Pods each run must see placed at least once.
const NAMED: &[&str] = &[
    "default/spread-a",
    "default/named",
    "default/hint-pcie",
    "default/hint-all",
    "default/hint-count",
    "default/csi-user",
    "default/ratio",
];

/// What a seed's placements exercised, so the test cannot pass by avoiding the plugins.
fn exercised(p: &koord::explain::schedule::Placement, seen: &mut BTreeSet<String>) {
    seen.extend(p.details.keys().map(|k| k.to_string()));
    if p.details
        .get("devices")
        .is_some_and(|d| d.to_string().contains("gpuSharedResourceTemplate"))
    {
        seen.insert("template".into());
    }
    for v in p.verdicts.values() {
        if v.reason.contains("has been locked") {
            seen.insert("node locked".into());
        }
        if v.reason == "node(s) did not have enough free storage" {
            seen.insert("not enough storage".into());
        }
        if v.reason == "no matched GPU shared resource template" {
            seen.insert("no template".into());
        }
        if let Some(plugin) = v.plugin {
            seen.insert(plugin.to_string());
        }
        for (plugin, score) in &v.scores {
            if *score != 0 {
                seen.insert(format!("{plugin} scored"));
            }
        }
    }
    if p.node.is_some() && NAMED.contains(&p.pod.as_str()) {
        seen.insert(p.pod.clone());
    }
    if p.pod.starts_with("reservation/") && p.node.is_some() {
        seen.insert("reservation placed".into());
    }
}

/// Koordinator's default profile with Coscheduling's `awareNetworkTopology` and
/// Reservation's `enablePreemption`, as the chart sets them, the `DevicePluginAdaption` and
/// `EnableInlineBatchSchedule` gates on; and a copy scoring by `RequestedToCapacityRatio`.
fn config() -> koord::scheduler::config::SchedulerConfig {
    let mut cfg = koord::scheduler::config::default_config().unwrap();
    let gates = [
        ("DevicePluginAdaption".to_string(), true),
        ("EnableInlineBatchSchedule".to_string(), true),
    ]
    .into();
    cfg.set_gates(&koord::scheduler::features::SCHEDULER_GATES.from_user(&gates));
    for p in &mut cfg.profiles {
        let args = p
            .args
            .entry("Coscheduling".into())
            .or_insert_with(|| json!({}));
        args["awareNetworkTopology"] = true.into();
        // The GPU shared-resource templates from a ConfigMap of the test's namespace.
        let templates = json!({"configMapNamespace": "default", "configMapName": "gpu-templates",
            "matchedResources": ["huawei.com/npu-core"]});
        let ds = p
            .args
            .entry("DeviceShare".into())
            .or_insert_with(|| json!({}));
        ds["gpuSharedResourceTemplatesConfig"] = templates;
        let r = p
            .args
            .entry("Reservation".into())
            .or_insert_with(|| json!({}));
        r["enablePreemption"] = true.into();
    }
    let mut ratio = cfg.profiles[0].clone();
    ratio.scheduler_name = extra::RATIO_PROFILE.into();
    let fit = ratio
        .args
        .entry("NodeResourcesFit".into())
        .or_insert_with(|| json!({}));
    fit["scoringStrategy"] = json!({"type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}});
    cfg.profiles.push(ratio);
    cfg
}

/// The seed's cluster, random then fixed.
fn objects(rng: &mut Rng) -> Vec<Value> {
    let mut out = cluster::cluster(rng);
    out.extend(extra::storage());
    out.extend(extra::hint_node());
    out.push(extra::preemption_node());
    out
}

/// The seed's steps, random then fixed.
fn all_steps(rng: &mut Rng) -> Vec<Vec<Value>> {
    let mut out = cluster::steps(rng);
    out.extend(extra::hint_steps());
    out.extend(extra::preemption_steps());
    out.extend(extra::last_steps());
    out
}

async fn one_seed(seed: u64, seen: &mut BTreeSet<String>) {
    let mut rng = Rng(seed);
    let mut api_server = TestApi::start().await;
    let c = api_server.client.clone();
    for o in objects(&mut rng) {
        create(&c, o).await;
    }
    let stand_ins = api::stand_ins(&c);
    let cfg = config();
    let leader = koord::kernel::lease::Leadership::always();
    let mut sched = koord::scheduler::live::Scheduler::new(c.clone(), &cfg, leader).unwrap();
    sched.topology = Some(koord::scheduler::live::topology::Manager::detached());
    let shutdown = Shutdown::new();
    let tasks = Tasks::new(shutdown.clone());
    let rx = koord::scheduler::watches(&sched, &c, &tasks, &shutdown);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let counter = Default::default();
    let s = shutdown.clone();
    let live = tokio::spawn(async move {
        sched
            .run(rx, s, counter, move || {
                let _ = ready_tx.send(());
            })
            .await
    });
    tokio::task::spawn_blocking(move || ready_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the live scheduler synced");
    for (k, step) in all_steps(&mut rng).into_iter().enumerate() {
        let snap = snapshot(&c, &step).await;
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let explained = koord::explain::schedule::run(&snap, &cfg, now).unwrap();
        for o in &step {
            create(&c, o.clone()).await;
        }
        let ctx = format!("seed {seed}, step {k}");
        one_step(&c, &ctx, &step, &explained, seen).await;
    }
    stand_ins.abort();
    shutdown.begin_drain();
    let _ = live.await;
    tasks.close();
    tasks.wait().await;
    api_server.stop().await;
}

/// The step's objects, live against explained.
async fn one_step(
    c: &kube::Client,
    ctx: &str,
    step: &[Value],
    explained: &[Placement],
    seen: &mut BTreeSet<String>,
) {
    let mut gang = Vec::new();
    for o in step {
        let key = shown(o);
        let shown_pods: Vec<&str> = explained.iter().map(|p| p.pod.as_str()).collect();
        let want = explained
            .iter()
            .find(|p| p.pod == key)
            .unwrap_or_else(|| panic!("{key} not explained: {shown_pods:?}"));
        // A pod explain leaves unplaced may also wait (at PreEnqueue or Permit) without
        // any status: a second without a node is agreement.
        let patience = if want.node.is_some() { 200 } else { 40 };
        let got = live_result(c, o, patience).await;
        exercised(want, seen);
        if want.details.contains_key("devices")
            && o["metadata"]["annotations"]
                .get("scheduling.koordinator.sh/numa-topology-spec")
                .is_some()
        {
            seen.insert("devices NUMA-aligned".into());
        }
        let ctx = format!("{ctx}, {key}");
        if step.len() > 1 {
            // A gang's members: the live queue may take them in either order (the first
            // is held at PreEnqueue until its mate arrives, so the mate can go first), so
            // only the set of nodes is compared.
            gang.push((ctx, got, want));
            continue;
        }
        let scores: Vec<_> = want
            .verdicts
            .iter()
            .filter(|(_, v)| v.feasible)
            .map(|(n, v)| (n, v.total, &v.scores))
            .collect();
        assert_eq!(
            got, want.node,
            "{ctx}: live and explain disagree; explain's scores {scores:?}"
        );
        match &got {
            Some(node) => placed_alike(c, &ctx, o, node, want).await,
            None => unplaced_alike(c, &ctx, o, want, seen).await,
        }
    }
    gang_alike(c, step, gang).await;
}

/// A placed pod: on one of explain's best nodes, with the devices explain gave it.
async fn placed_alike(c: &kube::Client, ctx: &str, o: &Value, node: &str, want: &Placement) {
    let best = want.verdicts.values().map(|v| v.total).max();
    assert_eq!(
        Some(want.verdicts[node].total),
        best,
        "{ctx}: live chose a node below explain's best"
    );
    if o["kind"] == "Pod"
        && let Some(devices) = want.details.get("devices")
    {
        let name = o["metadata"]["name"].as_str().unwrap();
        let live = api::devices_allocated(c, name).await;
        assert_eq!(
            live.as_ref(),
            Some(devices),
            "{ctx}: live allocated other devices"
        );
    }
}

/// An unplaced object: the victims explain nominated are deleted by the live scheduler; a
/// Reservation then lands where explain nominated, anything else leaves.
async fn unplaced_alike(
    c: &kube::Client,
    ctx: &str,
    o: &Value,
    want: &Placement,
    seen: &mut BTreeSet<String>,
) {
    if let Some(n) = &want.preemption {
        victims_gone(c, ctx, want).await;
        if o["kind"] == "Reservation" {
            let got = api::placed_eventually(c, o).await;
            assert_eq!(
                got.as_ref(),
                Some(&n.node),
                "{ctx}: not placed where nominated"
            );
            seen.insert("reservation preempted".into());
            return;
        }
        seen.insert("pod preempted".into());
    }
    leave(c, o).await;
}

/// A gang's members on the nodes explain chose, in either order.
async fn gang_alike(
    c: &kube::Client,
    step: &[Value],
    gang: Vec<(String, Option<String>, &Placement)>,
) {
    let mut live_nodes: Vec<&Option<String>> = gang.iter().map(|(_, g, _)| g).collect();
    let mut explained_nodes: Vec<&Option<String>> = gang.iter().map(|(_, _, w)| &w.node).collect();
    live_nodes.sort();
    explained_nodes.sort();
    assert_eq!(
        live_nodes,
        explained_nodes,
        "{:?}: live and explain disagree",
        gang.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    for (o, (ctx, got, want)) in step.iter().zip(&gang) {
        if got.is_none() {
            victims_gone(c, ctx, want).await;
            leave(c, o).await;
        }
    }
}

/// The victims explain nominated for `want` leave: the live scheduler preempted them.
async fn victims_gone(c: &kube::Client, ctx: &str, want: &Placement) {
    for v in want.preemption.iter().flat_map(|n| &n.victims) {
        assert!(
            api::gone(c, &v.key).await,
            "{ctx}: live did not preempt {} as explain nominated",
            v.key
        );
    }
}

fn shown(v: &Value) -> String {
    let name = v["metadata"]["name"].as_str().unwrap();
    match v["kind"].as_str().unwrap() {
        "Reservation" => format!("reservation/{name}"),
        _ => format!("default/{name}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_and_explain_place_every_pod_alike() {
    let seeds: u64 = std::env::var("KOORD_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let mut seen = BTreeSet::new();
    for seed in 1..=seeds {
        one_seed(seed, &mut seen).await;
    }
    for what in [
        "cpuset",
        "devices",
        "reservation",
        "reservation placed",
        "ElasticQuota",
        "Coscheduling",
        "networkTopology",
        "NodeNUMAResource",
        "LoadAwareScheduling scored",
        "DeviceShare scored",
        "devices NUMA-aligned",
        "preAllocated",
        "node locked",
        "inlineBatch",
        "template",
        "no template",
        "not enough storage",
        "reservation preempted",
    ]
    .iter()
    .chain(NAMED)
    {
        assert!(seen.contains(*what), "no seed exercised {what}: {seen:?}");
    }
}
