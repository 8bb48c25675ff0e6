//! A watcher's queue, bounded by events and by bytes: the objects queued to a watcher stay
//! in memory until it reads them, so a slow watcher of large objects would otherwise pin
//! up to `watcher_buffer` versions of them. Past either bound, or past the bytes all
//! watchers may hold together, the watcher is closed (its client re-watches from its last
//! resourceVersion, as after kube-apiserver closes an unresponsive watcher).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::mpsc;

use super::item::WatchItem;

/// Bytes of objects one watcher may have queued (the size of a resource's watch history).
pub const WATCHER_BUFFER_BYTES: u64 = 16 << 20;
/// Bytes of objects all watchers may have queued together.
pub const WATCH_BUFFER_BYTES: u64 = 256 << 20;

/// Bytes of the objects queued to watchers: what one may hold and what all may together.
#[derive(Debug, Clone)]
pub struct QueueBudget {
    pub per_watcher: u64,
    pub total: u64,
    /// Bytes queued to all watchers now (signed: a read may release before the send adds).
    held: Arc<AtomicI64>,
}

impl QueueBudget {
    pub fn new(per_watcher: u64, total: u64) -> QueueBudget {
        QueueBudget {
            per_watcher,
            total,
            held: Arc::default(),
        }
    }

    /// Bytes queued to all watchers now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed).max(0) as u64
    }

    /// A queue of `events` at most and this budget's bytes.
    pub fn queue(&self, events: usize) -> (QueueTx, QueueRx) {
        let (tx, rx) = mpsc::channel(events.max(1));
        let mine: Arc<AtomicI64> = Arc::default();
        let tx = QueueTx {
            tx,
            mine: mine.clone(),
            budget: self.clone(),
        };
        let rx = QueueRx {
            rx,
            mine,
            held: self.held.clone(),
        };
        (tx, rx)
    }
}

fn size(item: &WatchItem) -> i64 {
    match item {
        WatchItem::Event(_, o) => o.bytes.len() as i64,
        WatchItem::Bookmark(_) => 0,
    }
}

/// Why an item was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The watcher is behind by more than its events or bytes allow (or all watchers
    /// together hold their budget): close it.
    Full,
    /// The watcher is gone.
    Closed,
}

pub struct QueueTx {
    tx: mpsc::Sender<WatchItem>,
    mine: Arc<AtomicI64>,
    budget: QueueBudget,
}

impl QueueTx {
    /// Queues without waiting. One item is always let into an empty queue, however large,
    /// so an object bigger than the per-watcher budget still reaches a watcher keeping up.
    pub fn try_send(&self, item: WatchItem) -> Result<(), Refused> {
        let n = size(&item);
        let mine = self.mine.load(Ordering::Relaxed).max(0);
        let all = self.budget.held.load(Ordering::Relaxed).max(0);
        if mine > 0
            && (mine + n > self.budget.per_watcher as i64 || all + n > self.budget.total as i64)
        {
            return Err(Refused::Full);
        }
        match self.tx.try_send(item) {
            Ok(()) => {
                self.mine.fetch_add(n, Ordering::Relaxed);
                self.budget.held.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => Err(Refused::Full),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Closed),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The watcher's end; what it has not read is released when it is dropped.
pub struct QueueRx {
    rx: mpsc::Receiver<WatchItem>,
    mine: Arc<AtomicI64>,
    held: Arc<AtomicI64>,
}

impl QueueRx {
    pub async fn recv(&mut self) -> Option<WatchItem> {
        let item = self.rx.recv().await;
        if let Some(i) = &item {
            self.release(i);
        }
        item
    }

    pub fn try_recv(&mut self) -> Result<WatchItem, mpsc::error::TryRecvError> {
        let item = self.rx.try_recv()?;
        self.release(&item);
        Ok(item)
    }

    /// Bytes queued to this watcher and not yet read.
    pub fn queued_bytes(&self) -> u64 {
        self.mine.load(Ordering::Relaxed).max(0) as u64
    }

    fn release(&self, item: &WatchItem) {
        let n = size(item);
        self.mine.fetch_sub(n, Ordering::Relaxed);
        self.held.fetch_sub(n, Ordering::Relaxed);
    }
}

impl Drop for QueueRx {
    fn drop(&mut self) {
        // Closed first, so no send lands after the drain.
        self.rx.close();
        while let Ok(item) = self.rx.try_recv() {
            self.release(&item);
        }
    }
}
