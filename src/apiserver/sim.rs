//! Simulated nodes for demos and scale tests (`--sim-nodes`): fake Nodes, and a tiny
//! simulator that marks pods bound to them Running and finishes their deletion, as KWOK
//! does.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::semantics::now;
use super::store::{Change, EventType, Filter, Skippable, Store, StoreError, Stored, WatchItem};

pub const SIM_LABEL: &str = "sim.koord.io/simulated";

#[derive(Debug, Clone)]
pub struct SimNodes {
    pub count: u32,
    pub cpu: String,
    pub memory: String,
    pub pods: u32,
}

pub fn node_name(i: u32) -> String {
    format!("sim-node-{i}")
}

fn node_object(name: &str, i: u32, s: &SimNodes) -> Value {
    let resources = json!({"cpu": s.cpu, "memory": s.memory, "pods": s.pods.to_string(), "ephemeral-storage": "100Gi"});
    let ts = now();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            SIM_LABEL: "true"}},
        "spec": {},
        "status": {
            "capacity": resources, "allocatable": resources, "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated node is ready", "lastHeartbeatTime": ts, "lastTransitionTime": ts}],
            "addresses": [{"type": "InternalIP", "address": format!("10.255.{}.{}", i / 250, i % 250 + 1)},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.33.0-koord-sim", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "sim://1", "kernelVersion": "", "osImage": "simulated",
                         "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""}
        }
    })
}

/// Registers the simulated nodes that do not exist yet.
pub fn register(
    store: &Store,
    registry: &super::registry::Registry,
    s: &SimNodes,
) -> Result<(), StoreError> {
    let key = (String::new(), "nodes".to_string());
    let info = registry.get("", "nodes");
    for i in 0..s.count {
        let name = node_name(i);
        if store.get(&key, "", &name).is_some() {
            continue;
        }
        let mut obj = node_object(&name, i, s);
        if let Some(info) = &info {
            let _ = super::semantics::prepare_create(info, &mut obj, store);
        }
        store.commit::<StoreError>(&key, "", &name, |_| Ok(Change::Put(obj)))?;
    }
    Ok(())
}

fn running_status(pod: &Value, node_ip: &str, pod_ip: &str) -> Value {
    let ts = now();
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts});
    let statuses: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": true, "started": true,
                        "restartCount": 0, "containerID": format!("sim://{}", c["name"].as_str().unwrap_or("")),
                        "state": {"running": {"startedAt": ts}}}))
        .collect();
    let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
    status["phase"] = "Running".into();
    status["hostIP"] = node_ip.into();
    status["podIP"] = pod_ip.into();
    status["podIPs"] = json!([{"ip": pod_ip}]);
    status["startTime"] = ts.clone().into();
    status["conditions"] = json!([
        cond("PodReadyToStartContainers"),
        cond("Initialized"),
        cond("Ready"),
        cond("ContainersReady"),
        cond("PodScheduled")
    ]);
    status["containerStatuses"] = Value::Array(statuses);
    status
}

/// Whether the pod has a deletionTimestamp, read without building the pod's `Value` tree
/// (the simulator sees every pod event).
fn being_deleted(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "deletionTimestamp")]
        deletion: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct Head {
        metadata: Option<Meta>,
    }
    serde_json::from_slice::<Head>(bytes)
        .ok()
        .and_then(|h| h.metadata?.deletion)
        .is_some()
}

/// What the simulator does for one pod event.
fn react(store: &Store, sim: &HashSet<String>, obj: &Arc<Stored>, counter: &mut u64) {
    let node = obj.field("spec.nodeName");
    if node.is_empty() || !sim.contains(node) {
        return;
    }
    let key = (String::new(), "pods".to_string());
    let result = if being_deleted(&obj.bytes) {
        store.commit(&key, &obj.namespace, &obj.name, |cur| {
            if cur.is_some_and(|c| c.uid == obj.uid) {
                Ok(Change::Delete)
            } else {
                Err(Skippable::Skip)
            }
        })
    } else if obj.field("status.phase") == "Pending" {
        *counter += 1;
        let pod_ip = format!(
            "10.{}.{}.{}",
            100 + (*counter >> 16) % 100,
            (*counter >> 8) % 256,
            *counter % 256
        );
        let idx: u32 = node.trim_start_matches("sim-node-").parse().unwrap_or(0);
        let node_ip = format!("10.255.{}.{}", idx / 250, idx % 250 + 1);
        store.commit(&key, &obj.namespace, &obj.name, |cur| {
            let Some(cur) =
                cur.filter(|c| c.uid == obj.uid && c.field("status.phase") == "Pending")
            else {
                return Err(Skippable::Skip);
            };
            let mut v = cur.value();
            v["status"] = running_status(&v, &node_ip, &pod_ip);
            Ok(Change::Put(v))
        })
    } else {
        return;
    };
    if let Err(Skippable::Store(e)) = result {
        tracing::warn!(pod = %obj.name, error = %e, "simulator write failed");
    }
}

/// Runs the simulator until `stop`.
pub async fn run(store: Arc<Store>, nodes: HashSet<String>, stop: CancellationToken) {
    let key = (String::new(), "pods".to_string());
    let mut counter = 0u64;
    loop {
        let Ok(start) = store.watch(&key, None, Filter::default(), false) else {
            return;
        };
        for (_, obj) in &start.initial {
            react(&store, &nodes, obj, &mut counter);
        }
        let mut rx = start.rx;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                item = rx.recv() => match item {
                    Some(WatchItem::Event(EventType::Deleted, _)) | Some(WatchItem::Bookmark(_)) => {}
                    Some(WatchItem::Event(_, obj)) => react(&store, &nodes, &obj, &mut counter),
                    None => break,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pod_being_deleted_is_told_apart_without_decoding_it() {
        let del =
            br#"{"metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{}}"#;
        assert!(super::being_deleted(del));
        for live in [
            &br#"{"metadata":{"name":"p"},"spec":{"x":{"deletionTimestamp":1}}}"#[..],
            br#"{"metadata":{"name":"p","deletionTimestamp":null}}"#,
            br#"not json"#,
        ] {
            assert!(!super::being_deleted(live));
        }
    }
}
