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
        // sled hands out clones of the error it met, and a clone keeps the kind but not
        // the OS error number: both are checked.
        let no_space = match e {
            sled::Error::Io(io) => {
                matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
                    || matches!(
                        io.kind(),
                        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart_from_other_failures() {
        let os = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(Failure::of_sled(&sled::Error::Io(os), "flushing").no_space);
        // What sled returns for an error met earlier: a copy with the kind, not the number.
        let copy = std::io::Error::new(std::io::ErrorKind::StorageFull, "Os { code: 28 }");
        assert!(Failure::of_sled(&sled::Error::Io(copy), "flushing").no_space);
        let other = std::io::Error::from_raw_os_error(libc::EIO);
        assert!(!Failure::of_sled(&sled::Error::Io(other), "flushing").no_space);
    }
}
