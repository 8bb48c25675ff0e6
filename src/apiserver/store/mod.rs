//! sled-backed object storage with one global revision counter (like etcd's), bounded
//! per-resource event history and non-blocking watch fan-out. Objects are also kept in
//! memory; sled makes them survive restarts, and revisions stay monotonic across them.
//!
//! A write becomes visible only once it is on disk (see `memory`). When the disk refuses
//! writes (full, failing) the store stops taking them at once, answers every write with
//! the cause, reports itself unhealthy, and rebuilds its database from the acknowledged
//! objects as soon as the disk has room again: sled, after an I/O error, may never
//! finish another flush, so the failed instance is abandoned, never touched again.

mod backend;
mod compaction;
mod durable;
mod health;
mod item;
mod memory;
pub mod object;
mod queue;
pub mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde_json::Value;

pub use health::Failure;
pub use object::{FieldRequirement, Filter, FilterError, Stored};
pub use queue::{QueueBudget, QueueRx, WATCH_BUFFER_BYTES, WATCHER_BUFFER_BYTES};
pub use watch::{Event, EventType, WatchItem};

use super::registry::ResourceKey;
use backend::Backend;
pub use backend::disk_bytes;
use durable::GroupCommit;
use memory::{Memory, Write};
use watch::TypeInner;

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
    /// Bytes of objects queued to one watcher before it is closed as too slow.
    pub watcher_buffer_bytes: u64,
    /// Bytes of objects queued to all watchers together; the watcher whose event would
    /// pass it is closed.
    pub watch_buffer_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            history: 10_000,
            watcher_buffer: 4096,
            cache_bytes: 8 << 20,
            compact_slack_bytes: 8 << 20,
            history_bytes: 16 << 20,
            watcher_buffer_bytes: queue::WATCHER_BUFFER_BYTES,
            watch_buffer_bytes: queue::WATCH_BUFFER_BYTES,
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
    /// The disk refused a write; nothing is written until the store has recovered.
    #[error("{0}")]
    Unavailable(Failure),
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
    pub kind: EventType,
}

impl Committed {
    /// The write removed the object.
    pub fn removed(&self) -> bool {
        self.kind == EventType::Deleted
    }
}

/// The start of a watch: events to send first, then the live channel.
pub struct WatchStart {
    pub id: u64,
    /// The revision the initial state corresponds to.
    pub rev: u64,
    pub initial: Vec<(EventType, Arc<Stored>)>,
    pub rx: QueueRx,
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
    /// `None` only while a compaction or a recovery swaps databases.
    backend: Arc<RwLock<Option<Backend>>>,
    /// Where the database lives (`None`: temporary, never compacted).
    path: Option<PathBuf>,
    /// Bytes of the live objects, to compare with the bytes on disk.
    live_bytes: AtomicU64,
    write: Mutex<Revs>,
    /// The latest committed revision.
    rev: Arc<AtomicU64>,
    /// `None` for a temporary store: it lives in memory, there is no disk to wait for.
    /// Replaced when the store recovers (a failed flusher may never return).
    group: Mutex<Option<Arc<GroupCommit>>>,
    mem: Arc<Memory>,
    health: Arc<health::Health>,
    /// A recovery attempt is running (at most one: a failed disk may hang it).
    recovering: Arc<AtomicBool>,
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

/// The objects of a database, by resource, and the highest revision seen.
fn load(backend: &Backend) -> Result<(HashMap<ResourceKey, TypeInner>, u64, u64), StoreError> {
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
    Ok((loaded, rev, live_bytes))
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
        let (loaded, rev, live_bytes) = load(&backend)?;
        let mem = Arc::new(Memory::new(loaded, rev, opts.clone()));
        let store = Store {
            backend: Arc::new(RwLock::new(Some(backend))),
            live_bytes: AtomicU64::new(live_bytes),
            write: Mutex::new(Revs { rev, ceiling: rev }),
            rev: Arc::new(AtomicU64::new(rev)),
            group: Mutex::new(None),
            mem,
            health: Arc::new(health::Health::default()),
            recovering: Arc::new(AtomicBool::new(false)),
            opts,
            path,
        };
        if store.path.is_some() {
            *lock(&store.group) = Some(store.new_group());
        }
        Ok(store)
    }

