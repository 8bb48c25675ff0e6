//! Koordinator's `Test_preemptionEvaluatorImpl_preempt` (coscheduling/core/preemption_test.go):
//! its cases, names and messages, on two 32-cpu nodes whose 16-cpu pods fill them. The gang
//! is `default/gangA` alone (Koordinator's table groups it with a `gangB` its fake cache
//! never holds; koord's PreFilter checks the group exists). Then what the cycle does with
//! a job's nomination, the cost order, and victims that are waiting at Permit.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::scheduler::config;
use crate::scheduler::cycle::{self, Outcome};
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::{cluster, node_json, pod};

const HIGH: i32 = 1000;
const LOW: i32 = 1;

fn framework() -> Framework {
    let mut p = config::default_config().unwrap().profiles.remove(0);
    p.args
        .insert("Coscheduling".into(), json!({"enablePreemption": true}));
    config::framework(&p).unwrap()
}

fn member(name: &str, prio: i32, nominated: Option<&str>) -> Value {
    let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": name,
            "labels": {"pod-group.scheduling.sigs.k8s.io": "gangA"}},
        "spec": {"priority": prio, "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}});
    if let Some(n) = nominated {
        v["status"] = json!({"nominatedNodeName": n});
    }
    v
}

fn existing(name: &str, node: &str, prio: i32) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": node, "priority": prio,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}})
}

/// node-1 and node-2 (32 cpu each), gangA (min 2), the existing pods, then the members.
fn setup(fw: &Framework, existing: &[Value], members: &[Value]) -> ClusterState {
    let mut c = cluster(vec![
        node_json("node-1", "32", "64Gi"),
        node_json("node-2", "32", "64Gi"),
    ]);
    fw.setup(&mut c);
    let pg = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "gangA", "namespace": "default"}, "spec": {"minMember": 2}});
    c.gangs
        .upsert_pod_group(&serde_json::from_value(pg).unwrap());
    for v in existing.iter().chain(members) {
        c.upsert_pod(Arc::new(serde_json::from_value(v.clone()).unwrap()));
    }
    c
}

/// The trigger's cycle, then Coscheduling's job preemption alone.
fn preempt_for(fw: &Framework, c: &ClusterState, trigger: &Value) -> (Status, Option<Nomination>) {
    let p = pod(trigger.clone());
    let r = fw.schedule(&p, c, Scope::Everything);
    assert!(r.node.is_none(), "the trigger fits nowhere");
    fw.trial(&r, &p, c, |_, fits_pod| {
        preempt(&p, c, &r.verdicts, fits_pod)
    })
}

fn keys(pods: &[Arc<PodInfo>]) -> Vec<&str> {
    let mut v: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    v.sort();
    v
}

fn four(prio: i32) -> Vec<Value> {
    vec![
        existing("existing-pod-1", "node-1", prio),
        existing("existing-pod-2", "node-1", prio),
        existing("existing-pod-3", "node-2", prio),
        existing("existing-pod-4", "node-2", prio),
    ]
}

#[test]
fn already_preempted() {
    let fw = framework();
    let mut c = setup(&fw, &four(LOW), &[member("trigger-pod", HIGH, None)]);
    let msg = "preempt success, alreadyWaitingForBound: 0/2";
    c.gangs
        .set_preempted("default/gangA", "default/trigger-pod-1", msg);
    let (s, n) = preempt_for(&fw, &c, &member("trigger-pod", HIGH, None));
    assert_eq!(
        s.message(),
        format!(
            "preemption: preemption already attempted by default/trigger-pod-1 with message {msg}"
        )
    );
    assert!(n.is_none());
}

#[test]
fn no_pending_pods() {
    // The trigger's gang holds no pending member (the trigger itself is not in the cache).
    let fw = framework();
    let c = setup(&fw, &four(LOW), &[]);
    let p = pod(member("trigger-pod", HIGH, None));
    let r = fw.schedule(&p, &c, Scope::Everything);
    let (s, n) = fw.trial(&r, &p, &c, |_, f| preempt(&p, &c, &r.verdicts, f));
    assert_eq!(s.message(), format!("preemption: {REASON_NO_PENDING_PODS}"));
    assert!(n.is_none());
}

/// (case, existing pods, members, trigger, PostFilter's message)
type Refused = (&'static str, Vec<Value>, Vec<Value>, Value, &'static str);

