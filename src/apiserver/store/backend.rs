//! The sled side of the store, and its compaction. sled never gives back the space of
//! overwritten large values (they live in blob files), so a store that rewrites a big
//! ConfigMap grows without end. Compaction writes the live objects into a fresh database
//! beside the old one and swaps the directories, as etcd's defragmentation does; a crash
//! at any step leaves one complete database to open.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{StoreError, StoreOptions, Stored};

pub(crate) struct Backend {
    pub db: sled::Db,
    pub objects: sled::Tree,
    pub meta: sled::Tree,
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn remove_dir(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Io(e)),
        _ => Ok(()),
    }
}

/// Finishes or undoes a compaction a crash interrupted. The new database is renamed into
/// place only after it is complete, so: no database but a new one means it is complete;
/// both means the new one may be partial.
fn recover(path: &Path) -> Result<(), StoreError> {
    let fresh = sibling(path, ".compact");
    if fresh.exists() {
        if path.exists() {
            remove_dir(&fresh)?;
        } else {
            std::fs::rename(&fresh, path).map_err(StoreError::Io)?;
        }
    }
    remove_dir(&sibling(path, ".old"))
}

fn config(path: &Path, opts: &StoreOptions) -> sled::Config {
    sled::Config::new()
        .path(path)
        .cache_capacity(opts.cache_bytes)
        .mode(sled::Mode::HighThroughput)
}

impl Backend {
    fn from_db(db: sled::Db) -> Result<Backend, StoreError> {
        Ok(Backend {
            objects: db.open_tree("objects")?,
            meta: db.open_tree("meta")?,
            db,
        })
    }

    pub fn open(path: &Path, opts: &StoreOptions) -> Result<Backend, StoreError> {
        recover(path)?;
        let config = config(path, opts);
        // sled's flusher thread lets go of the file lock shortly after the previous handle
        // is dropped; a reopen in the same process (restart, compaction, tests) waits.
        let mut tries = 0;
        let db = loop {
            match config.open() {
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock") && tries < 100 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other?,
            }
        };
        Self::from_db(db)
    }

    pub fn temporary(opts: &StoreOptions) -> Result<Backend, StoreError> {
        let db = sled::Config::new()
            .temporary(true)
            .cache_capacity(opts.cache_bytes)
            .open()?;
        Self::from_db(db)
    }

    pub fn put_u64(&self, key: &str, v: u64) -> Result<(), StoreError> {
        self.meta.insert(key, &v.to_be_bytes())?;
        Ok(())
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, StoreError> {
        Ok(self
            .meta
            .get(key)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0))
    }
}

/// Bytes the files under `path` occupy on disk.
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Writes `objects` (keyed as in the live database) and the revisions into a fresh
/// database beside `path`, flushed and closed.
pub fn write_fresh(
    path: &Path,
    opts: &StoreOptions,
    objects: &[(Vec<u8>, Arc<Stored>)],
    revs: &[(&str, u64)],
) -> Result<(), StoreError> {
    let fresh = sibling(path, ".compact");
    remove_dir(&fresh)?;
    let b = Backend::from_db(config(&fresh, opts).open()?)?;
    for (k, o) in objects {
        b.objects.insert(k.as_slice(), o.bytes.as_ref())?;
    }
    for (k, v) in revs {
        b.put_u64(k, *v)?;
    }
    b.db.flush()?;
    Ok(())
}

/// Puts the fresh database in place of the closed one at `path`.
pub fn swap_in(path: &Path) -> Result<(), StoreError> {
    let old = sibling(path, ".old");
    std::fs::rename(path, &old).map_err(StoreError::Io)?;
    std::fs::rename(sibling(path, ".compact"), path).map_err(StoreError::Io)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(StoreError::Io)?;
    }
    remove_dir(&old)
}
