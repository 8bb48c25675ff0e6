//! kube-scheduler's VolumeBinding table (volume_binding_test.go), its case names and
//! wording, and the fixtures the other volume plugin tables share.

use std::sync::Arc;

use serde_json::{Value, json};

use super::binding::{self, VolumeBinding};
use crate::scheduler::framework::{ClusterState, Code, CycleState, Plugin, Status};
use crate::scheduler::test_util::pod;

pub(super) fn node(name: &str, labels: Value) -> Value {
    let mut l = labels;
    l["kubernetes.io/hostname"] = name.into();
    json!({"metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
}

/// A cluster of `nodes` with storage objects (PersistentVolume, PersistentVolumeClaim,
/// StorageClass, CSINode by `kind`) and placed pods (kind Pod).
pub(super) fn cluster(nodes: Vec<Value>, objects: Vec<Value>) -> ClusterState {
    let mut c = ClusterState::default();
    for n in nodes {
        c.upsert_node(Arc::new(serde_json::from_value(n).unwrap()));
    }
    for o in objects {
        let v = &mut c.volumes;
        match o["kind"].as_str().unwrap() {
            "PersistentVolume" => v.upsert_pv(Arc::new(serde_json::from_value(o).unwrap())),
            "PersistentVolumeClaim" => v.upsert_pvc(Arc::new(serde_json::from_value(o).unwrap())),
            "StorageClass" => v.upsert_class(Arc::new(serde_json::from_value(o).unwrap())),
            "CSINode" => v.upsert_csi_node(Arc::new(serde_json::from_value(o).unwrap())),
            "CSIDriver" => v.upsert_csi_driver(Arc::new(serde_json::from_value(o).unwrap())),
            "CSIStorageCapacity" => v.upsert_capacity(Arc::new(serde_json::from_value(o).unwrap())),
            _ => {
                c.upsert_pod(Arc::new(serde_json::from_value(o).unwrap()));
            }
        }
    }
    c
}

pub(super) fn pvc(name: &str, class: &str) -> Value {
    json!({"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"]}})
}

pub(super) fn bound_pvc(name: &str, class: &str, pv: &str) -> Value {
    let mut c = pvc(name, class);
    c["spec"]["volumeName"] = pv.into();
    c["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
    c
}

pub(super) fn pv(name: &str, class: &str, affinity: Value) -> Value {
    let mut pv = json!({"kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"storageClassName": class, "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": "Available"}});
    if let Some(m) = affinity.as_object() {
        let exprs: Vec<Value> = m
            .iter()
            .map(|(k, v)| json!({"key": k, "operator": "In", "values": v}))
            .collect();
        pv["spec"]["nodeAffinity"] =
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}});
    }
    pv
}

pub(super) fn class(name: &str, mode: Option<&str>, provisioner: &str) -> Value {
    let mut c =
        json!({"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner});
    if let Some(m) = mode {
        c["volumeBindingMode"] = m.into();
    }
    c
}

pub(super) fn pod_with_claims(name: &str, claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}], "volumes": volumes}})
}

/// PreFilter's status, then Filter's on each node (not run when PreFilter did not pass).
pub(super) fn run(
    p: &dyn Plugin,
    c: &ClusterState,
    pod_json: Value,
) -> (Status, Vec<Status>, CycleState) {
    let pd = pod(pod_json);
    let mut state = CycleState::default();
    let (pre, _) = p.pre_filter(&mut state, &pd, c);
    let filters = if pre.is_success() {
        c.nodes
            .iter()
            .map(|n| p.filter(&state, &pd, n, c))
            .collect()
    } else {
        Vec::new()
    };
    (pre, filters, state)
}

pub(super) fn status(code: Code, reasons: &[&str]) -> Status {
    Status {
        code,
        reasons: reasons.iter().map(|r| r.to_string().into()).collect(),
    }
}

pub(super) const WAIT: &str = "wait-sc";
const IMMEDIATE: &str = "immediate-sc";

fn classes() -> Vec<Value> {
    vec![
        class(WAIT, Some("WaitForFirstConsumer"), ""),
        class(IMMEDIATE, Some("Immediate"), ""),
    ]
}

