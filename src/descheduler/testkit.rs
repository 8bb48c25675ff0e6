//! Upstream's test builders (`test.BuildTestNode`, `test.BuildTestPod`, the owner
//! helpers) and one pass of a single plugin behind DefaultEvictor, through the same
//! framework `koord explain deschedule` and the live role run.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::api::pod::{Amounts, add, amounts, pod_requests, resource_list};
use crate::api::slo::NodeMetric;
use crate::descheduler::configfile::parse;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::framework::world::World;
use crate::descheduler::framework::{Plugins, Report};

/// `test.BuildTestNode(name, millicpu, mem, pods, apply)`: `extra` is merged in.
pub fn node(name: &str, millicpu: i64, mem: i64, pods: i64, extra: Value) -> Node {
    let res =
        json!({"pods": pods.to_string(), "cpu": format!("{millicpu}m"), "memory": mem.to_string()});
    let mut v = json!({"metadata": {"name": name, "labels": {}},
        "status": {"capacity": res, "allocatable": res,
            "conditions": [{"type": "Ready", "status": "True"}]}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).expect("a Node")
}

/// `test.BuildTestPod(name, cpu, memory, nodeName, apply)` in namespace `default`; a
/// negative amount is left out.
pub fn pod(name: &str, cpu: i64, mem: i64, node: &str, extra: Value) -> Pod {
    let mut req = serde_json::Map::new();
    if cpu >= 0 {
        req.insert("cpu".into(), json!(format!("{cpu}m")));
    }
    if mem >= 0 {
        req.insert("memory".into(), json!(mem.to_string()));
    }
    let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": req}}]}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).expect("a Pod")
}

/// `test.SetRSOwnerRef`.
pub fn rs_owner() -> Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ReplicaSet", "name": "replicaset-1", "uid": ""}]}})
}

/// `test.SetDSOwnerRef`.
pub fn ds_owner() -> Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "DaemonSet", "name": "daemonset-1", "uid": ""}]}})
}

/// `test.SetNormalOwnerRef`.
pub fn pod_owner() -> Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "", "uid": ""}]}})
}

/// `test.GetMirrorPodAnnotation`.
pub fn mirror() -> Value {
    json!({"metadata": {"annotations": {"kubernetes.io/config.source": "api", "kubernetes.io/config.mirror": "mirror"}}})
}

/// `test.SetPodAntiAffinity(pod, key, value)`: required, topology key `region`.
pub fn anti_affinity(key: &str, value: &str) -> Value {
    json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}, "topologyKey": "region"}]}}}})
}

/// Several patches merged, in order.
pub fn with(patches: &[Value]) -> Value {
    let mut v = json!({});
    for p in patches {
        json_patch::merge(&mut v, p);
    }
    v
}

/// One pass of `plugin` at `point` with `args`, DefaultEvictor (with `evictor` args) the
/// only Filter and Evict plugin.
pub fn pass(
    plugin: &str,
    point: &str,
    args: Value,
    evictor: Value,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
) -> Report {
    pass_with(plugin, point, args, evictor, json!({}), nodes, pods)
}

