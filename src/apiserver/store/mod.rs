//! sled-backed object storage with one global revision counter (like etcd's), bounded
//! per-resource event history and non-blocking watch fan-out. Objects are also kept in
//! memory; sled makes them survive restarts, and revisions stay monotonic across them.

mod backend;
mod durable;
pub mod object;
pub mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde_json::Value;
use tokio::sync::mpsc;

pub use object::{FieldRequirement, Filter, FilterError, Stored};
pub use watch::{Event, EventType, WatchItem};

use super::registry::ResourceKey;
use backend::Backend;
pub use backend::disk_bytes;
use watch::{TypeInner, Watcher};

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Events kept per resource for watches resuming from an older resourceVersion.
    pub history: usize,
    /// Events buffered per watcher before it is considered too slow and closed.
    pub watcher_buffer: usize,
    /// sled page cache.
    pub cache_bytes: u64,
    /// Compaction starts when the files exceed twice the live data by this much.
    pub compact_slack_bytes: u64,
    /// Bytes of history kept per resource (with `history` events at most).
    pub history_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            history: 10_000,
            watcher_buffer: 4096,
            cache_bytes: 8 << 20,
            compact_slack_bytes: 8 << 20,
            history_bytes: 16 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("{0}")]
    Durability(String),
    #[error("storage I/O: {0}")]
    Io(std::io::Error),
    #[error("the store is closed")]
    Closed,
}

/// Error type for commits that may decide, under the lock, to write nothing.
#[derive(Debug)]
pub enum Skippable {
    Skip,
    Store(StoreError),
}

impl From<StoreError> for Skippable {
    fn from(e: StoreError) -> Self {
        Skippable::Store(e)
    }
}

/// What a write does, decided under the write lock from the current object.
pub enum Change {
    Put(Value),
    Delete,
}

pub struct Committed {
    pub object: Arc<Stored>,
    pub previous: Option<Arc<Stored>>,
}

/// The start of a watch: events to send first, then the live channel.
pub struct WatchStart {
    pub id: u64,
    /// The revision the initial state corresponds to.
    pub rev: u64,
    pub initial: Vec<(EventType, Arc<Stored>)>,
    pub rx: mpsc::Receiver<WatchItem>,
}

/// The requested resourceVersion has been compacted away.
#[derive(Debug, Clone, Copy)]
pub struct Expired {
    pub requested: u64,
    pub oldest: u64,
}

/// Revisions handed out after a crash never repeat one handed out before it (a watcher may
/// have seen it): they are reserved on disk this many at a time, and a restart after a
/// crash continues above the reservation.
const REV_RESERVE: u64 = 10_000;

/// The write lock's state: the last revision committed, and the reservation's end.
struct Revs {
    rev: u64,
    ceiling: u64,
}

pub struct Store {
    /// `None` only while a compaction swaps databases.
    backend: Arc<RwLock<Option<Backend>>>,
    /// Where the database lives (`None`: temporary, never compacted).
    path: Option<PathBuf>,
    /// Bytes of the live objects, to compare with the bytes on disk.
    live_bytes: AtomicU64,
    write: Mutex<Revs>,
    rev: Arc<AtomicU64>,
    /// `None` for a temporary store: it lives in memory, there is no disk to wait for.
    group: Option<durable::GroupCommit>,
    next_watcher: AtomicU64,
    lagged: AtomicU64,
    types: RwLock<HashMap<ResourceKey, Arc<Mutex<TypeInner>>>>,
    opts: StoreOptions,
}

