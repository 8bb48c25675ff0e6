//! Two-phase shutdown: the first signal starts a graceful drain, a second signal or the
//! grace timeout aborts.

use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    drain: CancellationToken,
    abort: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Phase one: stop intake, finish in-flight work.
    pub fn begin_drain(&self) {
        self.drain.cancel();
    }

    /// Phase two: stop now.
    pub fn abort(&self) {
        self.drain.cancel();
        self.abort.cancel();
    }

    pub fn is_draining(&self) -> bool {
        self.drain.is_cancelled()
    }

    pub fn is_aborted(&self) -> bool {
        self.abort.is_cancelled()
    }

    /// Resolves once draining has begun.
    pub async fn draining(&self) {
        self.drain.cancelled().await
    }

    /// Resolves once the process aborts.
    pub async fn aborted(&self) {
        self.abort.cancelled().await
    }

    /// A token cancelled when draining begins, for APIs that take tokens.
    pub fn drain_token(&self) -> CancellationToken {
        self.drain.child_token()
    }
}
