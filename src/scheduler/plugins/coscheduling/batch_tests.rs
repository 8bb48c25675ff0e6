//! Inline batch scheduling (`EnableInlineBatchSchedule`, Koordinator's FindOneNode +
//! `pkg/scheduler/batch`) through the whole cycle, on `topology_cycle_tests.rs`'s cluster:
//! the flows of Koordinator's `batch_scheduler_flow_test.go` (`TestBatchScheduleSuccess`,
//! `TestBatchScheduleSchedulingFail`, `TestSkipPod`) and the gate off.

use serde_json::json;

use super::cycle_tests::{framework, member, setup};
use crate::scheduler::cycle::{self, Outcome, Permit};
use crate::scheduler::framework::ClusterState;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::pod;

fn batch_framework() -> Framework {
    let mut fw = framework();
    fw.inline_batch = true;
    fw
}

fn first(fw: &Framework, c: &mut ClusterState) -> cycle::Attempt {
    cycle::run(fw, &pod(member("pending-pod-1")), c, Scope::Everything)
}

fn nodes_of(attempt: &cycle::Attempt) -> Vec<(String, Option<String>)> {
    let mut out = vec![(
        "default/pending-pod-1".to_string(),
        attempt.node().map(String::from),
    )];
    for (m, a) in &attempt.batch {
        out.push((m.key.clone(), a.node().map(String::from)));
    }
    out
}

#[test]
fn batch_schedule_success() {
    let fw = batch_framework();
    let mut c = setup(&fw, &[]);
    let attempt = first(&fw, &mut c);
    let plan = attempt.details["networkTopology"]["pods"].clone();
    let placed = nodes_of(&attempt);
    assert_eq!(placed.len(), 4, "the whole gang in one cycle: {placed:?}");
    for (key, node) in &placed {
        assert_eq!(
            node.as_deref(),
            plan[key].as_str(),
            "{key} on its planned node"
        );
        assert_eq!(c.placement(key), node.as_deref(), "{key} assumed");
    }
    // The last member completes the gang at Permit and releases the three waiting.
    let Some((_, last)) = attempt.batch.last() else {
        panic!("no batch")
    };
    let Outcome::Placed {
        permit: Permit::Allowed { released },
        ..
    } = &last.outcome
    else {
        panic!("{:?}", last.outcome)
    };
    assert_eq!(released.len(), 3, "{released:?}");
}

#[test]
fn batch_schedule_scheduling_fail() {
    let fw = batch_framework();
    // pending-pod-3 can go nowhere its plan put it (the plan counts what the first members
    // fit): the batch ends there, without preemption, and the members waiting go back.
    let mut odd = member("pending-pod-3");
    odd["spec"]["nodeSelector"] = json!({"missing": "label"});
    let mut c = setup(&fw, &[]);
    c.upsert_pod(std::sync::Arc::new(serde_json::from_value(odd).unwrap()));
    let attempt = first(&fw, &mut c);
    let placed = nodes_of(&attempt);
    let keys: Vec<&str> = placed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "default/pending-pod-1",
            "default/pending-pod-2",
            "default/pending-pod-3"
        ],
        "pending-pod-4 is not tried after the failure"
    );
    let (_, failed) = attempt.batch.last().unwrap();
    let Outcome::Unschedulable {
        nomination,
        rejected,
        ..
    } = &failed.outcome
    else {
        panic!("{:?}", failed.outcome)
    };
    assert!(nomination.is_none(), "a batch member never preempts");
    assert!(failed.post_filter.is_empty());
    let mut sent_back: Vec<&str> = rejected
        .iter()
        .flat_map(|r| &r.keys)
        .map(String::as_str)
        .collect();
    sent_back.sort();
    assert_eq!(
        sent_back,
        ["default/pending-pod-1", "default/pending-pod-2"]
    );
}

#[test]
fn skip_pod() {
    // Gate off: the first member's cycle places only itself; the others come later, each
    // in its own cycle, restricted to its planned node.
    let fw = framework();
    let mut c = setup(&fw, &[]);
    let attempt = first(&fw, &mut c);
    assert!(attempt.batch.is_empty());
    assert!(attempt.node().is_some());
    // Gate on: members already scheduled with the first are not pending any more.
    let fw = batch_framework();
    let mut c = setup(&fw, &[]);
    let attempt = first(&fw, &mut c);
    assert_eq!(attempt.batch.len(), 3);
    let id = c
        .gangs
        .gang_id("default/pending-pod-2")
        .unwrap()
        .to_string();
    assert!(c.gangs.pending_members(&id, &c.assumed).is_empty());
}
