//! The test's API server access: kinds, creating objects as a user writes them, the
//! snapshot explain reads and what the live scheduler did.

use std::time::Duration;

use koord::explain::Snapshot;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PostParams};
use serde_json::{Value, json};

const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Node", "nodes", false),
    ("", "v1", "Pod", "pods", true),
    (
        "slo.koordinator.sh",
        "v1alpha1",
        "NodeMetric",
        "nodemetrics",
        false,
    ),
    (
        "topology.node.k8s.io",
        "v1alpha1",
        "NodeResourceTopology",
        "noderesourcetopologies",
        false,
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Reservation",
        "reservations",
        false,
    ),
    (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "PodGroup",
        "podgroups",
        true,
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Device",
        "devices",
        false,
    ),
    (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "ElasticQuota",
        "elasticquotas",
        true,
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "ClusterNetworkTopology",
        "clusternetworktopologies",
        false,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    ("", "v1", "ConfigMap", "configmaps", true),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    ),
    ("storage.k8s.io", "v1", "CSIDriver", "csidrivers", false),
    (
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        "csistoragecapacities",
        true,
    ),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    ("", "v1", "PersistentVolume", "persistentvolumes", false),
];

pub fn api(c: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let (g, v, k, plural, namespaced) = *KINDS.iter().find(|x| x.2 == kind).unwrap();
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural);
    if namespaced {
        Api::namespaced_with(c.clone(), "default", &ar)
    } else {
        Api::all_with(c.clone(), &ar)
    }
}

/// `v` with the apiVersion of its kind, as a user writes it.
pub fn versioned(mut v: Value) -> Value {
    let kind = v["kind"].as_str().unwrap().to_string();
    let (g, ver, ..) = *KINDS.iter().find(|x| x.2 == kind).unwrap();
    v["apiVersion"] = if g.is_empty() {
        ver.to_string()
    } else {
        format!("{g}/{ver}")
    }
    .into();
    v
}

pub async fn create(c: &kube::Client, v: Value) {
    let mut v = versioned(v);
    let kind = v["kind"].as_str().unwrap().to_string();
    let status = v.as_object_mut().unwrap().remove("status");
    let name = v["metadata"]["name"].as_str().unwrap().to_string();
    let obj: DynamicObject = serde_json::from_value(v).unwrap();
    let a = api(c, &kind);
    a.create(&PostParams::default(), &obj).await.unwrap();
    if let Some(s) = status {
        let body = json!({ "status": s });
        a.patch_status(&name, &Default::default(), &Patch::Merge(body))
            .await
            .unwrap();
    }
}

/// Every object the scheduler reads, as `kubectl get -o json` prints it.
pub async fn snapshot(c: &kube::Client, extra: &[Value]) -> Snapshot {
    let mut items = Vec::new();
    for (_, _, kind, ..) in KINDS {
        let list = api(c, kind).list(&ListParams::default()).await.unwrap();
        items.extend(
            list.items
                .into_iter()
                .map(|o| serde_json::to_value(o).unwrap()),
        );
    }
    items.extend(extra.iter().cloned().map(versioned));
    let mut snap = Snapshot::default();
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    snap.add_text("snapshot", &text).unwrap();
    snap
}

