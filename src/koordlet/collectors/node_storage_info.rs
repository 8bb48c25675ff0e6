//! NodeStorageInfoCollector (`metricsadvisor/collectors/nodestorageinfo`): the node's
//! disks, partitions, LVM groups and mount points (`os::storage`), rescanned every
//! `-collect-node-storage-info-interval` (1 s). It makes no series, and its one reader is
//! blkio QoS, so it runs inside BlkIOReconcile's rounds under the same gate, as
//! Koordinator enables it, rather than in the advisor's pass; each scan counts in
//! `koordlet_collect_node_local_storage_info_status{node,status}`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::koordlet::metrics::KoordletMetrics;
use crate::os::storage::{LocalStorageInfo, StorageError};

pub struct NodeStorageInfo {
    interval: Duration,
    last_scan: Option<Instant>,
    info: Option<Arc<LocalStorageInfo>>,
    scan: fn() -> Result<LocalStorageInfo, StorageError>,
    /// The last failure warned about: a node without `lsblk` warns once, not every second.
    last_error: Option<String>,
}

impl NodeStorageInfo {
    pub fn new(interval: Duration) -> Self {
        Self::with_scan(interval, LocalStorageInfo::scan)
    }

    /// With another scan (tests).
    pub fn with_scan(
        interval: Duration,
        scan: fn() -> Result<LocalStorageInfo, StorageError>,
    ) -> Self {
        Self {
            interval,
            last_scan: None,
            info: None,
            scan,
            last_error: None,
        }
    }

    /// The latest scan, rescanning once the interval has passed. A failed scan keeps the
    /// last good one (Koordinator's key keeps its last value too) and is logged when its
    /// error is new.
    pub async fn current(
        &mut self,
        metrics: &KoordletMetrics,
        node: &str,
    ) -> Option<Arc<LocalStorageInfo>> {
        let due = self.last_scan.is_none_or(|t| t.elapsed() >= self.interval);
        if due {
            self.last_scan = Some(Instant::now());
            let scan = self.scan;
            let result = tokio::task::spawn_blocking(scan).await.unwrap_or_else(|e| {
                Err(StorageError::Exec {
                    program: "lsblk".into(),
                    reason: e.to_string(),
                })
            });
            metrics.collected_storage_info(node, result.is_ok());
            match result {
                Ok(info) => {
                    self.info = Some(Arc::new(info));
                    self.last_error = None;
                }
                Err(e) => {
                    let text = e.to_string();
                    if self.last_error.as_deref() != Some(&text) {
                        tracing::warn!(error = %text, "failed to collect node local storage info");
                    }
                    self.last_error = Some(text);
                }
            }
        }
        self.info.clone()
    }
}
