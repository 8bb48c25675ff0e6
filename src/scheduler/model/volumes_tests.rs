//! The storage model's matching and assume cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::{Value, json};

use super::*;

fn pv(v: Value) -> Arc<PersistentVolume> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn pvc(v: Value) -> PersistentVolumeClaim {
    serde_json::from_value(v).unwrap()
}

fn available(name: &str, size: &str, class: &str) -> Value {
    json!({"metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"capacity": {"storage": size}, "storageClassName": class, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": "Available"}})
}

#[test]
fn find_matching_volume_follows_upstream() {
    let claim = pvc(
        json!({"metadata": {"name": "c", "namespace": "d", "uid": "u1"},
        "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}),
    );
    let labels = BTreeMap::new();
    let pvs = vec![
        pv(available("too-small", "1Gi", "local")),
        pv(available("big", "10Gi", "local")),
        pv(available("fits", "3Gi", "local")),
        pv(available("other-class", "2Gi", "ssd")),
        {
            let mut v = available("released", "2Gi", "local");
            v["status"]["phase"] = "Released".into();
            pv(v)
        },
        {
            let mut v = available("block", "2Gi", "local");
            v["spec"]["volumeMode"] = "Block".into();
            pv(v)
        },
        {
            let mut v = available("rwx-only", "2Gi", "local");
            v["spec"]["accessModes"] = json!(["ReadWriteMany"]);
            pv(v)
        },
        {
            let mut v = available("claimed", "2Gi", "local");
            v["spec"]["claimRef"] = json!({"name": "other", "namespace": "d"});
            pv(v)
        },
    ];
    let m = find_matching_volume(&claim, pvs.iter(), Some(&labels), &[]).unwrap();
    assert_eq!(
        m.metadata.name.as_deref(),
        Some("fits"),
        "the smallest that fits"
    );
    let m = find_matching_volume(&claim, pvs.iter(), Some(&labels), &["fits"]).unwrap();
    assert_eq!(
        m.metadata.name.as_deref(),
        Some("big"),
        "a taken PV is skipped"
    );
    // A PV pre-bound to the claim wins even if larger and not Available.
    let mut pre = available("prebound", "50Gi", "elsewhere");
    pre["spec"]["claimRef"] = json!({"name": "c", "namespace": "d"});
    pre["status"]["phase"] = "Pending".into();
    let mut with = pvs.clone();
    with.push(pv(pre));
    let m = find_matching_volume(&claim, with.iter(), Some(&labels), &[]).unwrap();
    assert_eq!(m.metadata.name.as_deref(), Some("prebound"));
    // ... unless its node affinity fails: then there is no match at all on this node.
    let mut pinned = available("prebound", "50Gi", "local");
    pinned["spec"]["claimRef"] = json!({"name": "c", "namespace": "d"});
    pinned["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}});
    let mut with = pvs.clone();
    with.push(pv(pinned));
    assert!(find_matching_volume(&claim, with.iter(), Some(&labels), &[]).is_none());
}

#[test]
fn binding_a_volume_sets_its_claim_ref_once() {
    let claim = pvc(
        json!({"metadata": {"name": "c", "namespace": "d", "uid": "u1", "resourceVersion": "7"}}),
    );
    let free = pv(available("v", "1Gi", ""));
    let bound = bind_volume_to_claim(&free, &claim).unwrap();
    let r = bound.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(
        (
            r.kind.as_deref(),
            r.name.as_deref(),
            r.namespace.as_deref(),
            r.uid.as_deref()
        ),
        (
            Some("PersistentVolumeClaim"),
            Some("c"),
            Some("d"),
            Some("u1")
        )
    );
    assert_eq!(
        bound.metadata.annotations.as_ref().unwrap()[ANN_BOUND_BY_CONTROLLER],
        "yes"
    );
    assert!(
        bind_volume_to_claim(&bound, &claim).is_none(),
        "already bound: nothing to write"
    );
}

#[test]
fn assumptions_last_until_a_newer_version_or_revert() {
    let mut v = Volumes::default();
    v.upsert_pv(pv(available("v", "1Gi", "")));
    let claim = Arc::new(pvc(
        json!({"metadata": {"name": "c", "namespace": "d", "uid": "u1"}}),
    ));
    let assumed = Arc::new(bind_volume_to_claim(&v.pvs["v"], &claim).unwrap());
    let chosen = PodVolumes {
        bindings: vec![StaticBinding {
            pv: assumed,
            pvc: claim.clone(),
        }],
        provisions: vec![],
    };
    v.assume("d/p", &chosen);
    let claimed = |v: &Volumes| {
        v.pv("v")
            .unwrap()
            .spec
            .as_ref()
            .unwrap()
            .claim_ref
            .is_some()
    };
    assert!(claimed(&v));
    // The same version again (a resync) keeps the assumption.
    v.upsert_pv(pv(available("v", "1Gi", "")));
    assert!(claimed(&v));
    v.revert("d/p");
    assert!(!claimed(&v), "reverted");
    v.assume("d/p", &chosen);
    v.settled("d/p");
    let mut newer = available("v", "1Gi", "");
    newer["metadata"]["resourceVersion"] = "2".into();
    newer["spec"]["claimRef"] = json!({"name": "c", "namespace": "d", "uid": "u1"});
    v.upsert_pv(pv(newer));
    assert!(claimed(&v), "the API's version replaces the assumed one");
    assert!(v.assumed_pvs.is_empty());
}

#[test]
fn pod_claims_name_ephemeral_volumes_after_the_pod() {
    let p: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(json!({"metadata": {"name": "web-0"},
        "spec": {"containers": [], "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "cfg", "configMap": {"name": "x"}}]}}))
        .unwrap();
    let names: Vec<(String, bool)> = pod_claims(&p)
        .into_iter()
        .map(|c| (c.name, c.ephemeral))
        .collect();
    assert_eq!(
        names,
        [("data-web-0".into(), false), ("web-0-scratch".into(), true)]
    );
}
