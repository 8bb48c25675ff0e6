//! Every spawned task is tracked and named; nothing is detached.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::task::AbortHandle;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::Shutdown;

#[derive(Clone)]
pub struct Tasks {
    tracker: TaskTracker,
    handles: Arc<Mutex<Vec<(String, AbortHandle)>>>,
    failures: Arc<Mutex<Vec<String>>>,
    shutdown: Shutdown,
}

impl Tasks {
    pub fn new(shutdown: Shutdown) -> Self {
        Self {
            tracker: TaskTracker::new(),
            handles: Arc::default(),
            failures: Arc::default(),
            shutdown,
        }
    }

    /// Spawns a named task in its own tracing span. A task that fails starts the drain of
    /// the whole process and makes it exit non-zero.
    pub fn spawn<F>(&self, name: impl Into<String>, fut: F)
    where
        F: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let name = name.into();
        let failures = self.failures.clone();
        let shutdown = self.shutdown.clone();
        let task_name = name.clone();
        let span = tracing::info_span!("task", name = %name);
        let wrapped = async move {
            if let Err(err) = fut.await {
                tracing::error!(error = format!("{err:#}"), "task failed");
                lock(&failures).push(format!("{task_name}: {err:#}"));
                shutdown.begin_drain();
            }
        };
        let handle = self.tracker.spawn(wrapped.instrument(span));
        let mut handles = lock(&self.handles);
        handles.retain(|(_, h)| !h.is_finished());
        handles.push((name, handle.abort_handle()));
    }

    /// No more tasks may be waited for after this; spawning still works.
    pub fn close(&self) {
        self.tracker.close();
    }

    /// Waits until every task has finished (after [`Tasks::close`]).
    pub async fn wait(&self) {
        self.tracker.wait().await
    }

    /// Aborts every task still running and returns their names.
    pub fn abort_all(&self) -> Vec<String> {
        let handles = lock(&self.handles);
        handles
            .iter()
            .filter(|(_, h)| !h.is_finished())
            .map(|(name, h)| {
                h.abort();
                name.clone()
            })
            .collect()
    }

    pub fn running(&self) -> usize {
        self.tracker.len()
    }

    pub fn failures(&self) -> Vec<String> {
        lock(&self.failures).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn failure_starts_drain_and_is_recorded() {
        let shutdown = Shutdown::new();
        let tasks = Tasks::new(shutdown.clone());
        tasks.spawn("ok", async { Ok(()) });
        tasks.spawn("bad", async { anyhow::bail!("boom") });
        tasks.close();
        tasks.wait().await;
        assert!(shutdown.is_draining());
        assert_eq!(tasks.failures(), vec!["bad: boom".to_string()]);
    }

    #[tokio::test]
    async fn abort_all_stops_stuck_tasks() {
        let tasks = Tasks::new(Shutdown::new());
        tasks.spawn("stuck", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        });
        tasks.close();
        assert_eq!(tasks.abort_all(), vec!["stuck".to_string()]);
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .unwrap();
    }
}
