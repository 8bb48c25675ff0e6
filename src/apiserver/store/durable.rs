//! Group commit: a write is answered only once it is on disk, and the writes of the same
//! moment share one flush. One thread flushes whenever a revision that is not durable yet
//! is asked for; every waiter up to the revision it flushed is released together, after
//! those writes were made visible. A failed flush fails every waiter at once and the
//! flusher stops flushing: the store rebuilds its database and starts a new one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use tokio::sync::watch;

/// What is on disk: every write up to `rev`; `error` once a flush failed.
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
    /// Replaced by a newer flusher: whatever this one finishes is no longer news.
    retired: Arc<AtomicBool>,
}

/// What the flusher calls back.
struct Callbacks<F, D, X> {
    flush: F,
    durable: D,
    failed: X,
}

impl GroupCommit {
    /// Starts the flusher; `committed` is the store's latest committed revision (every
    /// write up to it is already in sled's buffers). `durable(rev)` runs after each
    /// successful flush, before its waiters are released; `failed` after a failed one.
    pub fn start(
        flush: impl Fn() -> sled::Result<()> + Send + 'static,
        committed: Arc<AtomicU64>,
        durable: impl Fn(u64) + Send + 'static,
        failed: impl Fn(&sled::Error) + Send + 'static,
    ) -> GroupCommit {
        let start = committed.load(Ordering::SeqCst);
        let (flushed, _) = watch::channel(Flushed {
            rev: start,
            error: None,
        });
        let wanted: Arc<(Mutex<Wanted>, Condvar)> = Default::default();
        let retired = Arc::new(AtomicBool::new(false));
        let (w, tx, r) = (wanted.clone(), flushed.clone(), retired.clone());
        let cb = Callbacks {
            flush,
            durable,
            failed,
        };
        let thread = std::thread::Builder::new()
            .name("apiserver-flush".into())
            .spawn(move || flush_loop(&cb, &committed, &w, &tx, &r))
            .ok();
        GroupCommit {
            wanted,
            flushed,
            thread: Mutex::new(thread),
            retired,
        }
    }

    /// Asks for a flush covering `rev` without waiting for it.
    pub fn request(&self, rev: u64) {
        let (m, cv) = &*self.wanted;
        let mut w = m.lock().unwrap_or_else(|p| p.into_inner());
        if rev > w.rev {
            w.rev = rev;
            cv.notify_one();
        }
    }

    /// Waits until every write up to `rev` is on disk.
    pub async fn wait(&self, rev: u64) -> Result<(), String> {
        let mut rx = self.flushed.subscribe();
        if rx.borrow().rev >= rev {
            return Ok(());
        }
        self.request(rev);
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

    /// Fails every waiter now and flushes no more.
    pub fn fail(&self, why: &str) {
        self.flushed.send_modify(|f| {
            if f.error.is_none() {
                f.error = Some(why.to_string());
            }
        });
        self.stop_loop();
    }

    /// A newer flusher took over: this one's results are dropped, its thread let go.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        self.stop_loop();
        self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn stop_loop(&self) {
        let (m, cv) = &*self.wanted;
        m.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        cv.notify_one();
    }

    /// Stops the flusher thread; `join`: after its current flush (a flush on a failed
    /// disk may never end, so a failed store does not wait for it).
    pub fn stop(&self, join: bool) {
        self.stop_loop();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle.filter(|_| join) {
            let _ = h.join();
        }
    }
}

fn flush_loop<F, D, X>(
    cb: &Callbacks<F, D, X>,
    committed: &AtomicU64,
    wanted: &(Mutex<Wanted>, Condvar),
    tx: &watch::Sender<Flushed>,
    retired: &AtomicBool,
) where
    F: Fn() -> sled::Result<()>,
    D: Fn(u64),
    X: Fn(&sled::Error),
{
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
        let flushed = (cb.flush)();
        if retired.load(Ordering::SeqCst) {
            return;
        }
        match flushed {
            Ok(()) => {
                (cb.durable)(upto);
                tx.send_modify(|f| f.rev = f.rev.max(upto));
            }
            Err(e) => {
                tracing::error!(error = %e, "flushing the API server's store");
                (cb.failed)(&e);
                tx.send_modify(|f| f.error = Some(format!("storage flush failed: {e}")));
                return;
            }
        }
    }
}
