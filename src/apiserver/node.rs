//! In `--embedded` mode the machine itself is a Node, named after the host, with its real
//! CPU and memory.

use serde_json::{Value, json};

use super::registry::Registry;
use super::semantics::{now, prepare_create};
use super::store::{Change, Store, StoreError};

#[derive(Debug, Clone)]
pub struct LocalNode {
    pub name: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    /// Port of the local node runtime's read-only kubelet API, when it runs.
    pub kubelet_port: Option<u16>,
}

/// `MemTotal` from a `/proc/meminfo` text, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

impl LocalNode {
    /// Reads this machine's CPU count and memory.
    pub fn detect(name: &str) -> LocalNode {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let memory_bytes = crate::os::knob::read_opt(std::path::Path::new("/proc/meminfo"))
            .as_deref()
            .and_then(mem_total)
            .unwrap_or(0);
        LocalNode {
            name: name.to_string(),
            cpus,
            memory_bytes,
            kubelet_port: None,
        }
    }

    fn resources(&self) -> Value {
        json!({"cpu": self.cpus.to_string(), "memory": self.memory_bytes.to_string(), "pods": "110", "ephemeral-storage": "100Gi"})
    }
}

/// Creates the Node or refreshes its capacity and readiness, keeping every other
/// allocatable entry (koord's batch/mid resources) as it is.
pub fn register(store: &Store, registry: &Registry, node: &LocalNode) -> Result<(), StoreError> {
    let key = (String::new(), "nodes".to_string());
    let ts = now();
    let ready = json!([{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "koord embedded node runtime is ready", "lastHeartbeatTime": ts, "lastTransitionTime": ts}]);
    let port = node.kubelet_port.unwrap_or(10250);
    let mut fresh = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name,
            "kubernetes.io/os": std::env::consts::OS, "kubernetes.io/arch": "amd64"}},
        "spec": {},
        "status": {
            "capacity": node.resources(), "allocatable": node.resources(), "phase": "Running", "conditions": ready,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {"kubeletVersion": "v1.33.0-koord", "operatingSystem": std::env::consts::OS,
                "architecture": std::env::consts::ARCH, "containerRuntimeVersion": "koord-process://1",
                "kernelVersion": "", "osImage": "", "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""}
        }
    });
    match store.get(&key, "", &node.name) {
        None => {
            if let Some(info) = registry.get("", "nodes") {
                let _ = prepare_create(&info, &mut fresh, store);
            }
            store.commit::<StoreError>(&key, "", &node.name, |_| Ok(Change::Put(fresh)))?;
        }
        Some(existing) => {
            let mut v = existing.value();
            for field in ["capacity", "allocatable"] {
                for (k, q) in node.resources().as_object().into_iter().flatten() {
                    v["status"][field][k] = q.clone();
                }
            }
            v["status"]["conditions"] = fresh["status"]["conditions"].clone();
            v["status"]["addresses"] = fresh["status"]["addresses"].clone();
            v["status"]["daemonEndpoints"] = fresh["status"]["daemonEndpoints"].clone();
            store.commit::<StoreError>(&key, "", &node.name, |_| Ok(Change::Put(v)))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mem_total() {
        assert_eq!(
            mem_total("MemTotal:       16384 kB\nMemFree: 1 kB\n"),
            Some(16384 * 1024)
        );
        assert_eq!(mem_total("nothing"), None);
    }
}
