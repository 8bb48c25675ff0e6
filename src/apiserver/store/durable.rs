//! Group commit: a write is answered only once it is on disk, and the writes of the same
//! moment share one flush. One thread flushes whenever a waiter asks for a revision that
//! is not durable yet; every waiter up to the revision it flushed is released together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use tokio::sync::watch;

/// What is on disk: every write up to `rev`; `error` when the last flush failed.
#[derive(Debug, Clone, Default)]
pub struct Flushed {
    pub rev: u64,
    pub error: Option<String>,
}

#[derive(Default)]
struct Wanted {
    rev: u64,
    stop: bool,
}

pub(crate) struct GroupCommit {
    wanted: Arc<(Mutex<Wanted>, Condvar)>,
    flushed: watch::Sender<Flushed>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Starts the flusher for `db`; `committed` is the store's latest committed revision
    /// (every write up to it is already in sled's buffers).
    pub fn start(
        flush: impl Fn() -> sled::Result<()> + Send + 'static,
        committed: Arc<AtomicU64>,
    ) -> GroupCommit {
        let start = committed.load(Ordering::SeqCst);
        let (flushed, _) = watch::channel(Flushed {
            rev: start,
            error: None,
        });
        let wanted: Arc<(Mutex<Wanted>, Condvar)> = Default::default();
        let (w, tx) = (wanted.clone(), flushed.clone());
        let thread = std::thread::Builder::new()
            .name("apiserver-flush".into())
            .spawn(move || flush_loop(&flush, &committed, &w, &tx))
            .ok();
        GroupCommit {
            wanted,
            flushed,
            thread: Mutex::new(thread),
        }
    }

    /// Waits until every write up to `rev` is on disk.
    pub async fn wait(&self, rev: u64) -> Result<(), String> {
        let mut rx = self.flushed.subscribe();
        if rx.borrow().rev >= rev {
            return Ok(());
        }
        {
            let (m, cv) = &*self.wanted;
            let mut w = m.lock().unwrap_or_else(|p| p.into_inner());
            w.rev = w.rev.max(rev);
            cv.notify_one();
        }
        loop {
            {
                let f = rx.borrow_and_update();
                if f.rev >= rev {
                    return Ok(());
                }
                if let Some(e) = &f.error {
                    return Err(e.clone());
                }
            }
            if rx.changed().await.is_err() {
                return Err("the store is closed".into());
            }
        }
    }

    /// Stops the flusher thread (after its current flush).
    pub fn stop(&self) {
        {
            let (m, cv) = &*self.wanted;
            m.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
            cv.notify_one();
        }
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

fn flush_loop(
    flush: &dyn Fn() -> sled::Result<()>,
    committed: &AtomicU64,
    wanted: &(Mutex<Wanted>, Condvar),
    tx: &watch::Sender<Flushed>,
) {
    let (m, cv) = wanted;
    loop {
        {
            let mut w = m.lock().unwrap_or_else(|p| p.into_inner());
            while !w.stop && w.rev <= tx.borrow().rev {
                w = cv.wait(w).unwrap_or_else(|p| p.into_inner());
            }
            if w.stop {
                return;
            }
        }
        // Everything committed before this load is in sled's buffers; one flush covers
        // all of it, including writes that arrived after the request that woke us.
        let upto = committed.load(Ordering::SeqCst);
        let next = match flush() {
            Ok(_) => Flushed {
                rev: upto,
                error: None,
            },
            Err(e) => {
                tracing::error!(error = %e, "flushing the API server's store");
                // Waiters fail now; a later request tries again.
                m.lock().unwrap_or_else(|p| p.into_inner()).rev = tx.borrow().rev;
                Flushed {
                    rev: tx.borrow().rev,
                    error: Some(format!("storage flush failed: {e}")),
                }
            }
        };
        tx.send_replace(next);
    }
}