/// (name, nodes, objects, the pod's claims, PreFilter, Filter per node)
type BindingCase = (
    &'static str,
    Vec<Value>,
    Vec<Value>,
    Vec<&'static str>,
    Status,
    Vec<Status>,
);

#[test]
fn volume_binding_table() {
    let vb = VolumeBinding::new(Default::default()).unwrap();
    let unresolvable = |r: &str| status(Code::UnschedulableAndUnresolvable, &[r]);
    let ok = Status::success();
    let cases: Vec<BindingCase> = vec![
        (
            "pod has not pvcs",
            vec![node("node-a", json!({}))],
            vec![],
            vec![],
            Status::skip(),
            vec![],
        ),
        (
            "all bound",
            vec![node("node-a", json!({}))],
            vec![
                bound_pvc("pvc-a", WAIT, "pv-a"),
                pv("pv-a", WAIT, json!(null)),
            ],
            vec!["pvc-a"],
            ok.clone(),
            vec![ok.clone()],
        ),
        (
            "PVC does not exist",
            vec![node("node-a", json!({}))],
            vec![],
            vec!["pvc-a"],
            unresolvable(r#"persistentvolumeclaim "pvc-a" not found"#),
            vec![],
        ),
        (
            "Part of PVCs do not exist",
            vec![node("node-a", json!({}))],
            vec![bound_pvc("pvc-a", WAIT, "pv-a")],
            vec!["pvc-a", "pvc-b"],
            unresolvable(r#"persistentvolumeclaim "pvc-b" not found"#),
            vec![],
        ),
        (
            "immediate claims not bound",
            vec![node("node-a", json!({}))],
            vec![pvc("pvc-a", IMMEDIATE)],
            vec!["pvc-a"],
            unresolvable("pod has unbound immediate PersistentVolumeClaims"),
            vec![],
        ),
        (
            "unbound claims no matches",
            vec![node("node-a", json!({}))],
            vec![pvc("pvc-a", WAIT)],
            vec!["pvc-a"],
            ok.clone(),
            vec![unresolvable(binding::ERR_BIND_CONFLICT)],
        ),
        (
            "bound and unbound unsatisfied",
            vec![node("node-a", json!({"foo": "barbar"}))],
            vec![
                bound_pvc("pvc-a", WAIT, "pv-a"),
                pvc("pvc-b", WAIT),
                pv("pv-a", WAIT, json!({"foo": ["bar"]})),
            ],
            vec!["pvc-a", "pvc-b"],
            ok.clone(),
            vec![status(
                Code::UnschedulableAndUnresolvable,
                &[binding::ERR_NODE_CONFLICT, binding::ERR_BIND_CONFLICT],
            )],
        ),
        (
            "pv not found",
            vec![node("node-a", json!({}))],
            vec![bound_pvc("pvc-a", WAIT, "pv-a")],
            vec!["pvc-a"],
            ok.clone(),
            vec![unresolvable(
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            )],
        ),
        (
            "pv not found claim lost",
            vec![node("node-a", json!({}))],
            vec![{
                let mut c = bound_pvc("pvc-a", WAIT, "pv-a");
                c["status"] = json!({"phase": "Lost"});
                c
            }],
            vec!["pvc-a"],
            unresolvable(
                r#"persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a""#,
            ),
            vec![],
        ),
        (
            "local volumes with close capacity are preferred",
            vec![
                node("node-a", json!({})),
                node("node-b", json!({})),
                node("node-c", json!({})),
            ],
            vec![
                pv(
                    "pv-a-0",
                    WAIT,
                    json!({"kubernetes.io/hostname": ["node-a"]}),
                ),
                pv(
                    "pv-b-0",
                    WAIT,
                    json!({"kubernetes.io/hostname": ["node-b"]}),
                ),
                pvc("pvc-a", WAIT),
            ],
            vec!["pvc-a"],
            ok.clone(),
            vec![
                ok.clone(),
                ok.clone(),
                unresolvable(binding::ERR_BIND_CONFLICT),
            ],
        ),
    ];
    for (name, nodes, mut objects, claims, want_pre, want_filter) in cases {
        objects.extend(classes());
        let c = cluster(nodes, objects);
        let (pre, filters, _) = run(&vb, &c, pod_with_claims("pod-a", &claims));
        assert_eq!(pre, want_pre, "{name}: PreFilter");
        assert_eq!(filters, want_filter, "{name}: Filter");
    }
}

#[test]
fn volume_binding_reserve_picks_the_smallest_fitting_pv_and_provisions_the_rest() {
    let vb = VolumeBinding::new(Default::default()).unwrap();
    let mut big = pv("pv-big", WAIT, json!({"kubernetes.io/hostname": ["n1"]}));
    big["spec"]["capacity"]["storage"] = "10Gi".into();
    let small = pv("pv-small", WAIT, json!({"kubernetes.io/hostname": ["n1"]}));
    let mut want = pvc("pvc-a", WAIT);
    want["spec"]["resources"] = json!({"requests": {"storage": "500Mi"}});
    let c = cluster(
        vec![node("n1", json!({})), node("n2", json!({}))],
        vec![
            big,
            small,
            want,
            pvc("pvc-b", "fast"),
            class(
                WAIT,
                Some("WaitForFirstConsumer"),
                "kubernetes.io/no-provisioner",
            ),
            class("fast", Some("WaitForFirstConsumer"), "csi.example.com"),
        ],
    );
    let pd = pod(pod_with_claims("pod-a", &["pvc-a", "pvc-b"]));
    let mut state = CycleState::default();
    assert!(vb.pre_filter(&mut state, &pd, &c).0.is_success());
    assert!(
        vb.filter(&state, &pd, c.node("n1").unwrap(), &c)
            .is_success()
    );
    assert_eq!(
        vb.filter(&state, &pd, c.node("n2").unwrap(), &c)
            .reasons
            .as_slice(),
        [binding::ERR_BIND_CONFLICT],
        "no local PV on n2 for pvc-a"
    );
    assert!(vb.reserve(&mut state, &pd, "n1", &c).is_success());
    let chosen = binding::chosen(&state).unwrap();
    assert_eq!(chosen.bindings.len(), 1);
    let bound = &chosen.bindings[0].pv;
    assert_eq!(bound.metadata.name.as_deref(), Some("pv-small"));
    let r = bound.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(
        (r.name.as_deref(), r.uid.as_deref()),
        (Some("pvc-a"), Some("uid-pvc-a"))
    );
    assert_eq!(
        bound.metadata.annotations.as_ref().unwrap()["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    let provisioned = &chosen.provisions[0];
    assert_eq!(provisioned.metadata.name.as_deref(), Some("pvc-b"));
    assert_eq!(
        provisioned.metadata.annotations.as_ref().unwrap()["volume.kubernetes.io/selected-node"],
        "n1"
    );
    let (key, report) = vb.report(&state).unwrap();
    assert_eq!(key, "volumes");
    assert_eq!(
        report,
        json!({"bind": [{"claim": "default/pvc-a", "volume": "pv-small"}], "provision": ["default/pvc-b"]})
    );
}

#[test]
fn an_assumed_pv_is_not_chosen_again_until_forgotten() {
    let vb = VolumeBinding::new(Default::default()).unwrap();
    let mut c = cluster(
        vec![node("n1", json!({}))],
        vec![
            pv("pv-1", WAIT, json!(null)),
            pvc("pvc-a", WAIT),
            pvc("pvc-b", WAIT),
            class(WAIT, Some("WaitForFirstConsumer"), ""),
        ],
    );
    let first = pod(pod_with_claims("first", &["pvc-a"]));
    let mut state = CycleState::default();
    vb.pre_filter(&mut state, &first, &c);
    assert!(vb.reserve(&mut state, &first, "n1", &c).is_success());
    c.volumes
        .assume(&first.key, binding::chosen(&state).unwrap());
    let second = pod(pod_with_claims("second", &["pvc-b"]));
    let (_, filters, _) = run(&vb, &c, pod_with_claims("second", &["pvc-b"]));
    assert_eq!(
        filters[0].reasons.as_slice(),
        [binding::ERR_BIND_CONFLICT],
        "pv-1 is taken by pvc-a"
    );
    c.forget(&first.key);
    let mut state = CycleState::default();
    vb.pre_filter(&mut state, &second, &c);
    assert!(
        vb.filter(&state, &second, &c.nodes[0], &c).is_success(),
        "released"
    );
}

#[test]
fn volume_binding_rejects_a_negative_timeout() {
    let args = binding::Args {
        bind_timeout_seconds: -1,
        shape: None,
    };
    let e = VolumeBinding::new(args).err().unwrap().to_string();
    assert!(
        e.contains("invalid BindTimeoutSeconds, should not be a negative value"),
        "{e}"
    );
}

/// kube's binder_test TestCapacity (its scenario names): a 1Gi claim of a class whose CSI
/// driver tracks capacity needs a CSIStorageCapacity of that class reaching the node whose
/// maximumVolumeSize (else capacity) holds it; with the driver not opted in, every scenario
/// fits.
#[test]
fn capacity() {
    const CLASS: &str = "wait-with-provisioner";
    let vb = VolumeBinding::new(Default::default()).unwrap();
    let nodes = || vec![node("node1", json!({"topology.test/node": "node1"}))];
    let cap = |name: &str, class: &str, on: Option<&str>, capacity: &str, max: &str| {
        let mut c = json!({"kind": "CSIStorageCapacity", "apiVersion": "storage.k8s.io/v1",
        "metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": class,
        "nodeTopology": match on {
            Some(n) => json!({"matchLabels": {"topology.test/node": n}}),
            None => json!({}),
        }});
        if !capacity.is_empty() {
            c["capacity"] = capacity.into();
        }
        if !max.is_empty() {
            c["maximumVolumeSize"] = max.into();
        }
        c
    };
    let mut claim = pvc("provisioned-pvc", CLASS);
    claim["spec"]["resources"] = json!({"requests": {"storage": "1Gi"}});
    let scenarios: Vec<(&str, Vec<Value>, bool)> = vec![
        (
            "network-attached",
            vec![cap("net", CLASS, None, "1Gi", "")],
            true,
        ),
        (
            "local-storage",
            vec![cap("node1", CLASS, Some("node1"), "1Gi", "")],
            true,
        ),
        (
            "multiple",
            vec![
                cap("net", CLASS, None, "1Gi", ""),
                cap("node2", CLASS, Some("node2"), "1Gi", ""),
                cap("node1", CLASS, Some("node1"), "1Gi", ""),
            ],
            true,
        ),
        ("no-storage", vec![], false),
        (
            "wrong-node",
            vec![cap("net", CLASS, Some("node2"), "1Gi", "")],
            false,
        ),
        (
            "wrong-storage-class",
            vec![cap("net", WAIT, Some("node1"), "1Gi", "")],
            false,
        ),
        (
            "insufficient-storage",
            vec![cap("net", CLASS, Some("node1"), "1Mi", "")],
            false,
        ),
        (
            "insufficient-volume-size",
            vec![cap("net", CLASS, Some("node1"), "1Gi", "1Mi")],
            false,
        ),
        (
            "zero-storage",
            vec![cap("net", CLASS, Some("node1"), "0Mi", "")],
            false,
        ),
        (
            "zero-volume-size",
            vec![cap("net", CLASS, Some("node1"), "", "0Mi")],
            false,
        ),
        (
            "nil-storage",
            vec![cap("net", CLASS, Some("node1"), "", "")],
            false,
        ),
    ];
    for opt_in in [true, false] {
        for (name, caps, fits) in &scenarios {
            let mut objects = vec![
                class(CLASS, Some("WaitForFirstConsumer"), "test-provisioner"),
                class(WAIT, Some("WaitForFirstConsumer"), ""),
                json!({"kind": "CSIDriver", "metadata": {"name": "test-provisioner"},
                    "spec": {"storageCapacity": opt_in}}),
                claim.clone(),
            ];
            objects.extend(caps.iter().cloned());
            let c = cluster(nodes(), objects);
            let (pre, filters, _) = run(&vb, &c, pod_with_claims("test-pod", &["provisioned-pvc"]));
            assert!(pre.is_success(), "{name}: {pre:?}");
            let want = if *fits || !opt_in {
                Status::success()
            } else {
                status(
                    Code::UnschedulableAndUnresolvable,
                    &[binding::ERR_NOT_ENOUGH_SPACE],
                )
            };
            assert_eq!(filters, [want], "CSIDriver.StorageCapacity={opt_in}/{name}");
        }
    }
}