    /// A flusher for the current database: each flush makes the writes it covered visible;
    /// a failed one fails the store.
    fn new_group(&self) -> Arc<GroupCommit> {
        let slot = self.backend.clone();
        // The database handle is taken out of the slot first: a flush that never returns
        // must not hold the slot a recovery needs.
        let flush = move || {
            let db = read(&slot).as_ref().map(|b| b.db.clone());
            db.map_or(Ok(()), |db| db.flush().map(|_| ()))
        };
        let mem = self.mem.clone();
        let health = self.health.clone();
        let fail_mem = self.mem.clone();
        Arc::new(GroupCommit::start(
            flush,
            self.rev.clone(),
            move |upto| mem.promote(upto),
            move |err: &sled::Error| {
                let discarded = fail_mem.discard();
                health.fail(Failure::of_sled(err, "flushing"), discarded);
            },
        ))
    }

    fn group(&self) -> Option<Arc<GroupCommit>> {
        lock(&self.group).clone()
    }

    /// The latest committed revision (acknowledged or not yet).
    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::SeqCst)
    }

    /// Every write up to this revision is on disk and visible.
    pub fn visible_rev(&self) -> u64 {
        self.mem.visible_rev()
    }

    /// Watchers closed so far for falling behind.
    pub fn lagged_watchers(&self) -> u64 {
        self.mem.lagged()
    }

    /// Bytes of objects queued to watchers and not yet read by them.
    pub fn watch_queued_bytes(&self) -> u64 {
        self.mem.watch_queued_bytes()
    }

    /// The object as acknowledged (what readers are served).
    pub fn get(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        self.mem.get(key, ns, name)
    }

    /// The object with every committed write, acknowledged or not: what a writer
    /// computes its change from (its own write is acknowledged only after those).
    pub fn latest(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        self.mem.latest(key, ns, name)
    }

    /// A consistent snapshot of the matching objects and the revision it reflects.
    pub fn list(&self, key: &ResourceKey, filter: &Filter) -> (u64, Vec<Arc<Stored>>) {
        self.mem.list(key, filter)
    }

    /// The matching objects as they were at `rev`, while the history reaches back to it.
    pub fn list_at(
        &self,
        key: &ResourceKey,
        filter: &Filter,
        rev: u64,
    ) -> Result<Vec<Arc<Stored>>, Expired> {
        self.mem.list_at(key, filter, rev)
    }

    /// Number of objects of a resource (all namespaces).
    pub fn count(&self, key: &ResourceKey) -> usize {
        self.mem.count(key)
    }

    /// Every resource that has stored objects.
    pub fn resource_keys(&self) -> Vec<ResourceKey> {
        self.mem.resource_keys()
    }

    /// `None` while healthy; else why writes are refused.
    pub fn failure(&self) -> Option<Failure> {
        self.health.failure()
    }

    /// Changes of [`Store::failure`], for readiness.
    pub fn health(&self) -> tokio::sync::watch::Receiver<Option<Failure>> {
        self.health.subscribe()
    }

    /// Marks the store failed after a write error: every pending write is dropped (none
    /// was acknowledged) and waiters are answered at once.
    fn fail(&self, failure: Failure) -> StoreError {
        let discarded = self.mem.discard();
        self.health.fail(failure.clone(), discarded);
        if let Some(g) = self.group() {
            g.fail(&failure.message);
        }
        StoreError::Unavailable(failure)
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
        if let Some(f) = self.health.failure() {
            return Err(StoreError::Unavailable(f).into());
        }
        let mut rev_guard = lock(&self.write);
        if let Some(f) = self.health.failure() {
            return Err(StoreError::Unavailable(f).into());
        }
        let current = self.mem.latest(key, ns, name);
        let change = decide(current.as_ref())?;
        let rev = rev_guard.rev + 1;
        let (kind, stored) = self.write_db(&mut rev_guard, key, ns, name, change, &current, rev)?;
        if let Some(c) = &current {
            self.live_bytes
                .fetch_sub(c.bytes.len() as u64, Ordering::Relaxed);
        }
        rev_guard.rev = rev;
        let w = Write {
            key: key.clone(),
            ns: ns.to_string(),
            name: name.to_string(),
            kind,
            object: stored.clone(),
            previous: current.clone(),
        };
        // Staged before the revision is published: the flusher promotes every staged
        // write up to the revision it read, so one published but not yet staged would be
        // acknowledged yet stay invisible until some later flush.
        match self.group() {
            Some(g) => {
                self.mem.stage(w);
                self.rev.store(rev, Ordering::SeqCst);
                g.request(rev);
            }
            None => {
                self.mem.apply_now(w);
                self.rev.store(rev, Ordering::SeqCst);
            }
        }
        Ok(Committed {
            object: stored,
            previous: current,
            kind,
        })
    }

    /// Puts one change into sled (failing the store on an I/O error).
    #[allow(clippy::too_many_arguments)]
    fn write_db(
        &self,
        revs: &mut Revs,
        key: &ResourceKey,
        ns: &str,
        name: &str,
        change: Change,
        current: &Option<Arc<Stored>>,
        rev: u64,
    ) -> Result<(EventType, Arc<Stored>), StoreError> {
        let guard = read(&self.backend);
        let backend = guard.as_ref().ok_or(StoreError::Closed)?;
        let failed = |e: sled::Error| self.fail(Failure::of_sled(&e, "writing"));
        if rev > revs.ceiling {
            let ceiling = rev + REV_RESERVE;
            backend
                .meta
                .insert("ceiling", &ceiling.to_be_bytes())
                .map_err(failed)?;
            backend.db.flush().map_err(failed)?;
            revs.ceiling = ceiling;
        }
        let dbk = db_key(key, ns, name);
        let out = match change {
            Change::Put(mut value) => {
                set_rv(&mut value, rev);
                let stored = Arc::new(Stored::new(rev, &value));
                backend
                    .objects
                    .insert(dbk, stored.bytes.as_ref())
                    .map_err(failed)?;
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
                backend.objects.remove(dbk).map_err(failed)?;
                (EventType::Deleted, Arc::new(Stored::new(rev, &value)))
            }
        };
        backend
            .meta
            .insert("rev", &rev.to_be_bytes())
            .map_err(failed)?;
        Ok(out)
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
        self.mem.watch(key, from, filter, initial)
    }

    /// Queues a bookmark for a watcher, in order with its events. False when the watcher
    /// is gone (closed for lagging, or its client left).
    pub fn bookmark(&self, key: &ResourceKey, watcher: u64) -> bool {
        self.mem.bookmark(key, watcher)
    }

    /// Number of registered watchers of a resource.
    pub fn watcher_count(&self, key: &ResourceKey) -> usize {
        self.mem.watcher_count(key)
    }

    /// Makes every write so far durable and visible (start-up: bootstrap objects are read
    /// back at once).
    pub fn settle(&self) -> Result<(), StoreError> {
        let Some(_) = self.group() else {
            return Ok(());
        };
        let rev = self.rev();
        let db = read(&self.backend).as_ref().map(|b| b.db.clone());
        if let Some(db) = db
            && let Err(e) = db.flush()
        {
            return Err(self.fail(Failure::of_sled(&e, "flushing")));
        }
        self.mem.promote(rev);
        Ok(())
    }
}

