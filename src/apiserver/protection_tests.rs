use super::*;
use crate::apiserver::store::{StoreError, StoreOptions};

fn put(s: &Store, kind: &str, ns: &str, name: &str, v: Value) {
    s.commit::<StoreError>(&key(kind), ns, name, |_| Ok(Change::Put(v)))
        .unwrap();
}

fn get(s: &Store, kind: &str, ns: &str, name: &str) -> Option<Value> {
    s.get(&key(kind), ns, name).map(|o| o.value())
}

fn claim(name: &str, deleting: bool) -> Value {
    let mut c = json!({"metadata": {"name": name, "namespace": "d", "uid": format!("c-{name}"),
        "finalizers": [PVC_FINALIZER]}, "spec": {}, "status": {"phase": "Bound"}});
    if deleting {
        c["metadata"]["deletionTimestamp"] = json!("2026-11-28T00:00:00Z");
    }
    c
}

fn pod(name: &str, node: &str, volumes: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "d", "uid": format!("p-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}], "volumes": volumes}})
}

#[test]
fn new_claims_and_volumes_get_their_finalizer_once() {
    let mut c = json!({"metadata": {"name": "data"}});
    protect("persistentvolumeclaims", &mut c);
    protect("persistentvolumeclaims", &mut c);
    assert_eq!(c["metadata"]["finalizers"], json!([PVC_FINALIZER]));
    let mut pv = json!({"metadata": {"name": "pv", "finalizers": ["example.com/keep"]}});
    protect("persistentvolumes", &mut pv);
    assert_eq!(
        pv["metadata"]["finalizers"],
        json!(["example.com/keep", PV_FINALIZER])
    );
    let mut other = json!({"metadata": {"name": "p"}});
    protect("pods", &mut other);
    assert!(other["metadata"].get("finalizers").is_none());
}

/// kube's `podUsesPVC`, case by case.
#[test]
fn which_pods_use_a_claim() {
    let data = claim("data", true);
    let by_claim = json!([{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]);
    assert!(pod_uses_claim(&pod("a", "n1", by_claim.clone()), &data));
    assert!(
        !pod_uses_claim(&pod("a", "", by_claim.clone()), &data),
        "an unscheduled pod never started with it"
    );
    let other = json!([{"name": "v", "persistentVolumeClaim": {"claimName": "logs"}}]);
    assert!(!pod_uses_claim(&pod("a", "n1", other), &data));
    // A generic ephemeral volume: claim `<pod>-<volume>`, controlled by the pod.
    let mut eph = claim("web-scratch", true);
    eph["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p-web", "controller": true}]);
    let eph_vol = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
    let web = pod("web", "n1", eph_vol.clone());
    assert!(pod_uses_claim(&web, &eph));
    let mut shut_down = web.clone();
    shut_down["metadata"]["deletionTimestamp"] = json!("2026-11-28T00:00:00Z");
    shut_down["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    assert!(
        !pod_uses_claim(&shut_down, &eph),
        "the kubelet is done with it"
    );
    let mut stranger = pod("web", "n1", eph_vol);
    stranger["metadata"]["uid"] = json!("p-another-web");
    assert!(
        !pod_uses_claim(&stranger, &eph),
        "a claim made for another pod of that name"
    );
}

#[test]
fn a_deleted_claim_stays_while_a_pod_uses_it_then_goes() {
    let s = Store::temporary(StoreOptions::default()).unwrap();
    put(
        &s,
        "persistentvolumeclaims",
        "d",
        "data",
        claim("data", true),
    );
    put(
        &s,
        "persistentvolumeclaims",
        "d",
        "free",
        claim("free", true),
    );
    let mut kept = claim("kept", true);
    kept["metadata"]["finalizers"] = json!([PVC_FINALIZER, "example.com/keep"]);
    put(&s, "persistentvolumeclaims", "d", "kept", kept);
    let volumes = json!([{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]);
    put(&s, "pods", "d", "user", pod("user", "n1", volumes));
    assert_eq!(
        pass(&s),
        [
            "persistentvolumeclaims d/free",
            "persistentvolumeclaims d/kept"
        ]
    );
    assert!(
        get(&s, "persistentvolumeclaims", "d", "free").is_none(),
        "deleted"
    );
    let kept = get(&s, "persistentvolumeclaims", "d", "kept").unwrap();
    assert_eq!(
        kept["metadata"]["finalizers"],
        json!(["example.com/keep"]),
        "another finalizer still holds it"
    );
    assert!(
        get(&s, "persistentvolumeclaims", "d", "data").is_some(),
        "in use"
    );
    s.commit::<StoreError>(&key("pods"), "d", "user", |_| Ok(Change::Delete))
        .unwrap();
    assert_eq!(pass(&s), ["persistentvolumeclaims d/data"]);
    assert!(get(&s, "persistentvolumeclaims", "d", "data").is_none());
}

#[test]
fn a_deleted_volume_stays_while_bound_and_live_objects_get_the_finalizer() {
    let s = Store::temporary(StoreOptions::default()).unwrap();
    let pv = |phase: &str| {
        json!({"metadata": {"name": "pv1", "uid": "v1", "finalizers": [PV_FINALIZER],
            "deletionTimestamp": "2026-11-28T00:00:00Z"}, "spec": {}, "status": {"phase": phase}})
    };
    put(&s, "persistentvolumes", "", "pv1", pv("Bound"));
    let mut old = claim("old", false);
    old["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("finalizers");
    put(&s, "persistentvolumeclaims", "d", "old", old);
    assert!(pass(&s).is_empty());
    assert!(get(&s, "persistentvolumes", "", "pv1").is_some(), "bound");
    let old = get(&s, "persistentvolumeclaims", "d", "old").unwrap();
    assert_eq!(old["metadata"]["finalizers"], json!([PVC_FINALIZER]));
    put(&s, "persistentvolumes", "", "pv1", pv("Released"));
    assert_eq!(pass(&s), ["persistentvolumes /pv1"]);
    assert!(get(&s, "persistentvolumes", "", "pv1").is_none());
}
