//! Queueing hints end to end: the default profile rejects pods, the queue keeps each with
//! the events its rejecting plugins registered for, and cluster changes move back only the
//! pods a hint says may fit now.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{ClusterEvent, Events, node_change};
use crate::scheduler::config::{self, Backoff};
use crate::scheduler::cycle::{self, Outcome};
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::framework::{ClusterState, PodInfo};
use crate::scheduler::queue::Queue;
use crate::scheduler::test_util::{cluster, node_json, simple_pod};

/// As the live scheduler: a cycle, and a rejected pod kept unschedulable with its hint.
fn reject(fw: &Framework, q: &mut Queue, c: &mut ClusterState, pod: PodInfo, now: Instant) {
    reject_by(fw, q, c, pod, now, "NodeResourcesFit");
}

fn reject_by(
    fw: &Framework,
    q: &mut Queue,
    c: &mut ClusterState,
    pod: PodInfo,
    now: Instant,
    by: &str,
) {
    let pod = Arc::new(pod);
    let a = cycle::run(fw, &pod, c, Scope::Live { start: 0 });
    assert!(
        matches!(a.outcome, Outcome::Unschedulable { .. }),
        "{}",
        pod.name
    );
    let verdicts = a.result.iter().flat_map(|r| r.verdicts.values());
    let mut plugins: Vec<&'static str> = verdicts.filter_map(|v| v.plugin).collect();
    plugins.sort_unstable();
    plugins.dedup();
    assert_eq!(plugins, [by], "{}", pod.name);
    q.set_hint(&pod.key, fw.events_of(&plugins));
    q.set_unschedulable_by(&pod.key, "koord-scheduler", plugins);
    q.requeue_unschedulable(pod, now);
}

fn happened(q: &mut Queue, fw: &Framework, c: &ClusterState, ev: ClusterEvent, now: Instant) {
    q.on_event(now, ev.kind, |p, plugins| fw.may_help(plugins, p, &ev, c));
}

fn popped(q: &mut Queue) -> Vec<String> {
    std::iter::from_fn(|| q.pop())
        .map(|p| p.name.clone())
        .collect()
}

#[test]
fn only_the_changes_that_may_help_move_a_pod_back() {
    let cfg = config::default_config().unwrap();
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
    fw.setup(&mut c);
    let hog = json!({"metadata": {"name": "hog", "namespace": "default", "uid": "hog"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}});
    c.upsert_pod(Arc::new(serde_json::from_value(hog).unwrap()));
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let t0 = Instant::now();
    // "big" can never fit a 4-CPU node; "small" fits once the hog leaves.
    reject(&fw, &mut q, &mut c, simple_pod("big", "64", "1Gi"), t0);
    reject(&fw, &mut q, &mut c, simple_pod("small", "2", "1Gi"), t0);
    let later = t0 + Duration::from_secs(5);

    // A heartbeat-like annotation change and a relabel: NodeResourcesFit does not
    // register for them.
    let mut n1 = node_json("n1", "4", "8Gi");
    n1["metadata"]["annotations"] = json!({"heartbeat": "1"});
    n1["metadata"]["labels"]["zone"] = "a".into();
    let n1: k8s_openapi::api::core::v1::Node = serde_json::from_value(n1).unwrap();
    let kind = node_change(c.node("n1"), &n1);
    assert!(kind.contains(Events::NODE_LABEL) && !kind.contains(Events::NODE_ALLOCATABLE));
    c.upsert_node(Arc::new(n1));
    happened(&mut q, &fw, &c, ClusterEvent::on_node(kind, "n1"), later);
    assert!(
        popped(&mut q).is_empty(),
        "no pod moves for an unrelated change"
    );

    // The hog leaves: the pod that fits n1 at all moves, the 64-CPU one stays.
    c.delete_pod("default/hog");
    let gone = ClusterEvent::on_node(Events::POD_ASSIGNED_DELETE, "n1");
    happened(&mut q, &fw, &c, gone, later);
    assert_eq!(popped(&mut q), ["small"]);

    // A node big enough is added: now the 64-CPU pod may fit.
    c.upsert_node(Arc::new(
        serde_json::from_value(node_json("n2", "128", "256Gi")).unwrap(),
    ));
    happened(
        &mut q,
        &fw,
        &c,
        ClusterEvent::on_node(Events::NODE_ADD, "n2"),
        later,
    );
    assert_eq!(popped(&mut q), ["big"]);
}

#[test]
fn a_pod_whose_rejection_is_not_known_moves_on_every_change() {
    let cfg = config::default_config().unwrap();
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let c = cluster(vec![node_json("n1", "4", "8Gi")]);
    assert_eq!(fw.events_of(&[]), Events::ALL);
    assert_eq!(fw.events_of(&["NotInThisProfile"]), Events::ALL);
    let fit = fw.events_of(&["NodeResourcesFit"]);
    assert!(fit.contains(Events::POD_ASSIGNED_DELETE) && !fit.contains(Events::NODE_LABEL));
    let p = simple_pod("p", "64", "1Gi");
    let ev = ClusterEvent::on_node(Events::NODE_OTHER, "n1");
    assert!(fw.may_help(&[], &p, &ev, &c));
    assert!(fw.may_help(&["NotInThisProfile"], &p, &ev, &c));
    assert!(!fw.may_help(&["NodeResourcesFit"], &p, &ev, &c));
    // One of two rejecting plugins that may help is enough.
    let label = ClusterEvent::on_node(Events::NODE_LABEL, "n1");
    assert!(fw.may_help(&["NodeResourcesFit", "NodeAffinity"], &p, &label, &c));
}

#[test]
fn a_pod_waiting_for_company_moves_when_a_matching_pod_lands_or_is_relabelled() {
    let cfg = config::default_config().unwrap();
    let fw = config::framework(&cfg.profiles[0]).unwrap();
    let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
    fw.setup(&mut c);
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let t0 = Instant::now();
    let wants_db = crate::scheduler::test_util::pod(
        json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}},
            "containers": [{"name": "c"}]}}),
    );
    reject_by(&fw, &mut q, &mut c, wants_db, t0, "InterPodAffinity");
    let later = t0 + Duration::from_secs(5);
    happened(
        &mut q,
        &fw,
        &c,
        ClusterEvent::on_node(Events::NODE_OTHER, "n1"),
        later,
    );
    assert!(popped(&mut q).is_empty(), "a heartbeat brings no db");
    let relabelled = ClusterEvent::on_node(Events::POD_ASSIGNED_UPDATE, "n1");
    happened(&mut q, &fw, &c, relabelled, later);
    assert_eq!(
        popped(&mut q),
        ["web"],
        "a pod relabelled where it runs may be the db"
    );
}
