use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::framework::world::World;

fn pod(extra: serde_json::Value) -> PodView {
    let mut v = json!({"metadata": {"name": "p", "namespace": "default", "uid": "u-p",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": true}]},
        "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler", "containers": []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    json_patch::merge(&mut v, &extra);
    PodView::json(v)
}

fn world(replicas: i32) -> World {
    let mut w = World::default();
    w.replicas.insert("rs-1".into(), replicas);
    w
}

fn args(extra: serde_json::Value) -> MigrationArgs {
    MigrationArgs::parse(&extra).unwrap()
}

#[test]
fn non_retryable_checks_use_upstream_wording() {
    let a = args(json!({"skipEvictionGates": ["ExpectedReplicas"]}));
    let w = world(5);
    let why = |p: PodView| {
        migration_check(&a, &p, &w, &[])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert_eq!(why(pod(json!({}))), "");
    let ds = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": true}]}});
    assert_eq!(why(pod(ds)), "pod is a DaemonSet pod");
    assert_eq!(
        why(pod(json!({"spec": {"priority": 2000001000}}))),
        "pod has system critical priority"
    );
    assert!(
        why(pod(
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}})
        ))
        .starts_with("pod has local storage")
    );
    assert_eq!(
        why(pod(json!({"metadata": {"ownerReferences": null}}))),
        "pod does not have any ownerRefs"
    );
    assert_eq!(
        why(pod(
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}})
        )),
        "pod is a mirror pod"
    );
    assert!(
        why(pod(json!({"spec": {"schedulerName": "default-scheduler"}})))
            .contains("does not support Reservation")
    );
    // The evict annotation bypasses the DaemonSet check.
    let forced = json!({"metadata": {"annotations": {"descheduler.alpha.kubernetes.io/evict": "true"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": true}]}});
    assert_eq!(why(pod(forced)), "");
    let ns = args(json!({"namespaces": {"exclude": ["default"]}}));
    assert!(migration_check(&ns, &pod(json!({})), &w, &[]).is_err());
    let pt = args(json!({"priorityThreshold": {"value": 100}}));
    let e = migration_check(&pt, &pod(json!({"spec": {"priority": 100}})), &w, &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "pod has higher priority than specified priority class threshold"
    );
}

#[test]
fn expected_replicas_and_limits_on_jobs_in_flight() {
    let a = args(json!({"maxMigratingPerNode": 1, "maxMigratingPerNamespace": 2}));
    let job = |name: &str, node: &str, ns: &str| JobView {
        namespace: ns.into(),
        pod: name.into(),
        pod_uid: None,
        node: Some(node.into()),
        owner_uid: None,
        arbitrated: false,
    };
    // A single replica (or one that the default maxUnavailable would empty) never moves.
    assert!(
        migration_check(&a, &pod(json!({})), &world(1), &[])
            .unwrap_err()
            .to_string()
            .contains("expectedReplicas")
    );
    let w = world(10);
    assert!(migration_check(&a, &pod(json!({})), &w, &[]).is_ok());
    let e = migration_check(&a, &pod(json!({})), &w, &[job("q", "n1", "x")])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("maxMigratingPerNode 1"), "{e}");
    assert!(migration_check(&a, &pod(json!({})), &w, &[job("q", "n2", "default")]).is_ok());
    let two = [job("q", "n2", "default"), job("r", "n3", "default")];
    assert!(
        migration_check(&a, &pod(json!({})), &w, &two)
            .unwrap_err()
            .to_string()
            .starts_with("maxMigratingPerNamespace")
    );
    let own = [job("p", "n1", "default")];
    assert!(
        migration_check(&a, &pod(json!({})), &w, &own)
            .unwrap_err()
            .to_string()
            .contains("already has a PodMigrationJob")
    );
    // Per workload: 10 replicas → 2 migrating at most.
    let mut wl = World::default();
    wl.replicas.insert("rs-1".into(), 10);
    wl.pods = vec![Arc::new(pod(json!({"metadata": {"name": "q"}})))];
    wl.index_owners();
    let mut j = job("q", "n9", "other");
    j.owner_uid = Some("rs-1".into());
    let mut k = j.clone();
    k.pod = "r".into();
    let e = migration_check(&args(json!({})), &pod(json!({})), &wl, &[j, k])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("maxMigratingPerWorkload 2"), "{e}");
}

#[test]
fn max_of_resolves_like_koordinator() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    assert_eq!(max_of(20, None), 2);
    assert_eq!(max_of(5, None), 2);
    assert_eq!(max_of(3, None), 1);
    assert_eq!(max_of(0, None), 0);
    assert_eq!(max_of(10, Some(&IntOrString::String("25%".into()))), 2);
    assert_eq!(
        max_of(3, Some(&IntOrString::String("10%".into()))),
        1,
        "rounded down to 0 → 1"
    );
    assert_eq!(
        max_of(3, Some(&IntOrString::Int(5))),
        3,
        "capped at replicas"
    );
}

#[test]
fn the_workload_object_limiter_spaces_migrations_out() {
    use crate::descheduler::configfile::parse;
    use crate::descheduler::framework::Plugins;
    // Two hot pods of one workload on two nodes; workload limiter: 1 per 10 minutes.
    let cfg = parse(
        "profiles: [{name: p, plugins: {deschedule: {enabled: [{name: RemovePodsHavingTooManyRestarts}]}}, \
         pluginConfig: [{name: RemovePodsHavingTooManyRestarts, args: {podRestartThreshold: 1}}, \
         {name: MigrationController, args: {objectLimiters: {workload: {duration: 10m, maxMigrating: 1}}}}]}]",
        "t",
    )
    .unwrap();
    let node = |n: &str| {
        serde_json::from_value(json!({"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})).unwrap()
    };
    let restarted = |name: &str, n: &str| {
        pod(
            json!({"metadata": {"name": name, "uid": name}, "spec": {"nodeName": n},
            "status": {"containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": true, "restartCount": 3}]}}),
        )
    };
    let w = World::build(
        [node("n1"), node("n2")].map(std::sync::Arc::new),
        [restarted("a", "n1"), restarted("b", "n2")].map(std::sync::Arc::new),
        Vec::<crate::api::slo::NodeMetric>::new(),
        &[],
        &[json!({"kind": "ReplicaSet", "metadata": {"uid": "rs-1"}, "spec": {"replicas": 10}})],
    );
    let mut plugins = Plugins::build(&cfg, 0, crate::descheduler::plugins::registry).unwrap();
    let r = plugins.run(&w, 0);
    assert_eq!(r.evictions.len(), 1, "{r:?}");
    assert!(
        r.skipped[0].reason.starts_with("objectLimiters"),
        "{:?}",
        r.skipped
    );
    let later = plugins.run(&w, 601_000);
    assert_eq!(later.evictions.len(), 1, "a token back after 10 minutes");
}

#[test]
fn max_concurrent_reconciles_defaults_to_one_and_is_bounded() {
    let parse = |v: serde_json::Value| MigrationArgs::parse(&v);
    assert_eq!(parse(json!({})).unwrap().max_concurrent_reconciles, 1);
    assert_eq!(
        parse(json!({"maxConcurrentReconciles": 0}))
            .unwrap()
            .max_concurrent_reconciles,
        1
    );
    assert_eq!(
        parse(json!({"maxConcurrentReconciles": 8}))
            .unwrap()
            .max_concurrent_reconciles,
        8
    );
    let e = parse(json!({"maxConcurrentReconciles": 100000}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("maxConcurrentReconciles"), "{e}");
}