/// The longest a flush may take before the store counts the disk as failed.
pub const FLUSH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

impl Drop for Store {
    /// A clean close gives back the unused revision reservation. A failed store touches
    /// its database no more (sled may hang on it).
    fn drop(&mut self) {
        let group = lock(&self.group).take();
        let failed = self.health.failure().is_some();
        if let Some(g) = group {
            g.stop(!failed);
        }
        if failed {
            if let Some(b) = self
                .backend
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                std::mem::forget(b);
            }
            return;
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

/// Runs `pass` whenever an object of `key` changes, and every second while the last pass
/// said work remains; idle otherwise (the controllers of namespaces and CRDs).
pub async fn resync_loop<F, Fut>(
    store: &Store,
    key: &ResourceKey,
    stop: &tokio_util::sync::CancellationToken,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let Ok(mut watch) = store.watch(key, None, Filter::default(), false) else {
        return;
    };
    let mut pending = true;
    loop {
        if pending {
            pending = pass().await;
        }
        let tick = async {
            if pending {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            item = watch.rx.recv() => match item {
                Some(WatchItem::Event(..)) => pending = true,
                Some(WatchItem::Bookmark(_)) => {}
                // Closed for lagging: watch again.
                None => match store.watch(key, None, Filter::default(), false) {
                    Ok(w) => { watch = w; pending = true; }
                    Err(_) => return,
                },
            },
            _ = tick => pending = true,
        }
    }
}

#[cfg(test)]
mod tests;
