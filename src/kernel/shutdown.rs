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

    /// Sleeps `d`; false when draining begins first (the loops' "go on?").
    pub async fn sleep(&self, d: std::time::Duration) -> bool {
        self.sleep_until(tokio::time::Instant::now() + d).await
    }

    /// Sleeps until `at`; false when draining begins first.
    pub async fn sleep_until(&self, at: tokio::time::Instant) -> bool {
        tokio::select! {
            _ = self.draining() => false,
            _ = tokio::time::sleep_until(at) => true,
        }
    }

    /// A token cancelled when draining begins, for APIs that take tokens.
    pub fn drain_token(&self) -> CancellationToken {
        self.drain.child_token()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_sleep_goes_on_unless_draining_begins_first() {
        let s = Shutdown::new();
        assert!(
            s.sleep(Duration::from_millis(20)).await,
            "slept the whole time"
        );
        let later = s.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.begin_drain();
        });
        let start = std::time::Instant::now();
        assert!(
            !s.sleep(Duration::from_secs(600)).await,
            "draining cut it short"
        );
        assert!(start.elapsed() < Duration::from_secs(60));
    }
}