#[test]
fn refusals() {
    let mut never = member("pending-pod-1", HIGH, None);
    never["spec"]["preemptionPolicy"] = json!("Never");
    let mut terminating = four(LOW);
    terminating[0]["metadata"]["deletionTimestamp"] = json!("2026-11-26T00:00:00Z");
    terminating[0]["status"] = json!({"conditions": [{"type": "DisruptionTarget",
        "status": "True", "reason": "PreemptionByScheduler"}]});
    let on_node_1 = || {
        vec![
            member("pending-pod-1", HIGH, Some("node-1")),
            member("pending-pod-2", HIGH, Some("node-1")),
        ]
    };
    // NodeAffinity's rejection cannot be helped by preemption.
    let mut nowhere = member("pending-pod-1", HIGH, Some("node-1"));
    nowhere["spec"]["nodeSelector"] = json!({"zone": "nowhere"});
    let cases: Vec<Refused> = vec![
        (
            "job not eligible due to preemption policy",
            four(LOW),
            vec![never.clone(), member("pending-pod-2", HIGH, None)],
            never,
            "not eligible due to preemptionPolicy=Never.",
        ),
        (
            "job not eligible due to terminating pod",
            terminating,
            on_node_1(),
            on_node_1().remove(0),
            "not eligible due to terminating pod on the nominated node.",
        ),
        (
            "unschedulableAndUnResolvable",
            four(HIGH),
            vec![
                nowhere.clone(),
                member("pending-pod-2", HIGH, Some("node-1")),
            ],
            nowhere,
            "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
        (
            "no potential victims",
            four(HIGH),
            on_node_1(),
            on_node_1().remove(0),
            "0/2 nodes are available: 2 no potential victims.",
        ),
    ];
    let fw = framework();
    for (name, existing, members, trigger, want) in cases {
        let c = setup(&fw, &existing, &members);
        let (s, n) = preempt_for(&fw, &c, &trigger);
        assert_eq!(s.message(), format!("preemption: {want}"), "{name}");
        assert!(n.is_none(), "{name}");
    }
}

#[test]
fn preempt_success() {
    let fw = framework();
    let members = [
        member("pending-pod-1", HIGH, Some("node-2")),
        member("pending-pod-2", HIGH, Some("node-1")),
    ];
    let c = setup(&fw, &four(LOW), &members);
    let (s, n) = preempt_for(&fw, &c, &member("pending-pod-1", HIGH, Some("node-1")));
    assert!(s.is_success(), "{s:?}");
    let n = n.expect("a nomination");
    assert_eq!(n.node, "node-1");
    assert_eq!(keys(&n.victims), ["existing-pod-1", "existing-pod-2"]);
    let job = n.job.expect("the job's members");
    assert_eq!(job.preemptor, "default/gangA");
    assert_eq!(job.message, "preempt success, alreadyWaitingForBound: 0/2");
    let pending: Vec<(&str, &str)> = job
        .pending
        .iter()
        .map(|(p, node)| (p.key.as_str(), node.as_str()))
        .collect();
    assert_eq!(pending, [("default/pending-pod-2", "node-1")]);
    assert!(job.waiting.is_empty());
}

/// pending-pod-2 waits at Permit on node-2, beside existing-pod-4.
fn one_waiting(fw: &Framework) -> ClusterState {
    let pods = [
        existing("existing-pod-1", "node-1", LOW),
        existing("existing-pod-2", "node-1", LOW),
        existing("existing-pod-4", "node-2", LOW),
    ];
    let members = [
        member("pending-pod-1", HIGH, Some("node-2")),
        member("pending-pod-2", HIGH, None),
    ];
    let mut c = setup(fw, &pods, &members);
    let waiting = pod(members[1].clone());
    c.assume(&waiting, "node-2");
    c.gangs.wait(&waiting.key);
    c
}

#[test]
fn preempt_success_with_one_waiting_pod() {
    let fw = framework();
    let c = one_waiting(&fw);
    let (s, n) = preempt_for(&fw, &c, &member("pending-pod-1", HIGH, Some("node-1")));
    assert!(s.is_success(), "{s:?}");
    let n = n.expect("a nomination");
    assert_eq!(n.node, "node-1");
    assert_eq!(keys(&n.victims), ["existing-pod-2"]);
    let job = n.job.expect("the job's members");
    assert_eq!(job.message, "preempt success, alreadyWaitingForBound: 1/2");
    assert!(job.pending.is_empty());
    let waiting: Vec<(&str, &str)> = job
        .waiting
        .iter()
        .map(|(p, node)| (p.key.as_str(), node.as_str()))
        .collect();
    assert_eq!(waiting, [("default/pending-pod-2", "node-2")]);
}

/// The whole cycle for `p`, which must end unschedulable: its nomination and the pods it
/// sent back from Permit.
fn cycle_for(
    fw: &Framework,
    p: &PodInfo,
    c: &mut ClusterState,
) -> (Option<Nomination>, Vec<cycle::GangRejection>) {
    match cycle::run(fw, p, c, Scope::Everything).outcome {
        Outcome::Unschedulable {
            nomination,
            rejected,
            ..
        } => (nomination, rejected),
        _ => panic!("unschedulable"),
    }
}

#[test]
fn the_cycle_nominates_the_job_and_sends_its_waiting_member_back() {
    let fw = framework();
    let mut c = one_waiting(&fw);
    let trigger = pod(member("pending-pod-1", HIGH, Some("node-1")));
    let (nomination, rejected) = cycle_for(&fw, &trigger, &mut c);
    assert_eq!(nomination.expect("nominated").node, "node-1");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].keys, ["default/pending-pod-2"]);
    assert_eq!(
        rejected[0].message,
        "preempt success, alreadyWaitingForBound: 1/2"
    );
    assert_eq!(c.nominated.node_of("default/pending-pod-1"), Some("node-1"));
    assert_eq!(c.nominated.node_of("default/pending-pod-2"), Some("node-2"));
    assert!(c.gangs.waiting.is_empty());
    assert!(!c.assumed.contains_key("default/pending-pod-2"));
    // The next member in this round does not preempt again.
    let other = pod(member("pending-pod-2", HIGH, None));
    let r = fw.schedule(&other, &c, Scope::Everything);
    let (s, _) = fw.trial(&r, &other, &c, |_, f| preempt(&other, &c, &r.verdicts, f));
    assert_eq!(
        s.message(),
        "preemption: preemption already attempted by default/pending-pod-1 with message preempt success, alreadyWaitingForBound: 1/2"
    );
}

