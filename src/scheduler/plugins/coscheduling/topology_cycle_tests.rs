//! `TestPodGroupManager_NetworkTopology`'s failure cases through the whole cycle: a gang
//! that must gather in one spine, no spine with room, then Coscheduling's job preemption
//! planning the gang in its topology (`PlanNodes`). Koordinator's eight 16-cpu nodes of
//! `FakeClusterNetworkTopology`, four 16-cpu members.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::api::scheduling::network_topology::ClusterNetworkTopology;
use crate::scheduler::config;
use crate::scheduler::cycle::{self, Outcome};
use crate::scheduler::framework::runtime::Scope;
use crate::scheduler::framework::{Nomination, Point};
use crate::scheduler::test_util::{cluster, node_json, pod};

const SPINE: &str = "network.topology.nvidia.com/spine";
const BLOCK: &str = "network.topology.nvidia.com/block";
const HIGH: i32 = 1000;
const LOW: i32 = 1;
const MUST_SPINE: &str = r#"{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}"#;

pub(super) fn framework() -> Framework {
    let mut p = config::default_config().unwrap().profiles.remove(0);
    let args = json!({"enablePreemption": true, "awareNetworkTopology": true});
    p.args.insert("Coscheduling".into(), args);
    // As the chart runs it: Coscheduling's job preemption alone at postFilter.
    let post = p.points.get_mut(&Point::PostFilter).unwrap();
    post.retain(|(name, _)| name != "DefaultPreemption");
    config::framework(&p).unwrap()
}

pub(super) fn member(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name,
            "labels": {"pod-group.scheduling.sigs.k8s.io": "gangA"}},
        "spec": {"priority": HIGH, "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}})
}

fn existing(name: &str, node: &str, prio: i32) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": node, "priority": prio,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}})
}

/// The fake cluster with `pods` on it, gangA (min 4, must gather in a spine) pending.
pub(super) fn setup(fw: &Framework, pods: &[Value]) -> ClusterState {
    let nodes = super::tests::FAKE_NODES.iter().map(|(n, s, b)| {
        let mut v = node_json(n, "16", "64Gi");
        v["metadata"]["labels"] = json!({SPINE: s, BLOCK: b});
        v
    });
    let mut c = cluster(nodes.collect());
    fw.setup(&mut c);
    let cnt: ClusterNetworkTopology = serde_json::from_value(json!({
        "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [
            {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
            {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"}]}}))
    .unwrap();
    let labelled = c.nodes.iter().map(|n| (n.name.as_str(), &n.labels));
    let tree = crate::scheduler::model::network_topology::build(&cnt, labelled).unwrap();
    c.network_topology = Some(Arc::new(tree));
    let pg = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "gangA", "namespace": "default",
            "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": MUST_SPINE}},
        "spec": {"minMember": 4}});
    c.gangs
        .upsert_pod_group(&serde_json::from_value(pg).unwrap());
    let members = (1..=4).map(|i| member(&format!("pending-pod-{i}")));
    for v in pods.iter().cloned().chain(members) {
        c.upsert_pod(Arc::new(serde_json::from_value(v).unwrap()));
    }
    c
}

/// pending-pod-1's cycle: the plan's details, and the outcome.
fn trigger(fw: &Framework, c: &mut ClusterState) -> (Value, String, Option<Nomination>) {
    let p = pod(member("pending-pod-1"));
    let attempt = cycle::run(fw, &p, c, Scope::Everything);
    let details = attempt
        .details
        .get("networkTopology")
        .cloned()
        .unwrap_or_default();
    match attempt.outcome {
        Outcome::Unschedulable {
            message,
            nomination,
            ..
        } => (details, message, nomination),
        _ => panic!("the gang fits in no spine"),
    }
}

#[test]
fn schedule_failure_preempt_success() {
    let fw = framework();
    let mut c = setup(
        &fw,
        &[
            existing("existing-pod-1", "node-1", LOW),
            existing("existing-pod-2", "node-4", LOW),
        ],
    );
    let (details, message, nomination) = trigger(&fw, &mut c);
    assert_eq!(
        details["error"],
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, \
         topology topologyNode SpineLayer/s1: 3;topology topologyNode SpineLayer/s2: 3, \
         0/8 nodes are available: 8 Insufficient cpu."
    );
    let n = nomination.unwrap_or_else(|| panic!("no nomination: {message}"));
    assert_eq!(n.node, "node-1");
    let victims: Vec<&str> = n.victims.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(victims, ["existing-pod-1"]);
    let job = n.job.expect("a job nomination");
    assert_eq!(job.message, "preempt success, alreadyWaitingForBound: 0/4");
    let mut pending: Vec<(&str, &str)> = job
        .pending
        .iter()
        .map(|(p, node)| (p.key.as_str(), node.as_str()))
        .collect();
    pending.sort();
    assert_eq!(
        pending,
        [
            ("default/pending-pod-2", "node-8"),
            ("default/pending-pod-3", "node-2"),
            ("default/pending-pod-4", "node-7"),
        ]
    );
    // The siblings wait for the member that planned.
    let sibling = pod(member("pending-pod-2"));
    let r = fw.schedule(&sibling, &c, Scope::Everything);
    assert!(r.node.is_none());
    let m = r.pre_filter_msg.unwrap_or_default();
    assert!(m.starts_with("no candidate topology nodes"), "{m}");
}

#[test]
fn schedule_failure_preempt_failure() {
    let fw = framework();
    let pods = [
        existing("existing-pod-1", "node-1", HIGH),
        existing("existing-pod-3", "node-2", LOW),
        existing("existing-pod-2", "node-4", HIGH),
    ];
    let mut c = setup(&fw, &pods);
    let (details, message, nomination) = trigger(&fw, &mut c);
    assert_eq!(
        details["error"],
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, \
         topology topologyNode SpineLayer/s1: 2;topology topologyNode SpineLayer/s2: 3, \
         0/8 nodes are available: 8 Insufficient cpu."
    );
    assert!(nomination.is_none(), "{message}: {nomination:?}");
    // Coscheduling's PostFilter said why (planned with existing-pod-3 gone from node-2).
    let p = pod(member("pending-pod-1"));
    let r = fw.schedule(&p, &c, Scope::Everything);
    let (s, _) = fw.trial(&r, &p, &c, |_, f| {
        super::super::preempt::preempt(&p, &c, &r.verdicts, f)
    });
    assert_eq!(
        s.message(),
        "preemption: no candidate topology nodes can accommodate job, desiredOfferSlot: 4, \
         topology topologyNode SpineLayer/s1: 3;topology topologyNode SpineLayer/s2: 3, \
         0/8 nodes are available: 8 Insufficient cpu."
    );
}
