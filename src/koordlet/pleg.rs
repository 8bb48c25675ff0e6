//! PLEG (Koordinator's `pkg/koordlet/pleg`): the kubelet's pod list is read again as soon
//! as a pod's cgroup appears in a QoS-class directory (inotify on the Guaranteed,
//! Burstable and BestEffort directories — the cpu hierarchy on cgroup v1), so a new pod's
//! QoS settings and metrics do not wait for the next `syncIntervalSeconds`. Reads so
//! triggered are limited as Koordinator's are: five a second, bursts of ten.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use inotify::{Inotify, WatchMask};
use tokio::sync::Notify;

use crate::api::extension::qos::KubeQoS;
use crate::kernel::Shutdown;
use crate::os::cgroup::{Cgroups, Subsystem};

/// The directories pods' cgroups are made in.
pub fn qos_dirs(cgroups: &Cgroups) -> Vec<PathBuf> {
    [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort]
        .into_iter()
        .map(|q| cgroups.dir_path(Subsystem::Cpu, &cgroups.qos_dir(q)))
        .collect()
}

/// Whether a directory name is a pod's cgroup (`pod<uid>` or `…-pod<uid>.slice`).
pub fn is_pod_dir(name: &str) -> bool {
    name.starts_with("pod") || (name.contains("-pod") && name.ends_with(".slice"))
}

/// Watches `dirs` and wakes `notify` for each pod directory created; ends at shutdown.
/// A directory that cannot be watched (no such hierarchy here) is skipped.
pub async fn run(
    dirs: Vec<PathBuf>,
    notify: Arc<Notify>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let inotify = Inotify::init()?;
    let mut watched = 0;
    for d in &dirs {
        match inotify
            .watches()
            .add(d, WatchMask::CREATE | WatchMask::ONLYDIR)
        {
            Ok(_) => watched += 1,
            Err(e) => tracing::debug!(dir = %d.display(), error = %e, "pleg: not watched"),
        }
    }
    if watched == 0 {
        tracing::info!(
            dirs = ?dirs,
            "pleg: no QoS cgroup directory to watch; pods are read every syncIntervalSeconds"
        );
        return Ok(());
    }
    let mut events = inotify.into_event_stream([0u8; 4096])?;
    loop {
        let ev = tokio::select! {
            _ = shutdown.draining() => return Ok(()),
            ev = events.next() => ev,
        };
        match ev {
            Some(Ok(e)) => {
                let name = e.name.as_deref().map(|n| n.to_string_lossy().into_owned());
                if name.as_deref().is_some_and(is_pod_dir) {
                    notify.notify_one();
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "pleg: reading inotify events failed"),
            None => return Ok(()),
        }
    }
}

/// Koordinator's limiter for reads a pod creation triggers (`rate.NewLimiter(5, 10)`).
#[derive(Debug)]
pub struct Limiter {
    tokens: f64,
    at: Instant,
}

const RATE_PER_SEC: f64 = 5.0;
const BURST: f64 = 10.0;

impl Default for Limiter {
    fn default() -> Self {
        Limiter {
            tokens: BURST,
            at: Instant::now(),
        }
    }
}

impl Limiter {
    pub fn allow(&mut self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + dt * RATE_PER_SEC).min(BURST);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::cgroup::{Driver, Version};
    use std::time::Duration;

    #[test]
    fn pod_directories_by_driver() {
        assert!(is_pod_dir("pod1234-abcd"));
        assert!(is_pod_dir("kubepods-burstable-pod1234_abcd.slice"));
        assert!(!is_pod_dir("burstable"));
        assert!(!is_pod_dir("kubepods-besteffort.slice"));
    }

    #[test]
    fn the_limiter_allows_bursts_of_ten_then_five_a_second() {
        let mut l = Limiter::default();
        let t0 = l.at;
        assert_eq!((0..12).filter(|_| l.allow_at(t0)).count(), 10);
        assert!(
            l.allow_at(t0 + Duration::from_millis(200)),
            "one token every 200 ms"
        );
        assert!(!l.allow_at(t0 + Duration::from_millis(250)));
    }

    #[tokio::test]
    async fn a_new_pod_directory_wakes_the_pod_sync() {
        let root = tempfile::tempdir().unwrap();
        let cgroups = Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
        let dirs = qos_dirs(&cgroups);
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let notify = Arc::new(Notify::new());
        let shutdown = Shutdown::new();
        let task = tokio::spawn(run(dirs.clone(), notify.clone(), shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::create_dir(dirs[2].join("not-a-pod")).unwrap();
        std::fs::create_dir(dirs[1].join("pod1234")).unwrap();
        tokio::time::timeout(Duration::from_secs(5), notify.notified())
            .await
            .expect("woken by the pod directory");
        shutdown.begin_drain();
        task.await.unwrap().unwrap();
    }
}
