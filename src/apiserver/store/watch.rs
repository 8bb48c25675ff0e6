//! Per-resource event history and watchers. Writers never wait for watchers: each watcher
//! has a queue bounded by events and bytes and is dropped when it falls too far behind (its client re-watches
//! from its last resourceVersion, or re-lists when that has left the history).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub use super::item::{EventType, WatchItem};
use super::object::{Filter, Stored};
use super::queue::{QueueTx, Refused};

/// One committed change.
#[derive(Debug)]
pub struct Event {
    pub kind: EventType,
    pub object: Arc<Stored>,
    pub previous: Option<Arc<Stored>>,
}

/// An event as seen through `filter`: an object moving out of the selection reads as
/// DELETED, one moving in as ADDED (Kubernetes' watch-cache semantics).
pub fn project(filter: &Filter, ev: &Event) -> Option<(EventType, Arc<Stored>)> {
    let now = filter.matches(&ev.object);
    match ev.kind {
        EventType::Modified => {
            let before = ev.previous.as_ref().is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => Some((EventType::Modified, ev.object.clone())),
                (true, false) => Some((EventType::Deleted, ev.object.clone())),
                (false, true) => Some((EventType::Added, ev.object.clone())),
                (false, false) => None,
            }
        }
        kind => now.then(|| (kind, ev.object.clone())),
    }
}

pub(crate) struct Watcher {
    pub id: u64,
    pub filter: Filter,
    pub tx: QueueTx,
}

/// Objects, history and watchers of one resource, guarded by one lock so that a watch
/// registers atomically with the snapshot it starts from.
pub(crate) struct TypeInner {
    pub objects: BTreeMap<(String, String), Arc<Stored>>,
    pub history: VecDeque<Arc<Event>>,
    /// Bytes of the objects in `history`.
    pub history_bytes: u64,
    /// A watch may start from any revision >= `oldest`.
    pub oldest: u64,
    pub watchers: Vec<Watcher>,
}

impl TypeInner {
    pub fn new(oldest: u64) -> Self {
        Self {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_bytes: 0,
            oldest,
            watchers: Vec::new(),
        }
    }

    /// Records an event, trims the history to `cap` events and `cap_bytes` bytes, and
    /// fans it out. Watchers that are gone or full are dropped; returns how many were
    /// dropped for lagging.
    pub fn publish(&mut self, ev: Arc<Event>, cap: usize, cap_bytes: u64) -> usize {
        self.history.push_back(ev.clone());
        self.history_bytes += ev.object.bytes.len() as u64;
        while self.history.len() > cap || (self.history_bytes > cap_bytes && self.history.len() > 1)
        {
            if let Some(old) = self.history.pop_front() {
                self.history_bytes -= old.object.bytes.len() as u64;
                self.oldest = old.object.rev;
            }
        }
        let mut lagged = 0;
        self.watchers.retain(|w| {
            let Some((kind, obj)) = project(&w.filter, &ev) else {
                return !w.tx.is_closed();
            };
            match w.tx.try_send(WatchItem::Event(kind, obj)) {
                Ok(()) => true,
                Err(Refused::Full) => {
                    lagged += 1;
                    false
                }
                Err(Refused::Closed) => false,
            }
        });
        lagged
    }

    /// History events after `rev` as seen through `filter`.
    pub fn replay(&self, rev: u64, filter: &Filter) -> Vec<(EventType, Arc<Stored>)> {
        self.history
            .iter()
            .filter(|e| e.object.rev > rev)
            .filter_map(|e| project(filter, e))
            .collect()
    }
}
