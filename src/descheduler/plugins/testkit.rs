//! Upstream's test builders (`test.BuildTestNode`, `test.BuildTestPod`, the owner
//! helpers) and one pass of a single plugin behind DefaultEvictor, through the same
//! framework `koord explain deschedule` and the live role run.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

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
    let cfg = parse(&cfg.to_string(), "test").expect("a configuration");
    let w = World::build(nodes, pods.iter().map(PodView::from), vec![], &[], &[]);
    let mut plugins = Plugins::build(&cfg, 0).expect("plugins");
    plugins.run(&w, 1_800_000_000_000)
}

/// The names of the pods a pass evicted, sorted.
pub fn evicted(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r.evictions.iter().map(|e| e.pod.name.clone()).collect();
    v.sort();
    v
}