/// Where the live scheduler put what `v` names: Some(node), or None once it said
/// unschedulable; a short `patience` (polls of 25 ms) ends in None, a long one in a panic.
pub async fn live_result(c: &kube::Client, v: &Value, patience: usize) -> Option<String> {
    let kind = v["kind"].as_str().unwrap();
    let name = v["metadata"]["name"].as_str().unwrap();
    for _ in 0..patience {
        let o = api(c, kind).get(name).await.unwrap();
        let o = serde_json::to_value(o).unwrap();
        let node = match kind {
            "Pod" => o.pointer("/spec/nodeName"),
            _ => o.pointer("/status/nodeName"),
        };
        if let Some(n) = node.and_then(Value::as_str) {
            return Some(n.to_string());
        }
        let conditions = o.pointer("/status/conditions").and_then(Value::as_array);
        let refused = conditions.into_iter().flatten().any(|c| {
            c["reason"] == "Unschedulable"
                && (c["type"] == "PodScheduled" || c["type"] == "Scheduled")
        });
        if refused {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if patience < 200 {
        return None;
    }
    let o = api(c, kind).get(name).await.unwrap();
    panic!("{kind} {name}: the live scheduler neither placed nor refused it in 5 s: {o:?}");
}

/// An unplaced object leaves, so retries and pods held at Permit do not make later
/// snapshots differ from what the live scheduler counts.
pub async fn leave(c: &kube::Client, o: &Value) {
    let name = o["metadata"]["name"].as_str().unwrap();
    let kind = o["kind"].as_str().unwrap();
    let _ = api(c, kind).delete(name, &NOW).await;
}

const NOW: kube::api::DeleteParams = kube::api::DeleteParams {
    dry_run: false,
    grace_period_seconds: Some(0),
    propagation_policy: None,
    preconditions: None,
};

/// What a node's kubelet and a CSI external-provisioner do for the test: terminating pods
/// are finished, and a claim the scheduler selected a node for gets a PV there.
pub fn stand_ins(c: &kube::Client) -> tokio::task::JoinHandle<()> {
    let (pods, claims) = (api(c, "Pod"), api(c, "PersistentVolumeClaim"));
    let pvs = api(c, "PersistentVolume");
    tokio::spawn(async move {
        loop {
            for p in pods
                .list(&ListParams::default())
                .await
                .into_iter()
                .flat_map(|l| l.items)
            {
                if p.metadata.deletion_timestamp.is_some() {
                    let _ = pods
                        .delete(p.metadata.name.as_deref().unwrap_or_default(), &NOW)
                        .await;
                }
            }
            for pvc in claims
                .list(&ListParams::default())
                .await
                .into_iter()
                .flat_map(|l| l.items)
            {
                let pvc = serde_json::to_value(pvc).unwrap();
                let selected =
                    pvc.pointer("/metadata/annotations/volume.kubernetes.io~1selected-node");
                if let (Some(node), None) = (
                    selected.and_then(Value::as_str),
                    pvc.pointer("/spec/volumeName"),
                ) {
                    let (name, uid) = (&pvc["metadata"]["name"], &pvc["metadata"]["uid"]);
                    let pv = super::extra::provisioned(
                        name.as_str().unwrap(),
                        uid.as_str().unwrap(),
                        node,
                    );
                    let pv: DynamicObject = serde_json::from_value(pv).unwrap();
                    let _ = pvs.create(&PostParams::default(), &pv).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Whether the pod `default/<name>` left the API within 5 s.
pub async fn gone(c: &kube::Client, key: &str) -> bool {
    let name = key.trim_start_matches("default/");
    for _ in 0..200 {
        if api(c, "Pod").get_opt(name).await.unwrap().is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// The node `v` lands on within 5 s, whatever its conditions say meanwhile.
pub async fn placed_eventually(c: &kube::Client, v: &Value) -> Option<String> {
    let (kind, name) = (
        v["kind"].as_str().unwrap(),
        v["metadata"]["name"].as_str().unwrap(),
    );
    for _ in 0..200 {
        let o = serde_json::to_value(api(c, kind).get(name).await.unwrap()).unwrap();
        let node = match kind {
            "Pod" => o.pointer("/spec/nodeName"),
            _ => o.pointer("/status/nodeName"),
        };
        if let Some(n) = node.and_then(Value::as_str) {
            return Some(n.to_string());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}

/// The devices the live scheduler wrote on the pod (`device-allocated`).
pub async fn devices_allocated(c: &kube::Client, name: &str) -> Option<Value> {
    let o = serde_json::to_value(api(c, "Pod").get(name).await.unwrap()).unwrap();
    let raw = o.pointer("/metadata/annotations/scheduling.koordinator.sh~1device-allocated")?;
    serde_json::from_str(raw.as_str()?).ok()
}
