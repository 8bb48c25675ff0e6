//! The store's objects in memory, in two layers: what is *visible* (every write on disk:
//! served by GET, LIST and WATCH) and what is *pending* (committed to sled, not yet
//! flushed: what the next write is decided against). A flush promotes the pending writes
//! it covered, in revision order; a failed flush discards them, so a write that was never
//! acknowledged is never served either.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::queue::QueueBudget;

use super::object::{Filter, Stored};
use super::watch::{Event, EventType, TypeInner, WatchItem, Watcher};
use super::{Expired, StoreOptions, WatchStart, lock, read};
use crate::apiserver::registry::ResourceKey;

type ObjectKey = (ResourceKey, String, String);

/// One committed write.
pub(crate) struct Write {
    pub key: ResourceKey,
    pub ns: String,
    pub name: String,
    pub kind: EventType,
    pub object: Arc<Stored>,
    pub previous: Option<Arc<Stored>>,
}

#[derive(Default)]
struct Pending {
    writes: VecDeque<Write>,
    /// The newest pending version of each object written (`None`: deleted), with its
    /// revision.
    latest: HashMap<ObjectKey, (u64, Option<Arc<Stored>>)>,
}

pub(crate) struct Memory {
    types: RwLock<HashMap<ResourceKey, Arc<Mutex<TypeInner>>>>,
    /// Also held while a flush's writes are made visible, so a list or a watch sees a
    /// whole revision.
    pending: Mutex<Pending>,
    /// Every write up to here is visible.
    visible: AtomicU64,
    next_watcher: AtomicU64,
    lagged: AtomicU64,
    queues: QueueBudget,
    opts: StoreOptions,
}

impl Memory {
    pub fn new(loaded: HashMap<ResourceKey, TypeInner>, rev: u64, opts: StoreOptions) -> Memory {
        let types = loaded
            .into_iter()
            .map(|(k, mut t)| {
                t.oldest = rev;
                (k, Arc::new(Mutex::new(t)))
            })
            .collect();
        Memory {
            types: RwLock::new(types),
            pending: Mutex::new(Pending::default()),
            visible: AtomicU64::new(rev),
            next_watcher: AtomicU64::new(1),
            lagged: AtomicU64::new(0),
            queues: QueueBudget::new(opts.watcher_buffer_bytes, opts.watch_buffer_bytes),
            opts,
        }
    }

