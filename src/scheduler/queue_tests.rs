//! The queue's order, backoff, events, gangs and counts.

use super::*;
use crate::scheduler::test_util::pod;
use serde_json::json;

fn p(name: &str, prio: i32, created: &str) -> Arc<PodInfo> {
    Arc::new(pod(
        json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": created},
        "spec": {"priority": prio, "containers": [{"name": "c"}]}}),
    ))
}

#[test]
fn the_metrics_view_of_the_queue() {
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let now = Instant::now();
    q.add(p("a", 0, "2026-01-01T00:00:00Z"));
    q.add(p("b", 0, "2026-01-01T00:00:01Z"));
    let a = q.pop().unwrap();
    assert_eq!(q.history("d/a").0, 1, "the first attempt");
    let first = q.history("d/a").1.expect("first attempt noted");
    let v = q.unschedulable_version;
    q.requeue_unschedulable(a, now);
    assert!(q.unschedulable_version > v);
    q.set_unschedulable_by("d/a", "koord-scheduler", vec!["NodeResourcesFit"]);
    let by = q.unschedulable_by_plugin();
    assert_eq!(by[&("NodeResourcesFit", "koord-scheduler".to_string())], 1);
    let mut incoming = q.drain_incoming();
    incoming.sort();
    assert_eq!(
        incoming,
        [
            (("active", "PodAdd"), 2),
            (("unschedulable", "ScheduleAttemptFailure"), 1)
        ]
    );
    q.on_cluster_event(now + Duration::from_secs(5));
    assert!(
        q.unschedulable_by_plugin().is_empty(),
        "no longer unschedulable"
    );
    assert_eq!(q.drain_incoming(), [(("active", "ClusterEvent"), 1)]);
    let a = q.pop().unwrap();
    assert_eq!(a.name, "a");
    assert_eq!(
        q.history("d/a"),
        (2, Some(first)),
        "the first attempt is kept"
    );
}

#[test]
fn a_gangs_members_go_back_to_back() {
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let member = |name: &str, created: &str| {
        Arc::new(pod(
            json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": created,
            "annotations": {"gang.scheduling.koordinator.sh/name": "g"}},
            "spec": {"containers": [{"name": "c"}]}}),
        ))
    };
    q.add(member("g-a", "2026-01-01T00:00:00Z"));
    q.add(p("other", 0, "2026-01-01T00:00:01Z"));
    q.add(member("g-b", "2026-01-01T00:00:02Z"));
    let order: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(order, ["g-a", "g-b", "other"], "g-b follows g-a");
    // One gang scheduling cycle of two members, one sibling taken from the queue.
    let cycles: Vec<(&str, usize)> = q.gang_cycles.iter().map(|(r, n, _)| (*r, *n)).collect();
    assert_eq!(cycles, [(GANG_ATTEMPTED, 2)]);
    assert_eq!(q.next_pod_seconds.len(), 1);
}

/// The kept counts always equal a recount, through every kind of move.
#[test]
fn counts_follow_every_move() {
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let recount = |q: &Queue| {
        let mut c = [0usize; 4];
        for (_, w) in q.pods.values() {
            c[w.slot()] += 1;
        }
        c
    };
    let t0 = Instant::now();
    let mut rng = 7u64;
    for step in 0..2000u64 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let name = format!("p{}", (rng >> 33) % 40);
        let pod = p(&name, 1, "2026-01-01T00:00:00Z");
        let now = t0 + Duration::from_millis(step * 37);
        match (rng >> 20) % 9 {
            0 | 1 => q.add(pod),
            2 => q.remove(&pod.key),
            3 => {
                q.pop();
            }
            4 => q.requeue_backoff(pod, now),
            5 => q.requeue_unschedulable(pod, now),
            6 => q.gate(pod),
            7 => q.on_cluster_event(now),
            _ => {
                q.flush(now);
                q.ungate_all();
            }
        }
        assert_eq!(q.counts, recount(&q), "step {step}");
        if let Some(e) = q.earliest {
            let min = q.pods.values().filter_map(|(_, w)| w.due()).min();
            assert!(min.is_none_or(|m| e <= m), "earliest is a lower bound");
        }
    }
}

#[test]
fn order_backoff_and_events() {
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    q.add(p("low", 1, "2026-01-01T00:00:00Z"));
    q.add(p("late", 5, "2026-01-01T00:00:09Z"));
    q.add(p("early", 5, "2026-01-01T00:00:01Z"));
    let order: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(order, ["early", "late", "low"]);
    let t0 = Instant::now();
    let x = p("x", 1, "2026-01-01T00:00:00Z");
    q.requeue_backoff(x.clone(), t0);
    assert!(q.pop().is_none());
    q.flush(t0 + Duration::from_millis(999));
    assert!(q.pop().is_none(), "1 s backoff");
    q.flush(t0 + Duration::from_secs(1));
    assert_eq!(q.pop().unwrap().name, "x");
    q.requeue_backoff(x.clone(), t0);
    assert_eq!(
        q.next_wakeup(),
        Some(t0 + Duration::from_secs(2)),
        "doubles"
    );
    q.remove("d/x");
    let u = p("u", 1, "2026-01-01T00:00:00Z");
    q.requeue_unschedulable(u.clone(), t0);
    q.on_cluster_event(t0 + Duration::from_secs(5));
    assert_eq!(
        q.pop().unwrap().name,
        "u",
        "a cluster event re-activates it"
    );
    q.requeue_unschedulable(u, t0);
    q.flush(t0 + MAX_UNSCHEDULABLE);
    assert_eq!(q.pop().unwrap().name, "u", "the maximum stay ends");
}

#[test]
fn a_cluster_event_asks_the_plugins_that_rejected_each_pod_however_many() {
    let mut q = Queue::new(Backoff {
        initial_seconds: 1,
        max_seconds: 10,
    });
    let t0 = Instant::now();
    let few: Vec<&'static str> = vec!["NodeResourcesFit", "TaintToleration"];
    let many: Vec<&'static str> = vec!["A", "B", "C", "D", "E"];
    // Rejectors told before the pod is requeued, and after.
    q.set_unschedulable_by("d/few", "koord-scheduler", few.clone());
    q.requeue_unschedulable(p("few", 1, "2026-01-01T00:00:00Z"), t0);
    q.requeue_unschedulable(p("many", 1, "2026-01-01T00:00:00Z"), t0);
    q.set_unschedulable_by("d/many", "koord-scheduler", many.clone());
    let mut asked = Vec::new();
    q.on_event(t0, Events::ALL, |pod, plugins| {
        asked.push((pod.name.clone(), plugins.to_vec()));
        false
    });
    asked.sort();
    assert_eq!(
        asked,
        [("few".to_string(), few), ("many".to_string(), many)]
    );
}
