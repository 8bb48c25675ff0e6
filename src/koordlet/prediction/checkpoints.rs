//! Where trained models are kept between runs: in the metric store (koord's own layout),
//! or one file per model in a directory (`koordlet.prediction.checkpointDir`, the chart's
//! `/prediction-checkpoints` hostPath, which outlives the pod).

use std::path::{Path, PathBuf};

use super::super::store::{MetricStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("prediction checkpoint {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("prediction checkpoints: {0}")]
    File(#[from] crate::os::files::FileError),
}

/// A key → bytes map of model checkpoints.
pub trait Checkpoints: Send + Sync {
    fn keys(&self) -> Vec<String>;
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CheckpointError>;
    fn put(&self, key: &str, value: &[u8]) -> Result<(), CheckpointError>;
    fn remove(&self, key: &str) -> Result<(), CheckpointError>;
}

const PREFIX: &str = "prediction/";

impl Checkpoints for MetricStore {
    fn keys(&self) -> Vec<String> {
        self.kv_keys(PREFIX)
            .into_iter()
            .map(|k| k.trim_start_matches(PREFIX).to_string())
            .collect()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CheckpointError> {
        Ok(self.kv_get(&format!("{PREFIX}{key}"))?)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), CheckpointError> {
        Ok(self.kv_put(&format!("{PREFIX}{key}"), value)?)
    }

    fn remove(&self, key: &str) -> Result<(), CheckpointError> {
        Ok(self.kv_remove(&format!("{PREFIX}{key}"))?)
    }
}

/// One private file per model, `<key, escaped>.json`, replaced atomically.
pub struct CheckpointDir {
    dir: PathBuf,
}

impl CheckpointDir {
    /// The directory, made private (0700, ours) if it is new.
    pub fn open(dir: &Path) -> Result<CheckpointDir, CheckpointError> {
        crate::os::files::private_dir(dir)?;
        Ok(CheckpointDir { dir: dir.into() })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}.json", escape(key)))
    }
}

impl Checkpoints for CheckpointDir {
    fn keys(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                unescape(name.strip_suffix(".json")?)
            })
            .collect()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CheckpointError> {
        let path = self.path(key);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::Io(path, e)),
        }
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), CheckpointError> {
        use crate::os::files::{Sync, write_atomic};
        Ok(write_atomic(&self.path(key), value, 0o600, Sync::Cached)?)
    }

    fn remove(&self, key: &str) -> Result<(), CheckpointError> {
        let path = self.path(key);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CheckpointError::Io(path, e)),
            _ => Ok(()),
        }
    }
}

/// A model key as a file name: letters, digits, `-` and `_` kept, every other byte as
/// `%XX` (pod keys hold `/`).
fn escape(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn unescape(name: &str) -> Option<String> {
    let mut out = Vec::new();
    let mut bytes = name.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_survive_as_file_names() {
        for key in ["__node__", "default/web-0", "a%b.c", "ns/ü"] {
            assert_eq!(unescape(&escape(key)).as_deref(), Some(key));
            assert!(!escape(key).contains('/'));
        }
        assert_eq!(unescape("%G1"), None);
    }

    #[test]
    fn a_directory_keeps_models_between_openings() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("prediction-checkpoints");
        let c = CheckpointDir::open(&dir).unwrap();
        c.put("default/web", b"{\"a\":1}").unwrap();
        c.put("__node__", b"{}").unwrap();
        let again = CheckpointDir::open(&dir).unwrap();
        let mut keys = again.keys();
        keys.sort();
        assert_eq!(keys, vec!["__node__", "default/web"]);
        assert_eq!(
            again.get("default/web").unwrap().as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        again.remove("default/web").unwrap();
        again.remove("gone").unwrap();
        assert_eq!(again.get("default/web").unwrap(), None);
    }
}