    pub fn visible_rev(&self) -> u64 {
        self.visible.load(Ordering::SeqCst)
    }

    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }

    pub fn type_state(&self, key: &ResourceKey) -> Arc<Mutex<TypeInner>> {
        if let Some(t) = read(&self.types).get(key) {
            return t.clone();
        }
        let mut types = self.types.write().unwrap_or_else(|p| p.into_inner());
        types
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(TypeInner::new(self.visible_rev()))))
            .clone()
    }

    /// The visible version of an object.
    pub fn get(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let t = self.type_state(key);
        let inner = lock(&t);
        inner
            .objects
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// The newest version of an object, pending writes included: what a write is decided
    /// against (it can be acknowledged only after every write before it).
    pub fn latest(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let pending = lock(&self.pending);
        if pending.latest.is_empty() {
            return self.get(key, ns, name);
        }
        let k = (key.clone(), ns.to_string(), name.to_string());
        match pending.latest.get(&k) {
            Some((_, v)) => v.clone(),
            None => self.get(key, ns, name),
        }
    }

    /// Holds `w` until a flush covers it.
    pub fn stage(&self, w: Write) {
        let mut pending = lock(&self.pending);
        let k = (w.key.clone(), w.ns.clone(), w.name.clone());
        let now = (w.kind != EventType::Deleted).then(|| w.object.clone());
        pending.latest.insert(k, (w.object.rev, now));
        pending.writes.push_back(w);
    }

    /// Makes `w` visible at once (a store with no disk to wait for).
    pub fn apply_now(&self, w: Write) {
        let _pending = lock(&self.pending);
        let rev = w.object.rev;
        self.apply(w);
        self.visible.fetch_max(rev, Ordering::SeqCst);
    }

    /// Every pending write up to `upto` becomes visible, in order; so does `upto` itself.
    pub fn promote(&self, upto: u64) {
        let mut pending = lock(&self.pending);
        while pending.writes.front().is_some_and(|w| w.object.rev <= upto) {
            if let Some(w) = pending.writes.pop_front() {
                self.apply(w);
            }
        }
        pending.latest.retain(|_, (rev, _)| *rev > upto);
        self.visible.fetch_max(upto, Ordering::SeqCst);
    }

    /// Forgets every pending write (their flush failed: none was acknowledged).
    pub fn discard(&self) -> usize {
        let mut pending = lock(&self.pending);
        pending.latest.clear();
        let n = pending.writes.len();
        pending.writes.clear();
        n
    }

    fn apply(&self, w: Write) {
        let t = self.type_state(&w.key);
        let mut inner = lock(&t);
        let obj_key = (w.ns, w.name);
        match w.kind {
            EventType::Deleted => {
                inner.objects.remove(&obj_key);
            }
            _ => {
                inner.objects.insert(obj_key, w.object.clone());
            }
        }
        // A deletion keeps what it deleted too: a list at an older revision puts it back.
        let previous = if w.kind == EventType::Added {
            None
        } else {
            w.previous
        };
        let ev = Arc::new(Event {
            kind: w.kind,
            object: w.object,
            previous,
        });
        let lagged = inner.publish(ev, self.opts.history, self.opts.history_bytes);
        if lagged > 0 {
            self.lagged.fetch_add(lagged as u64, Ordering::Relaxed);
            tracing::debug!(resource = %w.key.1, lagged, "closed watchers that fell behind");
        }
    }

    /// A consistent snapshot of the matching visible objects and its revision.
    pub fn list(&self, key: &ResourceKey, filter: &Filter) -> (u64, Vec<Arc<Stored>>) {
        let t = self.type_state(key);
        let _pending = lock(&self.pending);
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
        (self.visible_rev(), items)
    }

    /// The matching objects as they were at `rev` (`resourceVersionMatch=Exact`): the
    /// visible state with every later event of the history undone.
    pub fn list_at(
        &self,
        key: &ResourceKey,
        filter: &Filter,
        rev: u64,
    ) -> Result<Vec<Arc<Stored>>, Expired> {
        let t = self.type_state(key);
        let _pending = lock(&self.pending);
        let inner = lock(&t);
        if rev < inner.oldest {
            return Err(Expired {
                requested: rev,
                oldest: inner.oldest,
            });
        }
        let mut at = inner.objects.clone();
        for ev in inner
            .history
            .iter()
            .rev()
            .take_while(|e| e.object.rev > rev)
        {
            let k = (ev.object.namespace.clone(), ev.object.name.clone());
            match (&ev.kind, &ev.previous) {
                (EventType::Added, _) | (_, None) => at.remove(&k),
                (_, Some(p)) => at.insert(k, p.clone()),
            };
        }
        Ok(at.into_values().filter(|o| filter.matches(o)).collect())
    }

    pub fn count(&self, key: &ResourceKey) -> usize {
        lock(&self.type_state(key)).objects.len()
    }

    pub fn resource_keys(&self) -> Vec<ResourceKey> {
        read(&self.types).keys().cloned().collect()
    }

    /// Every visible object, keyed as in the database (for a fresh database).
    pub fn all(&self) -> Vec<(ResourceKey, String, String, Arc<Stored>)> {
        read(&self.types)
            .iter()
            .flat_map(|(k, t)| {
                lock(t)
                    .objects
                    .iter()
                    .map(|((ns, name), o)| (k.clone(), ns.clone(), name.clone(), o.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Registers a watch (see [`super::Store::watch`]).
    pub fn watch(
        &self,
        key: &ResourceKey,
        from: Option<u64>,
        filter: Filter,
        initial: bool,
    ) -> Result<WatchStart, Expired> {
        let t = self.type_state(key);
        let _pending = lock(&self.pending);
        let mut inner = lock(&t);
        let rev = self.visible_rev();
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
        let (tx, rx) = self.queues.queue(self.opts.watcher_buffer);
        let id = self.next_watcher.fetch_add(1, Ordering::Relaxed);
        inner.watchers.push(Watcher { id, filter, tx });
        Ok(WatchStart {
            id,
            rev,
            initial: events,
            rx,
        })
    }

    /// Queues a bookmark for a watcher, in order with its events; false when it is gone.
    pub fn bookmark(&self, key: &ResourceKey, watcher: u64) -> bool {
        let t = self.type_state(key);
        let _pending = lock(&self.pending);
        let mut inner = lock(&t);
        let rev = self.visible_rev();
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

    /// Bytes of objects queued to watchers and not yet read by them.
    pub fn watch_queued_bytes(&self) -> u64 {
        self.queues.held()
    }

    pub fn watcher_count(&self, key: &ResourceKey) -> usize {
        let t = self.type_state(key);
        let mut inner = lock(&t);
        inner.watchers.retain(|w| !w.tx.is_closed());
        inner.watchers.len()
    }
}
