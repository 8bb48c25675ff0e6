//! kube-scheduler's VolumeZone, NodeVolumeLimits (CSI) and VolumeRestrictions tables
//! (volume_zone_test.go, csi_test.go, volume_restrictions_test.go), their case names and
//! wording.

use serde_json::{Value, json};

use super::limits::NodeVolumeLimits;
use super::restrictions::VolumeRestrictions;
use super::tests::{WAIT, bound_pvc, class, cluster, node, pod_with_claims, pvc, run, status};
use super::zone::VolumeZone;
use crate::scheduler::framework::{Code, CycleState, Plugin, Status};
use crate::scheduler::test_util::pod;

fn zone_pv(name: &str, labels: Value) -> Value {
    json!({"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels}})
}

fn zone_pvc(name: &str, pv: &str) -> Value {
    json!({"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"}, "spec": {"volumeName": pv}})
}

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn zone_case(objects: &[Value], claim: Option<&str>, labels: Value) -> (Status, Status) {
    let c = cluster(vec![node("host1", labels)], objects.to_vec());
    let claims: Vec<&str> = claim.into_iter().collect();
    let pd = pod(pod_with_claims("pod_1", &claims));
    let mut state = CycleState::default();
    let (pre, _) = VolumeZone.pre_filter(&mut state, &pd, &c);
    let filter = VolumeZone.filter(&state, &pd, &c.nodes[0], &c);
    (pre, filter)
}

#[test]
fn volume_zone_single_zone() {
    let objects = vec![
        zone_pv("Vol_1", json!({BETA_ZONE: "us-west1-a"})),
        zone_pv(
            "Vol_2",
            json!({BETA_REGION: "us-west1", "uselessLabel": "none"}),
        ),
        zone_pv("Vol_Stable_1", json!({ZONE: "us-west1-a"})),
        zone_pv(
            "Vol_Stable_2",
            json!({REGION: "us-west1", "uselessLabel": "none"}),
        ),
        zone_pv(
            "Vol_Stable_3",
            json!({ZONE: "us-west1-a", REGION: "us-west1-a"}),
        ),
        zone_pvc("PVC_1", "Vol_1"),
        zone_pvc("PVC_2", "Vol_2"),
        zone_pvc("PVC_Stable_1", "Vol_Stable_1"),
        zone_pvc("PVC_Stable_2", "Vol_Stable_2"),
        zone_pvc("PVC_Stable_3", "Vol_Stable_3"),
    ];
    let conflict = status(
        Code::UnschedulableAndUnresolvable,
        &[super::zone::ERR_CONFLICT],
    );
    let ok = Status::success();
    let cases: Vec<(&str, Option<&str>, Value, Status, Status)> = vec![
        (
            "pod without volume",
            None,
            json!({BETA_ZONE: "us-west1-a"}),
            Status::skip(),
            ok.clone(),
        ),
        (
            "node without labels",
            Some("PVC_1"),
            json!({}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "beta zone label matched",
            Some("PVC_1"),
            json!({BETA_ZONE: "us-west1-a", "uselessLabel": "none"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "beta region label matched",
            Some("PVC_2"),
            json!({BETA_REGION: "us-west1", "uselessLabel": "none"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "beta region label doesn't match",
            Some("PVC_2"),
            json!({BETA_REGION: "no_us-west1", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "beta zone label doesn't match",
            Some("PVC_1"),
            json!({BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "zone label matched",
            Some("PVC_Stable_1"),
            json!({ZONE: "us-west1-a", "uselessLabel": "none"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "region label matched",
            Some("PVC_Stable_2"),
            json!({REGION: "us-west1", "uselessLabel": "none"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "region label doesn't match",
            Some("PVC_Stable_2"),
            json!({REGION: "no_us-west1", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "zone label doesn't match",
            Some("PVC_Stable_1"),
            json!({ZONE: "no_us-west1-a", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "pv with zone and region, node with only zone",
            Some("PVC_Stable_3"),
            json!({ZONE: "us-west1-a"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "pv with zone,node with beta zone",
            Some("PVC_Stable_1"),
            json!({BETA_ZONE: "us-west1-a"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "pv with beta label,node with ga label, matched",
            Some("PVC_1"),
            json!({ZONE: "us-west1-a"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "pv with beta label,node with ga label, don't match",
            Some("PVC_1"),
            json!({ZONE: "us-west1-b"}),
            ok.clone(),
            conflict.clone(),
        ),
    ];
    for (name, claim, labels, want_pre, want_filter) in cases {
        let (pre, filter) = zone_case(&objects, claim, labels);
        assert_eq!(pre, want_pre, "{name}: PreFilter");
        assert_eq!(filter, want_filter, "{name}: Filter");
    }
}

#[test]
fn volume_zone_multi_zone_and_binding_modes() {
    let objects = vec![
        zone_pv("Vol_1", json!({BETA_ZONE: "us-west1-a"})),
        zone_pv("Vol_3", json!({BETA_ZONE: "us-west1-c__us-west1-a"})),
        zone_pv("Vol_Stable_1", json!({ZONE: "us-west1-a"})),
        zone_pv("Vol_Stable_2", json!({ZONE: "us-west1-c__us-west1-a"})),
        zone_pvc("PVC_1", "Vol_1"),
        zone_pvc("PVC_3", "Vol_3"),
        zone_pvc("PVC_Stable_1", "Vol_Stable_1"),
        zone_pvc("PVC_Stable_2", "Vol_Stable_2"),
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "PVC_NoSC", "namespace": "default"}, "spec": {"storageClassName": "Class_0"}}),
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "PVC_EmptySC", "namespace": "default"}}),
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "PVC_WaitSC", "namespace": "default"}, "spec": {"storageClassName": "Class_Wait"}}),
        json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "PVC_ImmediateSC", "namespace": "default"}, "spec": {"storageClassName": "Class_Immediate"}}),
        json!({"kind": "StorageClass", "metadata": {"name": "Class_Immediate"}, "provisioner": ""}),
        class("Class_Wait", Some("WaitForFirstConsumer"), ""),
    ];
    let conflict = status(
        Code::UnschedulableAndUnresolvable,
        &[super::zone::ERR_CONFLICT],
    );
    let un = |r: &str| status(Code::UnschedulableAndUnresolvable, &[r]);
    let ok = Status::success();
    let west = json!({BETA_ZONE: "us-west1-a", "uselessLabel": "none"});
    let cases: Vec<(&str, &str, Value, Status, Status)> = vec![
        (
            "node without labels",
            "PVC_3",
            json!({}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "beta zone label matched",
            "PVC_3",
            west.clone(),
            ok.clone(),
            ok.clone(),
        ),
        (
            "beta zone label doesn't match",
            "PVC_1",
            json!({BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "zone label matched",
            "PVC_Stable_2",
            json!({ZONE: "us-west1-a", "uselessLabel": "none"}),
            ok.clone(),
            ok.clone(),
        ),
        (
            "zone label doesn't match",
            "PVC_Stable_1",
            json!({ZONE: "us-west1-b", "uselessLabel": "none"}),
            ok.clone(),
            conflict.clone(),
        ),
        (
            "label zone failure domain matched",
            "PVC_1",
            west.clone(),
            ok.clone(),
            ok.clone(),
        ),
        (
            "unbound volume empty storage class",
            "PVC_EmptySC",
            west.clone(),
            un("PersistentVolumeClaim had no pv name and storageClass name"),
            ok.clone(),
        ),
        // Go's fake lister says "storageclasses…"; the informer lister kube-scheduler runs
        // with (and koord) says the singular.
        (
            "unbound volume no storage class",
            "PVC_NoSC",
            west.clone(),
            un(r#"storageclass.storage.k8s.io "Class_0" not found"#),
            ok.clone(),
        ),
        (
            "unbound volume immediate binding mode",
            "PVC_ImmediateSC",
            west.clone(),
            un(r#"VolumeBindingMode not set for StorageClass "Class_Immediate""#),
            ok.clone(),
        ),
        (
            "unbound volume wait binding mode",
            "PVC_WaitSC",
            west.clone(),
            Status::skip(),
            ok.clone(),
        ),
    ];
    for (name, claim, labels, want_pre, want_filter) in cases {
        let (pre, filter) = zone_case(&objects, Some(claim), labels);
        assert_eq!(pre, want_pre, "{name}: PreFilter");
        assert_eq!(filter, want_filter, "{name}: Filter");
    }
}

fn csi_pv(name: &str, driver: &str) -> Value {
    json!({"kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"csi": {"driver": driver, "volumeHandle": format!("handle-{name}")}}})
}

fn csi_node(limit: i32) -> Value {
    json!({"kind": "CSINode", "metadata": {"name": "node-1"},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "node-1", "allocatable": {"count": limit}}]}})
}

fn placed(name: &str, claims: &[&str]) -> Value {
    let mut p = pod_with_claims(name, claims);
    p["kind"] = "Pod".into();
    p["spec"]["nodeName"] = "node-1".into();
    p
}

#[test]
fn node_volume_limits_count_unique_csi_volumes_per_driver() {
    let mut objects = vec![
        csi_pv("pv-1", "ebs.csi.aws.com"),
        csi_pv("pv-2", "ebs.csi.aws.com"),
        csi_pv("pv-3", "ebs.csi.aws.com"),
        bound_pvc("csi-ebs.csi.aws.com-1", "", "pv-1"),
        bound_pvc("csi-ebs.csi.aws.com-2", "", "pv-2"),
        bound_pvc("csi-ebs.csi.aws.com-3", "", "pv-3"),
        pvc("csi-ebs.csi.aws.com-unbound", "csi-sc"),
        class("csi-sc", Some("WaitForFirstConsumer"), "ebs.csi.aws.com"),
        placed(
            "existing",
            &["csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2"],
        ),
    ];
    let over = status(Code::Unschedulable, &[super::limits::ERR_MAX_VOLUME_COUNT]);
    let ok = Status::success();
    // (name, limit, new pod's claims, want)
    let cases: Vec<(&str, Option<i32>, Vec<&str>, Status)> = vec![
        (
            "fits when node volume limit >= new pods CSI volume",
            Some(4),
            vec!["csi-ebs.csi.aws.com-3"],
            ok.clone(),
        ),
        (
            "doesn't when node volume limit <= pods CSI volume",
            Some(2),
            vec!["csi-ebs.csi.aws.com-3"],
            over.clone(),
        ),
        (
            "should count pending PVCs",
            Some(2),
            vec!["csi-ebs.csi.aws.com-unbound"],
            over.clone(),
        ),
        (
            "skip Filter when the pod only uses volumes the node has",
            Some(2),
            vec!["csi-ebs.csi.aws.com-1"],
            ok.clone(),
        ),
        (
            "no CSINode: no limit",
            None,
            vec!["csi-ebs.csi.aws.com-3"],
            ok.clone(),
        ),
    ];
    for (name, limit, claims, want) in cases {
        let mut objs = objects.clone();
        objs.extend(limit.map(csi_node));
        let c = cluster(vec![node("node-1", json!({}))], objs);
        let (pre, filters, _) = run(&NodeVolumeLimits, &c, pod_with_claims("new", &claims));
        assert!(pre.is_success(), "{name}: PreFilter {pre:?}");
        assert_eq!(filters[0], want, "{name}");
    }
    objects.push(csi_node(4));
    let c = cluster(vec![node("node-1", json!({}))], objects);
    let (pre, _, _) = run(&NodeVolumeLimits, &c, pod_with_claims("none", &[]));
    assert_eq!(pre, Status::skip(), "a pod without claims skips Filter");
}

#[test]
fn volume_restrictions_disk_conflicts() {
    let gce = |pd: &str, ro: bool| json!({"name": "v", "gcePersistentDisk": {"pdName": pd, "readOnly": ro}});
    let ebs = |id: &str| json!({"name": "v", "awsElasticBlockStore": {"volumeID": id}});
    let rbd = |mons: &[&str], image: &str| json!({"name": "v", "rbd": {"monitors": mons, "image": image, "pool": "foo"}});
    let iscsi = |iqn: &str| json!({"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0}});
    let with = |name: &str, vols: Vec<Value>, bound: bool| {
        let mut p = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c"}], "volumes": vols}});
        if bound {
            p["spec"]["nodeName"] = "node-1".into();
        }
        p
    };
    let conflict = status(
        Code::Unschedulable,
        &[super::restrictions::ERR_DISK_CONFLICT],
    );
    let ok = Status::success();
    let cases: Vec<(&str, Value, Value, Status)> = vec![
        (
            "same GCE disk",
            gce("foo", false),
            gce("foo", false),
            conflict.clone(),
        ),
        (
            "different GCE disk",
            gce("foo", false),
            gce("bar", false),
            ok.clone(),
        ),
        (
            "same GCE disk, both read-only",
            gce("foo", true),
            gce("foo", true),
            ok.clone(),
        ),
        (
            "same AWS EBS volume",
            ebs("foo"),
            ebs("foo"),
            conflict.clone(),
        ),
        (
            "different AWS EBS volume",
            ebs("foo"),
            ebs("bar"),
            ok.clone(),
        ),
        (
            "same RBD image, overlapping monitors",
            rbd(&["a", "b"], "bar"),
            rbd(&["b", "c"], "bar"),
            conflict.clone(),
        ),
        (
            "same RBD image, disjoint monitors",
            rbd(&["a"], "bar"),
            rbd(&["c"], "bar"),
            ok.clone(),
        ),
        (
            "same iSCSI target",
            iscsi("iqn.2016-12.server:storage.target01"),
            iscsi("iqn.2016-12.server:storage.target01"),
            conflict.clone(),
        ),
        (
            "different iSCSI target",
            iscsi("iqn.2016-12.server:storage.target01"),
            iscsi("iqn.2017-12.server:storage.target01"),
            ok.clone(),
        ),
    ];
    for (name, existing, new, want) in cases {
        let c = cluster(
            vec![node("node-1", json!({}))],
            vec![with("old", vec![existing], true)],
        );
        let (pre, filters, _) = run(&VolumeRestrictions, &c, with("new", vec![new], false));
        assert!(pre.is_success(), "{name}: PreFilter {pre:?}");
        assert_eq!(filters[0], want, "{name}");
    }
}

#[test]
fn volume_restrictions_read_write_once_pod() {
    let rwop = |name: &str| {
        let mut c = pvc(name, WAIT);
        c["spec"]["accessModes"] = json!(["ReadWriteOncePod"]);
        c
    };
    let c = cluster(
        vec![node("node-1", json!({}))],
        vec![
            rwop("claim-in-use"),
            rwop("claim-free"),
            placed("user", &["claim-in-use"]),
        ],
    );
    let (pre, filters, _) = run(
        &VolumeRestrictions,
        &c,
        pod_with_claims("new", &["claim-in-use"]),
    );
    assert!(pre.is_success());
    assert_eq!(
        filters[0],
        status(
            Code::Unschedulable,
            &[super::restrictions::ERR_RWOP_CONFLICT]
        )
    );
    let (pre, _, _) = run(
        &VolumeRestrictions,
        &c,
        pod_with_claims("new", &["claim-free"]),
    );
    assert_eq!(
        pre,
        Status::skip(),
        "an unused ReadWriteOncePod claim has nothing to check"
    );
    let (pre, _, _) = run(
        &VolumeRestrictions,
        &c,
        pod_with_claims("new", &["missing"]),
    );
    assert_eq!(
        pre,
        status(
            Code::UnschedulableAndUnresolvable,
            &[r#"persistentvolumeclaim "missing" not found"#]
        )
    );
}
