//! Gang states: the basic check, readiness by match policy, Strict vs NonStrict failure,
//! PodGroup-declared gangs and gang groups.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn settings() -> GangSettings {
    GangSettings {
        aware_network_topology: false,
        default_timeout: Duration::from_secs(600),
        default_match_policy: "once-satisfied".into(),
    }
}

fn state() -> GangState {
    GangState {
        settings: Some(settings()),
        ..Default::default()
    }
}

fn member(name: &str, gang: &str, min: usize, extra: Value) -> Pod {
    let mut ann = json!({"gang.scheduling.koordinator.sh/name": gang,
        "gang.scheduling.koordinator.sh/min-available": min.to_string()});
    if let Some(m) = extra.as_object() {
        for (k, v) in m {
            ann[format!("gang.scheduling.koordinator.sh/{k}")] = v.clone();
        }
    }
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "d", "annotations": ann}}),
    )
    .unwrap()
}

fn add(s: &mut GangState, p: &Pod) -> String {
    let key = format!("d/{}", p.metadata.name.as_deref().unwrap());
    s.track(p, &key, Child::default());
    key
}

#[test]
fn annotation_gang_needs_min_children_before_scheduling() {
    let mut s = state();
    let a = member("a", "g", 3, json!({}));
    let ka = add(&mut s, &a);
    assert_eq!(
        s.check(&ka, &a).unwrap_err().to_string(),
        "gangGroup [d/g] basic check: memberGangs [d/g] child pod not collect enough, current gang: d/g, podName: d/a"
    );
    add(&mut s, &member("b", "g", 3, json!({})));
    add(&mut s, &member("c", "g", 3, json!({})));
    assert!(s.check(&ka, &a).is_ok());
    let spec = s.spec("d/g").unwrap();
    assert_eq!((spec.min, spec.total, spec.mode), (3, 3, Mode::Strict));
    assert_eq!(spec.wait, Duration::from_secs(600));
}

#[test]
fn permit_waits_for_min_then_releases_the_group() {
    let mut s = state();
    let keys: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| add(&mut s, &member(n, "g", 3, json!({"waiting-time": "30s"}))))
        .collect();
    assert!(!s.ready(&keys[0]));
    s.wait(&keys[0]);
    assert!(!s.ready(&keys[1]));
    s.wait(&keys[1]);
    assert!(s.ready(&keys[2]), "the third makes min");
    assert_eq!(s.release(&keys[2]), vec![keys[0].clone(), keys[1].clone()]);
    assert!(s.waiting.is_empty());
    assert!(s.gangs["d/g"].once_satisfied);
    assert_eq!(s.wait_time("d/g"), Duration::from_secs(30));
}

#[test]
fn strict_rejects_the_waiting_members_nonstrict_keeps_them() {
    for (mode, rejected) in [("Strict", 2), ("NonStrict", 0)] {
        let mut s = state();
        let keys: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| add(&mut s, &member(n, "g", 4, json!({"mode": mode}))))
            .collect();
        s.wait(&keys[0]);
        s.wait(&keys[1]);
        assert_eq!(s.member_failed(&keys[2]).len(), rejected, "{mode}");
        assert_eq!(s.waiting.len(), 2 - rejected, "{mode}");
    }
}

#[test]
fn match_policies() {
    for (policy, bound, waiting, ready) in [
        ("only-waiting", 1, 1, false),
        ("waiting-and-running", 1, 1, true),
        ("once-satisfied", 1, 0, true),
        ("once-satisfied", 0, 1, false),
    ] {
        let mut s = state();
        let mut keys = Vec::new();
        for (i, n) in ["a", "b", "c"].iter().enumerate() {
            let p = member(n, "g", 3, json!({"match-policy": policy}));
            let key = format!("d/{n}");
            s.track(
                &p,
                &key,
                Child {
                    bound: i < bound,
                    ..Default::default()
                },
            );
            keys.push(key);
        }
        for k in keys.iter().skip(bound).take(waiting) {
            s.wait(k);
        }
        assert_eq!(
            s.ready(&keys[2]),
            ready,
            "{policy} bound={bound} waiting={waiting}"
        );
    }
}

#[test]
fn pod_group_gangs_and_groups() {
    let mut s = state();
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "d",
        "labels": {"pod-group.scheduling.sigs.k8s.io": "pg"}}}))
    .unwrap();
    add(&mut s, &pod);
    assert!(
        s.check("d/p", &pod)
            .unwrap_err()
            .to_string()
            .starts_with("gang has not init, gangName: d/pg")
    );
    let pg: PodGroup =
        serde_json::from_value(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "d",
            "annotations": {"gang.scheduling.koordinator.sh/groups": "[\"d/pg\",\"d/other\"]"}},
        "spec": {"minMember": 1, "scheduleTimeoutSeconds": 5}}))
        .unwrap();
    s.upsert_pod_group(&pg);
    assert_eq!(s.spec("d/pg").unwrap().wait, Duration::from_secs(5));
    assert_eq!(s.group_id("d/pg"), "d/other,d/pg");
    assert!(
        s.check("d/p", &pod)
            .unwrap_err()
            .to_string()
            .contains("memberGangs [d/other] doesn't exists")
    );
}