/// [`pass`] with `top` merged into the DeschedulerConfiguration (its eviction limits).
pub fn pass_with(
    plugin: &str,
    point: &str,
    args: Value,
    evictor: Value,
    top: Value,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
) -> Report {
    let mut cfg = json!({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
        "profiles": [{"name": "p", "plugins": {
            point: {"enabled": [{"name": plugin}]},
            "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
            "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}},
        "pluginConfig": [{"name": plugin, "args": args}, {"name": "DefaultEvictor", "args": evictor}]}]});
    json_patch::merge(&mut cfg, &top);
    run(cfg, nodes, pods, vec![])
}

/// The time every test pass runs at.
pub const NOW_MS: i64 = 1_800_000_000_000;

/// One pass of the DeschedulerConfiguration `cfg` over the objects.
pub fn run(cfg: Value, nodes: Vec<Node>, pods: Vec<Pod>, metrics: Vec<NodeMetric>) -> Report {
    let cfg = parse(&cfg.to_string(), "test").expect("a configuration");
    let views = pods.iter().map(|p| Arc::new(PodView::from(p)));
    let w = World::build(nodes.into_iter().map(Arc::new), views, metrics, &[], &[]);
    let mut plugins =
        Plugins::build(&cfg, 0, crate::descheduler::plugins::registry).expect("plugins");
    plugins.run(&w, NOW_MS)
}

/// Koordinator's `setupNodeMetrics`: each pod reports its requests (or the usage `usage`
/// names for it), each node the sum of its pods; every node has a NodeMetric, updated now.
pub fn node_metrics(nodes: &[Node], pods: &[Pod], usage: &[(&str, Value)]) -> Vec<NodeMetric> {
    let now = k8s_openapi::jiff::Timestamp::from_millisecond(NOW_MS).expect("a time");
    nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let mut total = Amounts::new();
            let mut entries = Vec::new();
            for p in pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name)) {
                let pname = p.metadata.name.clone().unwrap_or_default();
                let used = match usage.iter().find(|(k, _)| *k == pname) {
                    Some((_, v)) => amounts(serde_json::from_value(v.clone()).ok().as_ref()),
                    None => pod_requests(p),
                };
                add(&mut total, &used);
                entries.push(json!({"namespace": p.metadata.namespace, "name": pname,
                    "podUsage": {"resources": resource_list(&used)}}));
            }
            serde_json::from_value(json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                "metadata": {"name": name}, "spec": {}, "status": {"updateTime": now.to_string(),
                    "nodeMetric": {"nodeUsage": {"resources": resource_list(&total)}}, "podsMetric": entries}}))
            .expect("a NodeMetric")
        })
        .collect()
}

/// The names of the pods a pass evicted, sorted.
pub fn evicted(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r.evictions.iter().map(|e| e.pod.name.clone()).collect();
    v.sort();
    v
}

// The pod and node sets upstream's node-utilization tests and Koordinator's LowNodeLoad
// tests share.

pub const EXT: &str = "example.com/foo";
pub const HIGH: i32 = 10000;
pub const LOW: i32 = 0;

pub fn unschedulable() -> Value {
    json!({"spec": {"unschedulable": true}})
}

pub fn ext_node(name: &str, cpu: i64, pods: i64, n: i64) -> Node {
    node(
        name,
        cpu,
        3000,
        pods,
        json!({"status": {"capacity": {EXT: n.to_string()}, "allocatable": {EXT: n.to_string()}}}),
    )
}

/// `test.SetPodExtendedResourceRequest(pod, EXT, n)` on `test.BuildTestPod(name, cpu, 0, node)`.
pub fn ext_pod(name: &str, cpu: i64, node: &str, n: i64, owner: Value) -> Pod {
    let requests = json!({"cpu": format!("{cpu}m"), "memory": "0", EXT: n.to_string()});
    let c = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}});
    pod(name, cpu, 0, node, with(&[owner, c]))
}

pub fn local_storage_mirror() -> Value {
    with(&[
        pod_owner(),
        mirror(),
        json!({"spec": {"volumes": [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {"sizeLimit": "10"}}]}}),
    ])
}

pub fn critical(owner: bool) -> Value {
    let base =
        json!({"metadata": {"namespace": "kube-system"}, "spec": {"priority": 2_000_000_000}});
    if owner {
        with(&[pod_owner(), base])
    } else {
        base
    }
}

pub fn west_affinity() -> Value {
    with(&[
        pod_owner(),
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "datacenter", "operator": "In", "values": ["west"]}]}]}}}}}),
    ])
}

/// p1..p5 on n1 (each with `p`), then upstream's three that won't be evicted, and p9 on n2.
pub fn standard(p: impl Fn(usize) -> Value, critical_owner: bool, mem: i64) -> Vec<Pod> {
    let mut v: Vec<Pod> = (1..=5)
        .map(|i| pod(&format!("p{i}"), 400, mem, "n1", p(i)))
        .collect();
    v.push(pod("p6", 400, mem, "n1", ds_owner()));
    v.push(pod("p7", 400, mem, "n1", local_storage_mirror()));
    v.push(pod("p8", 400, mem, "n1", critical(critical_owner)));
    v.push(pod("p9", 400, mem, "n2", rs_owner()));
    v
}

