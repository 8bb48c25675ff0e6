//! blkio for the BE class (`pkg/koordlet/qosmanager/plugins/blkio/blkio_reconcile.go`, cgroup v1): throttle read/write IOPS and
//! bytes per device and the cost weight at the besteffort QoS directory, from
//! `beClass.blkioQOS.blocks` of type `device` or `volumegroup`, each resolved to the disk
//! under it with NodeStorageInfoCollector's maps (a partition's disk, a group's disk; with
//! no scan yet, a device's own number from sysfs). Devices no longer configured are reset
//! to 0 (unlimited). A block that resolves to no disk is skipped (Koordinator skips the
//! whole class). Not yet: `podvolume` blocks, the per-pod annotation, root iocost
//! (`blkio.cost.qos`/`model`).

use std::collections::BTreeMap;
use std::path::Path;

use super::context::{QosCtx, count};
use super::executor::Executor;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::qos::KubeQoS;
use crate::api::slo::nodeslo::BlockCfg;
use crate::koordlet::collectors::node_storage_info::NodeStorageInfo;
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::os::storage::LocalStorageInfo;
use crate::os::system::Host;
use crate::os::{Subsystem, Version};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

const THROTTLE: [&str; 4] = [
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
];

/// The `major:minor` of the disk under a `device` or `volumegroup` block
/// (`getDiskNumberFromBlockCfg`).
pub fn disk_number(
    block: &BlockCfg,
    storage: Option<&LocalStorageInfo>,
    host: &Host,
) -> Option<String> {
    let name = block.name.as_deref()?;
    let kind = block.block_type.as_deref().unwrap_or("device");
    let Some(s) = storage else {
        return (kind == "device")
            .then(|| host.block_device(name))
            .flatten();
    };
    let disk = match kind {
        "device" => s.disk_of_device(name),
        "volumegroup" => s.disk_of_volume_group(name),
        _ => None,
    };
    disk.and_then(|d| s.number(d)).map(str::to_string)
}

/// file → (device → value) wanted for the BE class.
pub fn wanted(
    blocks: &[BlockCfg],
    storage: Option<&LocalStorageInfo>,
    host: &Host,
) -> BTreeMap<&'static str, BTreeMap<String, i64>> {
    let mut out: BTreeMap<&'static str, BTreeMap<String, i64>> = BTreeMap::new();
    for b in blocks {
        let Some(dev) = disk_number(b, storage, host) else {
            tracing::debug!(block = ?b.name, kind = ?b.block_type, "blkio block resolves to no disk");
            continue;
        };
        let c = &b.io_cfg;
        for (file, v) in THROTTLE
            .iter()
            .zip([c.read_iops, c.write_iops, c.read_bps, c.write_bps])
        {
            out.entry(file)
                .or_default()
                .insert(dev.clone(), v.unwrap_or(0).max(0));
        }
        out.entry("blkio.cost.weight").or_default().insert(
            dev.clone(),
            c.io_weight_percent.unwrap_or(100).clamp(1, 100),
        );
    }
    out
}

/// Devices listed in a throttle file (`maj:min value` lines).
fn current(path: &Path) -> BTreeMap<String, i64> {
    crate::os::knob::read_opt(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// One round; returns "file dev value" for every line written.
pub fn pass(
    states: &States,
    storage: Option<&LocalStorageInfo>,
    host: &Host,
    ex: &Executor,
) -> Vec<String> {
    let cgroups = ex.cgroups();
    if cgroups.version() != Version::V1 {
        return Vec::new();
    }
    let cfg = states
        .slo()
        .resource_qos
        .be_class
        .as_ref()
        .and_then(|c| c.blkio_qos.clone())
        .filter(|c| c.enable == Some(true));
    let blocks = cfg.and_then(|c| c.blkio_qos.blocks).unwrap_or_default();
    let mut want = wanted(&blocks, storage, host);
    let dir = cgroups.dir_path(Subsystem::Blkio, &cgroups.qos_dir(KubeQoS::BestEffort));
    let mut written = Vec::new();
    for file in THROTTLE {
        let path = dir.join(file);
        if !path.exists() {
            continue;
        }
        let have = current(&path);
        let mut target = want.remove(file).unwrap_or_default();
        // Devices no longer configured go back to unlimited.
        for dev in have.keys() {
            target.entry(dev.clone()).or_insert(0);
        }
        for (dev, v) in target {
            let already = format!("{dev} {}", have.get(&dev).copied().unwrap_or(0));
            let line = format!("{dev} {v}");
            match ex.write_file(&path, &line, Some(&already)) {
                Ok(true) => written.push(format!("{file} {line}")),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "blkio value rejected"),
            }
        }
    }
    let weight = dir.join("blkio.cost.weight");
    if let Some(w) = want
        .remove("blkio.cost.weight")
        .and_then(|m| m.into_values().max())
        && weight.exists()
        && let Some(current) = crate::os::knob::read_opt(&weight)
        && ex
            .write_file(&weight, &w.to_string(), Some(&current))
            .unwrap_or(false)
    {
        written.push(format!("blkio.cost.weight {w}"));
    }
    written
}

/// BlkIOReconcile every second (cgroup v1): BE block-device throttles and weight.
pub struct Blkio {
    pub host: Host,
    pub ex: Arc<Executor>,
    pub storage: NodeStorageInfo,
}

impl Strategy for Blkio {
    fn name(&self) -> &'static str {
        "blkio"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        async move {
            let node = states
                .node
                .as_ref()
                .and_then(|n| n.metadata.name.as_deref());
            let storage = self.storage.current(&ctx.metrics, node.unwrap_or("")).await;
            for w in pass(states, storage.as_deref(), &self.host, &self.ex) {
                tracing::info!(change = %w, "blkio updated");
                let what = w.split_whitespace().next().unwrap_or("").to_string();
                count(ctx, "blkio", what, 1);
            }
            Round::DONE
        }
        .boxed()
    }
}

