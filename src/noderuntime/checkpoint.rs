//! Pid files: which processes the runtime started, so a restarted koord re-adopts them
//! (or cleans them up) instead of leaving strays.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::os::files::{self, FileError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerCheckpoint {
    pub name: String,
    pub init: bool,
    pub id: String,
    pub dir: String,
    pub pid: i32,
    pub start_time: Option<u64>,
    pub restart_count: u32,
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCheckpoint {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub pod_dir: String,
    pub init_done: bool,
    pub containers: Vec<ContainerCheckpoint>,
}

fn file(dir: &Path, uid: &str) -> PathBuf {
    dir.join(format!("{uid}.json"))
}

/// Writes atomically (temp file + rename).
pub fn save(dir: &Path, cp: &PodCheckpoint) -> Result<(), FileError> {
    files::private_dir(dir)?;
    let bytes = serde_json::to_vec_pretty(cp)
        .map_err(|e| FileError::Io(dir.to_path_buf(), std::io::Error::other(e)))?;
    files::write_atomic(&file(dir, &cp.uid), &bytes, 0o600, files::Sync::Cached)
}

pub fn remove(dir: &Path, uid: &str) {
    let _ = std::fs::remove_file(file(dir, uid));
}

/// Every readable checkpoint; unreadable ones are reported and left for inspection.
pub fn load_all(dir: &Path) -> Vec<PodCheckpoint> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| match std::fs::read(&p).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string())) {
            Ok(cp) => Some(cp),
            Err(e) => {
                tracing::error!(file = %p.display(), error = %e, "unreadable node runtime checkpoint");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_remove() {
        let d = tempfile::tempdir().unwrap();
        let cp = PodCheckpoint {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            pod_dir: "kubepods/podu".into(),
            init_done: true,
            containers: vec![ContainerCheckpoint {
                name: "c".into(),
                init: false,
                id: "abc".into(),
                dir: "kubepods/podu/abc".into(),
                pid: 42,
                start_time: Some(7),
                restart_count: 1,
                started_at: "t".into(),
            }],
        };
        save(d.path(), &cp).unwrap();
        std::fs::write(d.path().join("junk.json"), "{").unwrap();
        assert_eq!(load_all(d.path()), vec![cp]);
        remove(d.path(), "u");
        assert!(load_all(d.path()).is_empty());
    }
}