#[test]
fn the_cheapest_node_by_victim_priority_rank() {
    // node-1's victims have priority 5, node-2's priority 1: node-2 costs rank 0; low-1 is
    // given back first (same priority and job: by name) and fits beside the preemptor.
    let fw = framework();
    let pods = [
        existing("mid-1", "node-1", 5),
        existing("mid-2", "node-1", 5),
        existing("low-1", "node-2", LOW),
        existing("low-2", "node-2", LOW),
    ];
    let lone = json!({"metadata": {"name": "lone", "namespace": "default", "uid": "lone"},
        "spec": {"priority": HIGH,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}});
    let c = setup(&fw, &pods, std::slice::from_ref(&lone));
    let (s, n) = preempt_for(&fw, &c, &lone);
    assert!(s.is_success(), "{s:?}");
    let n = n.unwrap();
    assert_eq!(
        (n.node.as_str(), keys(&n.victims)),
        ("node-2", vec!["low-2"])
    );
    let job = n.job.unwrap();
    assert_eq!(job.preemptor, "default/lone", "a lone pod is its own job");
    assert!(job.pending.is_empty());
}

#[test]
fn disable_preemptible_pods_are_never_victims() {
    let fw = framework();
    let mut pods = four(LOW);
    for (i, p) in pods.iter_mut().enumerate() {
        let label = if i < 2 {
            ("scheduling.koordinator.sh/disable-preemptible", "true")
        } else {
            ("quota.scheduling.koordinator.sh/preemptible", "false")
        };
        p["metadata"]["labels"] = json!({label.0: label.1});
    }
    let members = [
        member("pending-pod-1", HIGH, None),
        member("pending-pod-2", HIGH, None),
    ];
    let c = setup(&fw, &pods, &members);
    let (s, _) = preempt_for(&fw, &c, &members[0]);
    assert_eq!(
        s.message(),
        "preemption: 0/2 nodes are available: 2 no potential victims."
    );
}

#[test]
fn a_victim_waiting_at_permit_is_sent_back_not_deleted() {
    let fw = framework();
    let pods = [existing("existing-pod-1", "node-1", LOW)];
    let mut c = setup(&fw, &pods, &[]);
    // A low-priority gang member (gangB, min 1 of 2 total) waits at Permit on node-1…
    let low = json!({"metadata": {"name": "low-member", "namespace": "default", "uid": "lm",
            "annotations": {"gang.scheduling.koordinator.sh/name": "gangB",
                "gang.scheduling.koordinator.sh/min-available": "1"}},
        "spec": {"priority": LOW,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}});
    c.upsert_pod(Arc::new(serde_json::from_value(low.clone()).unwrap()));
    c.assume(&pod(low), "node-1");
    c.gangs.wait("default/low-member");
    // …and node-2 is full of pods the preemptor may not take.
    for name in ["keep-1", "keep-2"] {
        let p = existing(name, "node-2", HIGH);
        c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
    }
    let lone = json!({"metadata": {"name": "lone", "namespace": "default", "uid": "lone"},
        "spec": {"priority": HIGH,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "32"}}}]}});
    c.upsert_pod(Arc::new(serde_json::from_value(lone.clone()).unwrap()));
    let (nomination, rejected) = cycle_for(&fw, &pod(lone), &mut c);
    let n = nomination.expect("nominated");
    assert_eq!(keys(&n.victims), ["existing-pod-1", "low-member"]);
    let sent_back: Vec<&str> = rejected
        .iter()
        .flat_map(|r| &r.keys)
        .map(String::as_str)
        .collect();
    assert_eq!(sent_back, ["default/low-member"]);
    assert_eq!(rejected[0].message, crate::scheduler::cycle::PREEMPTED);
    assert!(!c.assumed.contains_key("default/low-member"));
}
