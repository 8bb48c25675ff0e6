//! What the proxy knows of the pods and containers it has seen created, by sandbox and
//! container id, so that stop and update hooks have their pod's context. Checkpointed to
//! a file after every change (Koordinator rebuilds from the runtime instead and loses
//! cgroup parents, resources and envs on a restart; the file keeps them).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodInfo {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
    pub runtime_handler: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub cgroup_parent: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerInfo {
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub annotations: BTreeMap<String, String>,
    /// The container's CRI `LinuxContainerResources`, protobuf-encoded.
    pub resources: Vec<u8>,
    pub envs: BTreeMap<String, String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    pods: HashMap<String, PodInfo>,
    containers: HashMap<String, ContainerInfo>,
}

/// Writes a private file (0600) whole or not at all. No fsync: the file must outlive the
/// proxy process, which the page cache ensures; a machine that loses power loses its
/// containers too.
fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), crate::os::files::FileError> {
    use crate::os::files;
    files::write_atomic(path, bytes, 0o600, files::Sync::Cached)
}

pub struct Store {
    path: Option<PathBuf>,
    state: Mutex<State>,
}

impl Store {
    /// Opens the checkpoint at `path` (an unreadable one is reported and replaced).
    pub fn open(path: Option<PathBuf>) -> Store {
        let state = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| match serde_json::from_slice(&b) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "runtime proxy checkpoint unreadable; starting empty");
                    None
                }
            })
            .unwrap_or_default();
        Store {
            path,
            state: Mutex::new(state),
        }
    }

    fn change<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let out = f(&mut g);
        if let Some(path) = &self.path {
            let saved = serde_json::to_vec(&*g)
                .map_err(|e| e.to_string())
                .and_then(|b| write_atomic(path, &b).map_err(|e| e.to_string()));
            if let Err(e) = saved {
                tracing::warn!(path = %path.display(), error = %e, "writing the runtime proxy checkpoint failed");
            }
        }
        out
    }

    /// Records a pod; the checkpoint is rewritten only when something changed.
    pub fn put_pod(&self, id: &str, p: PodInfo) {
        if self.pod(id).as_ref() != Some(&p) {
            self.change(|s| s.pods.insert(id.into(), p));
        }
    }

    pub fn remove_pod(&self, id: &str) {
        self.change(|s| {
            s.pods.remove(id);
            s.containers.retain(|_, c| c.sandbox_id != id);
        });
    }

    pub fn pod(&self, id: &str) -> Option<PodInfo> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pods
            .get(id)
            .cloned()
    }

    pub fn put_container(&self, id: &str, c: ContainerInfo) {
        let same = {
            let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
            g.containers.get(id) == Some(&c)
        };
        if !same {
            self.change(|s| s.containers.insert(id.into(), c));
        }
    }

    pub fn remove_container(&self, id: &str) {
        self.change(|s| s.containers.remove(id));
    }

    /// A container and its pod.
    pub fn container(&self, id: &str) -> Option<(ContainerInfo, PodInfo)> {
        let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let c = g.containers.get(id)?.clone();
        let p = g.pods.get(&c.sandbox_id)?.clone();
        Some((c, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.json");
        let s = Store::open(Some(path.clone()));
        s.put_pod(
            "sb",
            PodInfo {
                name: "p".into(),
                cgroup_parent: "/kubepods/pod1".into(),
                ..Default::default()
            },
        );
        s.put_container(
            "c1",
            ContainerInfo {
                sandbox_id: "sb".into(),
                name: "c".into(),
                ..Default::default()
            },
        );
        let again = Store::open(Some(path));
        let (c, p) = again.container("c1").unwrap();
        assert_eq!(
            (c.name.as_str(), p.cgroup_parent.as_str()),
            ("c", "/kubepods/pod1")
        );
        again.remove_pod("sb");
        assert!(again.container("c1").is_none());
    }
}
