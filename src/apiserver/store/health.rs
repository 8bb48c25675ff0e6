//! Whether the store takes writes, and why not.

use std::sync::Mutex;

use tokio::sync::watch;

/// Why the store refuses writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    /// The disk is full (ENOSPC, EDQUOT): kube-apiserver's 507 Insufficient Storage.
    pub no_space: bool,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "storage unavailable: {}; writes resume once the disk takes them again",
            self.message
        )
    }
}

impl Failure {
    pub fn of_sled(e: &sled::Error, doing: &str) -> Failure {
        let no_space = match e {
            sled::Error::Io(io) => {
                matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
            }
            _ => false,
        };
        Failure {
            message: format!("{doing}: {e}"),
            no_space,
        }
    }

    pub fn other(message: &str) -> Failure {
        Failure {
            message: message.to_string(),
            no_space: false,
        }
    }
}

pub(crate) struct Health {
    tx: watch::Sender<Option<Failure>>,
    lock: Mutex<()>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            tx: watch::channel(None).0,
            lock: Mutex::new(()),
        }
    }
}

impl Health {
    pub fn failure(&self) -> Option<Failure> {
        self.tx.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<Failure>> {
        self.tx.subscribe()
    }

    /// The first failure is kept (and logged); `discarded` writes were never acknowledged.
    pub fn fail(&self, f: Failure, discarded: usize) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.tx.borrow().is_some() {
            return;
        }
        tracing::error!(error = %f.message, discarded, "the API server's store refuses writes until the disk takes them again");
        self.tx.send_replace(Some(f));
    }

    pub fn recover(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.tx.send_replace(None);
    }
}
