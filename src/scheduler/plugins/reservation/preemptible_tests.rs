//! What preemption frees inside a reservation goes back to that reservation (Koordinator's
//! `preemptibleInRRs` in Reservation's and DeviceShare's AddPod/RemovePod): evicting an owner
//! makes room for another owner of the same reservation, never for a pod outside it. koord
//! derives a reservation's holding from the pods on the node, so the preemption dry-run's
//! removal of a victim gives its share back to its reservation by construction; these cases
//! hold it to that, for CPUs (Reservation) and GPUs (DeviceShare).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::scheduler::cycle::Outcome;
use crate::scheduler::framework::ClusterState;
use crate::scheduler::framework::runtime::{Framework, Scope};
use crate::scheduler::test_util::{cluster, node_json, pod};

const GPU: &str = "koordinator.sh/gpu-memory-ratio";

fn framework() -> Framework {
    let cfg = crate::scheduler::config::default_config().unwrap();
    crate::scheduler::config::framework(&cfg.profiles[0]).unwrap()
}

/// A pod on n1 at `priority`; `owner`: placed into r1 (its `reservation-allocated`).
fn running(name: &str, priority: i32, requests: Value, owner: bool) -> Value {
    let mut ann = json!({});
    if owner {
        ann["scheduling.koordinator.sh/reservation-allocated"] =
            r#"{"name":"r1","uid":"u-r1"}"#.into();
    }
    if let Some(ratio) = requests.get(GPU) {
        let minor = json!({"minor": 0, "resources": {GPU: ratio, "koordinator.sh/gpu-core": ratio,
            "koordinator.sh/gpu-memory": "8Gi"}});
        ann["scheduling.koordinator.sh/device-allocated"] =
            json!({"gpu": [minor]}).to_string().into();
    }
    let app = if owner { "web" } else { "other" };
    json!({"metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": app},
            "annotations": ann},
        "spec": {"nodeName": "n1", "priority": priority, "containers": [{"name": "c",
            "resources": {"requests": requests, "limits": requests}}]}, "status": {"phase": "Running"}})
}

/// n1: 8 CPUs and one GPU. r1 (Available on n1) reserves 4 CPUs (and the whole GPU when
/// `gpu`); its owner `low` (priority 10) uses all of it; `keep` (priority 1000) the rest.
fn node(gpu: bool) -> ClusterState {
    let mut n = node_json("n1", "8", "32Gi");
    let mut reserved = json!({"cpu": "4"});
    let mut used = json!({"cpu": "4"});
    if gpu {
        for (k, v) in [
            (GPU, "100"),
            ("koordinator.sh/gpu-core", "100"),
            ("koordinator.sh/gpu-memory", "8Gi"),
        ] {
            n["status"]["allocatable"][k] = v.into();
        }
        reserved[GPU] = "100".into();
        used[GPU] = "100".into();
    }
    let mut c = cluster(vec![n]);
    if gpu {
        let d = json!({"metadata": {"name": "n1"}, "spec": {"devices": [{"type": "gpu", "minor": 0,
            "id": "GPU-0", "health": true, "resources": {GPU: "100", "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory": "8Gi"}}]}});
        c.upsert_device(&serde_json::from_value(d).unwrap());
    }
    let mut r = json!({"metadata": {"name": "r1", "uid": "u-r1"},
        "spec": {"allocateOnce": false, "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": reserved}}]}}},
        "status": {"phase": "Available", "nodeName": "n1", "allocatable": reserved}});
    if gpu {
        let held = json!({"gpu": [{"minor": 0, "resources": {GPU: "100", "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "8Gi"}}]});
        r["metadata"]["annotations"] =
            json!({"scheduling.koordinator.sh/device-allocated": held.to_string()});
    }
    c.upsert_reservation(Arc::new(serde_json::from_value(r).unwrap()));
    for p in [
        running("low", 10, used, true),
        running("keep", 1000, json!({"cpu": "4"}), false),
    ] {
        c.upsert_pod(Arc::new(serde_json::from_value(p).unwrap()));
    }
    c
}

/// The victims a priority-500 pod asking `requests` would evict (`app`: web is r1's owner).
fn victims(c: &mut ClusterState, app: &str, requests: Value) -> Option<Vec<String>> {
    let p = pod(
        json!({"metadata": {"name": "high", "namespace": "default", "uid": "high",
            "labels": {"app": app}},
        "spec": {"schedulerName": "koord-scheduler", "priority": 500, "containers": [{"name": "c",
            "resources": {"requests": requests, "limits": requests}}]}}),
    );
    let Outcome::Unschedulable { nomination, .. } =
        crate::scheduler::cycle::run(&framework(), &p, c, Scope::Everything).outcome
    else {
        panic!("n1 is full")
    };
    nomination.map(|n| n.victims.iter().map(|v| v.name.clone()).collect())
}

#[test]
fn an_owner_preempts_an_owner_inside_its_reservation() {
    let got = victims(&mut node(false), "web", json!({"cpu": "4"}));
    assert_eq!(got, Some(vec!["low".to_string()]));
}

#[test]
fn what_an_owner_frees_is_not_for_pods_outside_its_reservation() {
    assert_eq!(
        victims(&mut node(false), "other", json!({"cpu": "4"})),
        None
    );
}

#[test]
fn a_reserved_gpu_freed_by_preemption_goes_to_the_reservations_owners_only() {
    let whole = json!({"cpu": "1", GPU: "100"});
    let got = victims(&mut node(true), "web", whole.clone());
    assert_eq!(got, Some(vec!["low".to_string()]));
    assert_eq!(victims(&mut node(true), "other", whole), None);
}