pub fn three(n1_pods: i64) -> Vec<Node> {
    vec![
        node("n1", 4000, 3000, n1_pods, json!({})),
        node("n2", 4000, 3000, 10, json!({})),
        node("n3", 4000, 3000, 10, unschedulable()),
    ]
}

pub fn cpu_pods(c: f64, p: f64) -> Value {
    json!({"cpu": c, "pods": p})
}

/// Pods upstream's and Koordinator's tables never evict: four DaemonSet pods, a mirror pod
/// with local storage, a critical pod; p9 on n2.
pub fn no_evictable() -> Vec<Pod> {
    let mut v: Vec<Pod> = (1..=4)
        .map(|i| pod(&format!("p{i}"), 400, 0, "n1", ds_owner()))
        .collect();
    v.push(pod("p5", 400, 0, "n1", local_storage_mirror()));
    v.push(pod("p6", 400, 0, "n1", critical(false)));
    v.push(pod("p9", 400, 0, "n2", rs_owner()));
    v
}

/// p1..p3 on n1, p4 and p5 with `extra` (a node selector or affinity), the three never
/// evicted, and (with `p9`) an empty p9 on n2.
pub fn selected(extra: Value, p9: bool, critical_owner: bool) -> Vec<Pod> {
    let mut v: Vec<Pod> = (1..=3)
        .map(|i| pod(&format!("p{i}"), 400, 0, "n1", rs_owner()))
        .collect();
    v.push(pod("p4", 400, 0, "n1", extra.clone()));
    v.push(pod("p5", 400, 0, "n1", extra));
    v.push(pod("p6", 400, 0, "n1", ds_owner()));
    v.push(pod("p7", 400, 0, "n1", local_storage_mirror()));
    v.push(pod("p8", 400, 0, "n1", critical(critical_owner)));
    if p9 {
        v.push(pod("p9", 0, 0, "n2", rs_owner()));
    }
    v
}

/// n1, and n2 labelled `datacenter: east`.
pub fn east_nodes() -> Vec<Node> {
    let east = json!({"metadata": {"labels": {"datacenter": "east"}}});
    vec![
        node("n1", 4000, 3000, 9, json!({})),
        node("n2", 4000, 3000, 10, east),
    ]
}

/// The extended-resource pod set: nine pods requesting one EXT each.
pub fn ext_pods(critical_owner: bool) -> Vec<Pod> {
    let mut v: Vec<Pod> = (1..=5)
        .map(|i| ext_pod(&format!("p{i}"), 0, "n1", 1, rs_owner()))
        .collect();
    v.push(ext_pod("p6", 0, "n1", 1, pod_owner()));
    v.push(ext_pod("p7", 0, "n1", 1, local_storage_mirror()));
    v.push(ext_pod("p8", 0, "n1", 1, critical(critical_owner)));
    v.push(ext_pod("p9", 0, "n2", 1, rs_owner()));
    v
}

/// `standard` with p1, p2, p4 and p5 made BestEffort.
pub fn best_effort(mut v: Vec<Pod>) -> Vec<Pod> {
    for i in [0, 1, 3, 4] {
        v[i] = pod(&format!("p{}", i + 1), -1, -1, "n1", rs_owner());
    }
    v
}

/// `standard` at high priority with p5 and p7 at low.
pub fn prioritized(critical_owner: bool) -> Vec<Pod> {
    let prio = |v: i32| json!({"spec": {"priority": v}});
    let mut v = standard(
        |i| with(&[rs_owner(), prio(if i == 5 { LOW } else { HIGH })]),
        critical_owner,
        0,
    );
    v[5] = pod("p6", 400, 0, "n1", with(&[ds_owner(), prio(HIGH)]));
    v[6] = pod(
        "p7",
        400,
        0,
        "n1",
        with(&[local_storage_mirror(), prio(LOW)]),
    );
    v
}

/// n1 with 8 EXT, n2 with 8 EXT (`n2_ext`) or none, n3 unschedulable.
pub fn ext_nodes(n2_ext: bool) -> Vec<Node> {
    let n2 = if n2_ext {
        ext_node("n2", 4000, 10, 8)
    } else {
        node("n2", 4000, 3000, 10, json!({}))
    };
    vec![
        ext_node("n1", 4000, 9, 8),
        n2,
        node("n3", 4000, 3000, 10, unschedulable()),
    ]
}