fn db_key(key: &ResourceKey, ns: &str, name: &str) -> Vec<u8> {
    format!("{}\0{}\0{}\0{}", key.0, key.1, ns, name).into_bytes()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

fn set_rv(value: &mut Value, rev: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}

impl Store {
    /// Opens (or creates) the store under `path`.
    pub fn open(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let backend = Backend::open(path, &opts)?;
        Self::from_backend(backend, Some(path.to_path_buf()), opts)
    }

    /// A store that disappears when dropped (tests, benchmarks).
    pub fn temporary(opts: StoreOptions) -> Result<Store, StoreError> {
        Self::from_backend(Backend::temporary(&opts)?, None, opts)
    }

    fn from_backend(
        backend: Backend,
        path: Option<PathBuf>,
        opts: StoreOptions,
    ) -> Result<Store, StoreError> {
        // After a clean close the ceiling equals the last revision; after a crash it is
        // above every revision that was handed out.
        let mut rev = backend.get_u64("rev")?.max(backend.get_u64("ceiling")?);
        let mut live_bytes = 0u64;
        let mut loaded: HashMap<ResourceKey, TypeInner> = HashMap::new();
        for item in backend.objects.iter() {
            let (k, v) = item?;
            live_bytes += v.len() as u64;
            let key = String::from_utf8_lossy(&k).to_string();
            let parts: Vec<&str> = key.split('\0').collect();
            let value: Value = match serde_json::from_slice(&v) {
                Ok(v) if parts.len() == 4 => v,
                Ok(_) | Err(_) => {
                    tracing::error!(key = %key.replace('\0', "/"), "skipping unreadable stored object");
                    continue;
                }
            };
            let obj_rev = value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            rev = rev.max(obj_rev);
            let stored = Arc::new(Stored::new(obj_rev, &value));
            loaded
                .entry((parts[0].to_string(), parts[1].to_string()))
                .or_insert_with(|| TypeInner::new(0))
                .objects
                .insert((parts[2].to_string(), parts[3].to_string()), stored);
        }
        let types = loaded
            .into_iter()
            .map(|(k, mut t)| {
                t.oldest = rev;
                (k, Arc::new(Mutex::new(t)))
            })
            .collect();
        let committed = Arc::new(AtomicU64::new(rev));
        let backend = Arc::new(RwLock::new(Some(backend)));
        let flushed = backend.clone();
        let flush = move || match read(&flushed).as_ref() {
            Some(b) => b.db.flush().map(|_| ()),
            None => Ok(()),
        };
        Ok(Store {
            group: path
                .is_some()
                .then(|| durable::GroupCommit::start(flush, committed.clone())),
            backend,
            path,
            live_bytes: AtomicU64::new(live_bytes),
            write: Mutex::new(Revs { rev, ceiling: rev }),
            rev: committed,
            next_watcher: AtomicU64::new(1),
            lagged: AtomicU64::new(0),
            types: RwLock::new(types),
            opts,
        })
    }

    /// The latest committed revision.
    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::SeqCst)
    }

    /// Watchers closed so far for falling behind.
    pub fn lagged_watchers(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }

    fn type_state(&self, key: &ResourceKey) -> Arc<Mutex<TypeInner>> {
        if let Some(t) = self
            .types
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
        {
            return t.clone();
        }
        let mut types = self.types.write().unwrap_or_else(|p| p.into_inner());
        types
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(TypeInner::new(self.rev()))))
            .clone()
    }

    pub fn get(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let t = self.type_state(key);
        let inner = lock(&t);
        inner
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// A consistent snapshot of the matching objects and the revision it reflects.
    pub fn list(&self, key: &ResourceKey, filter: &Filter) -> (u64, Vec<Arc<Stored>>) {
        let t = self.type_state(key);
        let _writes = lock(&self.write);
        let inner = lock(&t);
        let items = match &filter.namespace {
            Some(ns) => inner
                .objects
                .range((ns.clone(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .filter(|(_, o)| filter.matches(o))
                .map(|(_, o)| o.clone())
                .collect(),
            None => inner
                .objects
                .values()
                .filter(|o| filter.matches(o))
                .cloned()
                .collect(),
        };
        (self.rev(), items)
    }

    /// Number of objects of a resource (all namespaces).
    pub fn count(&self, key: &ResourceKey) -> usize {
        lock(&self.type_state(key)).objects.len()
    }

    /// Every resource that has stored objects.
    pub fn resource_keys(&self) -> Vec<ResourceKey> {
        self.types
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Applies one write atomically: `decide` sees the current object under the write
    /// lock and returns the change (or an error such as a conflict).
    pub fn commit<E: From<StoreError>>(
        &self,
        key: &ResourceKey,
        ns: &str,
        name: &str,
        decide: impl FnOnce(Option<&Arc<Stored>>) -> Result<Change, E>,
    ) -> Result<Committed, E> {
        let t = self.type_state(key);
        let mut rev_guard = lock(&self.write);
        let current = lock(&t)
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned();
        let change = decide(current.as_ref())?;
        let rev = rev_guard.rev + 1;
        let guard = read(&self.backend);
        let backend = guard.as_ref().ok_or(StoreError::Closed)?;
        if rev > rev_guard.ceiling {
            let ceiling = rev + REV_RESERVE;
            backend.put_u64("ceiling", ceiling)?;
            backend.db.flush().map_err(StoreError::from)?;
            rev_guard.ceiling = ceiling;
        }
        let dbk = db_key(key, ns, name);
        let (kind, stored) = match change {
            Change::Put(mut value) => {
                set_rv(&mut value, rev);
                let stored = Arc::new(Stored::new(rev, &value));
                backend
                    .objects
                    .insert(dbk, stored.bytes.as_ref())
                    .map_err(StoreError::from)?;
                self.live_bytes
                    .fetch_add(stored.bytes.len() as u64, Ordering::Relaxed);
                let kind = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, stored)
            }
            Change::Delete => {
                let mut value = current.as_ref().map(|c| c.value()).unwrap_or(Value::Null);
                set_rv(&mut value, rev);
                backend.objects.remove(dbk).map_err(StoreError::from)?;
                (EventType::Deleted, Arc::new(Stored::new(rev, &value)))
            }
        };
        backend.put_u64("rev", rev)?;
        drop(guard);
        if let Some(c) = &current {
            self.live_bytes
                .fetch_sub(c.bytes.len() as u64, Ordering::Relaxed);
        }
        rev_guard.rev = rev;
        self.rev.store(rev, Ordering::SeqCst);
        let mut inner = lock(&t);
        let obj_key = (ns.to_string(), name.to_string());
        match kind {
            EventType::Deleted => {
                inner.objects.remove(&obj_key);
            }
            _ => {
                inner.objects.insert(obj_key, stored.clone());
            }
        }
        let previous = if kind == EventType::Modified {
            current.clone()
        } else {
            None
        };
        let ev = Arc::new(Event {
            kind,
            object: stored.clone(),
            previous,
        });
        let lagged = inner.publish(ev, self.opts.history, self.opts.history_bytes);
        if lagged > 0 {
            self.lagged.fetch_add(lagged as u64, Ordering::Relaxed);
            tracing::debug!(resource = %key.1, lagged, "closed watchers that fell behind");
        }
        Ok(Committed {
            object: stored,
            previous: current,
        })
    }

    /// Registers a watch. `from = None` starts from the current state (sent as ADDED
    /// events); `Some(rev)` replays history after `rev` and, with `initial`, also sends the
    /// current state first (streaming list).
    pub fn watch(
        &self,
        key: &ResourceKey,
        from: Option<u64>,
        filter: Filter,
        initial: bool,
    ) -> Result<WatchStart, Expired> {
        let t = self.type_state(key);
        let _writes = lock(&self.write);
        let mut inner = lock(&t);
        let rev = self.rev();
        let mut events = Vec::new();
        if from.is_none() || initial {
            events.extend(
                inner
                    .objects
                    .values()
                    .filter(|o| filter.matches(o))
                    .map(|o| (EventType::Added, o.clone())),
            );
        } else if let Some(r) = from {
            if r < inner.oldest {
                return Err(Expired {
                    requested: r,
                    oldest: inner.oldest,
                });
            }
            events = inner.replay(r, &filter);
        }
        let (tx, rx) = mpsc::channel(self.opts.watcher_buffer.max(1));
        let id = self.next_watcher.fetch_add(1, Ordering::Relaxed);
        inner.watchers.push(Watcher { id, filter, tx });
        Ok(WatchStart {
            id,
            rev,
            initial: events,
            rx,
        })
    }

    /// Queues a bookmark for a watcher, in order with its events. False when the watcher
    /// is gone (closed for lagging, or its client left).
    pub fn bookmark(&self, key: &ResourceKey, watcher: u64) -> bool {
        let t = self.type_state(key);
        let _writes = lock(&self.write);
        let mut inner = lock(&t);
        let rev = self.rev();
        let Some(pos) = inner.watchers.iter().position(|w| w.id == watcher) else {
            return false;
        };
        if inner.watchers[pos]
            .tx
            .try_send(WatchItem::Bookmark(rev))
            .is_err()
        {
            inner.watchers.remove(pos);
            return false;
        }
        true
    }

    /// Number of registered watchers of a resource.
    pub fn watcher_count(&self, key: &ResourceKey) -> usize {
        let t = self.type_state(key);
        let mut inner = lock(&t);
        inner.watchers.retain(|w| !w.tx.is_closed());
        inner.watchers.len()
    }

    /// Makes every write so far durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let db = read(&self.backend).as_ref().map(|b| b.db.clone());
        if let Some(db) = db {
            db.flush_async().await?;
        }
        Ok(())
    }

    /// Bytes on disk and bytes of the live objects (`None` for a temporary store).
    pub fn sizes(&self) -> Option<(u64, u64)> {
        let path = self.path.as_ref()?;
        Some((
            backend::disk_bytes(path),
            self.live_bytes.load(Ordering::Relaxed),
        ))
    }

    /// Compacts when the files take more than twice the live data plus the slack.
    pub fn compact_if_needed(&self) -> Result<bool, StoreError> {
        let Some((disk, live)) = self.sizes() else {
            return Ok(false);
        };
        if disk <= live.saturating_mul(2) + self.opts.compact_slack_bytes {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        self.compact()?;
        let after = self.sizes().map_or(0, |s| s.0);
        tracing::info!(
            before = disk,
            after,
            live,
            took_ms = started.elapsed().as_millis() as u64,
            "compacted the API server's store"
        );
        Ok(true)
    }

    /// Rewrites the live objects into a fresh database and swaps it in. Writers wait;
    /// readers (served from memory) do not.
    pub fn compact(&self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let revs = lock(&self.write);
        let objects: Vec<(Vec<u8>, Arc<Stored>)> = read(&self.types)
            .iter()
            .flat_map(|(k, t)| {
                lock(t)
                    .objects
                    .iter()
                    .map(|((ns, name), o)| (db_key(k, ns, name), o.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        backend::write_fresh(
            path,
            &self.opts,
            &objects,
            &[("rev", revs.rev), ("ceiling", revs.ceiling)],
        )?;
        let mut slot = self.backend.write().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = slot.take() {
            old.db.flush()?;
        }
        backend::swap_in(path)?;
        *slot = Some(Backend::open(path, &self.opts)?);
        if let Err(e) = crate::os::files::restrict_tree(path) {
            tracing::warn!(error = %e, "narrowing the store's file modes");
        }
        Ok(())
    }

    /// Waits until every write up to `rev` is on disk; the writes waiting at the same
    /// moment share one flush.
    pub async fn durable(&self, rev: u64) -> Result<(), StoreError> {
        match &self.group {
            Some(g) => g.wait(rev).await.map_err(StoreError::Durability),
            None => Ok(()),
        }
    }
}

impl Drop for Store {
    /// A clean close gives back the unused revision reservation.
    fn drop(&mut self) {
        if let Some(g) = &self.group {
            g.stop();
        }
        let rev = lock(&self.write).rev;
        let backend = read(&self.backend);
        let Some(backend) = backend.as_ref() else {
            return;
        };
        let closed = backend
            .put_u64("ceiling", rev)
            .and_then(|_| Ok(backend.db.flush()?));
        if let Err(e) = closed {
            tracing::warn!(error = %e, "closing the API server's store");
        }
    }
}

#[cfg(test)]
mod tests;