/// BlkIOReconcile.
pub const ENTRY: Entry = Entry {
    gate: features::BLK_IO_RECONCILE,
    build: |d| {
        Box::new(Blkio {
            host: d.host.clone(),
            ex: d.executor.clone(),
            storage: NodeStorageInfo::new(d.storage_info_interval),
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::Driver;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn be_throttles_per_device_and_resets_stale_ones() {
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("block/sdb")).unwrap();
        std::fs::write(sys.path().join("block/sdb/dev"), "8:16\n").unwrap();
        let host = Host::new("/proc", sys.path());
        let root = tempfile::tempdir().unwrap();
        let cg = crate::os::Cgroups::new(root.path(), Version::V1, Driver::Cgroupfs, "");
        let dir = cg.dir_path(Subsystem::Blkio, &cg.qos_dir(KubeQoS::BestEffort));
        std::fs::create_dir_all(&dir).unwrap();
        for f in THROTTLE {
            std::fs::write(dir.join(f), "").unwrap();
        }
        std::fs::write(dir.join("blkio.throttle.read_iops_device"), "8:32 500\n").unwrap();
        let slo = json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": true,
            "blocks": [{"name": "/dev/sdb", "type": "device", "ioCfg": {"readIOPS": 100, "writeBPS": 1048576}}, {"name": "/dev/ghost", "ioCfg": {"readIOPS": 1}}]}}}}});
        let states = States {
            node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
            ..Default::default()
        };
        let ex = Executor::new(cg.clone(), std::time::Duration::from_secs(60));
        let written = pass(&states, None, &host, &ex);
        assert!(
            written.contains(&"blkio.throttle.read_iops_device 8:16 100".to_string()),
            "{written:?}"
        );
        assert!(written.contains(&"blkio.throttle.write_bps_device 8:16 1048576".to_string()));
        assert!(
            written.contains(&"blkio.throttle.read_iops_device 8:32 0".to_string()),
            "stale device reset"
        );
        assert!(
            !written.iter().any(|w| w.contains("ghost")),
            "unknown devices are skipped"
        );
    }

    fn block(name: &str, kind: &str) -> BlockCfg {
        serde_json::from_value(json!({"name": name, "type": kind})).unwrap()
    }

    #[test]
    fn blocks_resolve_through_the_storage_scan() {
        let mut s = LocalStorageInfo::default();
        s.scan_devices_output(
            "NAME=\"vdb\" TYPE=\"disk\" MAJ:MIN=\"253:16\"\nNAME=\"vdc\" TYPE=\"disk\" MAJ:MIN=\"253:32\"\nNAME=\"vdc3\" TYPE=\"part\" MAJ:MIN=\"253:35\"",
        )
        .unwrap();
        s.scan_volume_groups_output("yoda-pool0 1 /dev/vdc3")
            .unwrap();
        let host = Host::new("/nonexistent-proc", "/nonexistent-sys");
        let number = |b: BlockCfg| disk_number(&b, Some(&s), &host);
        assert_eq!(
            number(block("/dev/vdb", "device")).as_deref(),
            Some("253:16")
        );
        assert_eq!(
            number(block("/dev/vdc3", "device")).as_deref(),
            Some("253:32"),
            "a partition throttles its disk"
        );
        assert_eq!(
            number(block("yoda-pool0", "volumegroup")).as_deref(),
            Some("253:32")
        );
        assert_eq!(number(block("nope", "volumegroup")), None);
        assert_eq!(number(block("data", "podvolume")), None, "not yet");
        assert_eq!(
            disk_number(&block("yoda-pool0", "volumegroup"), None, &host),
            None,
            "volume groups need a scan"
        );
    }

    #[tokio::test]
    async fn the_collector_rescans_each_interval_and_keeps_the_last_good_scan() {
        use crate::koordlet::collectors::node_storage_info::NodeStorageInfo;
        use std::sync::atomic::{AtomicU32, Ordering};
        static CALLS: AtomicU32 = AtomicU32::new(0);
        fn scan() -> Result<LocalStorageInfo, crate::os::storage::StorageError> {
            if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
                let mut s = LocalStorageInfo::default();
                s.scan_devices_output("NAME=\"vda\" TYPE=\"disk\" MAJ:MIN=\"253:0\"")?;
                return Ok(s);
            }
            Err(crate::os::storage::StorageError::Exec {
                program: "lsblk".into(),
                reason: "gone".into(),
            })
        }
        let metrics = crate::koordlet::metrics::KoordletMetrics::default();
        let mut c = NodeStorageInfo::with_scan(std::time::Duration::ZERO, scan);
        let first = c.current(&metrics, "n").await.unwrap();
        assert_eq!(first.number("/dev/vda"), Some("253:0"));
        let second = c.current(&metrics, "n").await.unwrap();
        assert_eq!(second, first, "a failed scan keeps the last good one");
        assert_eq!(
            CALLS.load(Ordering::SeqCst),
            2,
            "rescanned at a zero interval"
        );
        let count = |status: &str| {
            let l = vec![("node", "n".to_string()), ("status", status.to_string())];
            metrics.storage_info_status.get_or_create(&l).get()
        };
        assert_eq!((count("succeeded"), count("failed")), (1, 1));
    }
}
