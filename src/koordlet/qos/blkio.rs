//! BlkIOReconcile (`pkg/koordlet/qosmanager/plugins/blkio/blkio_reconcile.go`, cgroup v1),
//! every second, for three kinds of target:
//! - the BE class (`beClass.blkioQOS`, at the besteffort QoS directory) and each running pod
//!   with a QoS label and a `koordinator.sh/blkioQOS` annotation (at the pod's directory):
//!   per device, read/write IOPS and bytes throttles and `blkio.cost.weight`;
//! - the cgroup root (`cgroupRoot.blkioQOS`): per device, iocost's `blkio.cost.qos` and
//!   `blkio.cost.model` (`ctrl=auto`, or the user's model).
//!
//! A block names a `device` (a partition throttles its disk), a `volumegroup` (the disk
//! under it) or, in a pod's annotation, a `podvolume`: the pod's volume of that name, a PVC
//! (through its bound volume's name) or a CSI ephemeral volume, found by the disk under its
//! kubelet mount point (`<kubelet root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount`)
//! in NodeStorageInfoCollector's maps. With no scan yet a device is found by its own number
//! in sysfs. As in Koordinator, a target with a block that resolves to no disk is left
//! alone that round, and devices a target's files list that no block names any more go back
//! to the defaults (unlimited, weight 100, iocost `enable=0`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::context::{QosCtx, count};
use super::executor::Executor;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::qos::{KubeQoS, QoSClass, pod_qos_class};
use crate::api::slo::nodeslo::{BlkIOQOS, BlockCfg, IOCfg};
use crate::koordlet::collectors::node_storage_info::NodeStorageInfo;
use crate::koordlet::features;
use crate::koordlet::informer::{PodMeta, States};
use crate::os::storage::LocalStorageInfo;
use crate::os::system::Host;
use crate::os::{Subsystem, Version};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

/// The pod annotation with a pod's own blocks (`slov1alpha1.AnnotationPodBlkioQoS`).
pub const ANNOTATION_POD_BLKIO_QOS: &str = "koordinator.sh/blkioQOS";

const THROTTLE: [&str; 4] = [
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
];
const WEIGHT: &str = "blkio.cost.weight";
const COST_QOS: &str = "blkio.cost.qos";
const COST_MODEL: &str = "blkio.cost.model";

/// Where a pod's volumes are: the kubelet's root directory and a PVC's bound volume name.
pub struct PodVolumes<'a> {
    pub kubelet_root: &'a Path,
    /// (namespace, claim) → the PVC's `spec.volumeName`.
    pub volume_name: &'a dyn Fn(&str, &str) -> Option<String>,
}

/// The `major:minor` of the disk under a block (`getDiskNumberFromBlockCfg`); `pod` for
/// `podvolume` blocks.
pub fn disk_number(
    block: &BlockCfg,
    storage: Option<&LocalStorageInfo>,
    host: &Host,
    pod: Option<(&PodMeta, &PodVolumes)>,
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
        "podvolume" => {
            let (meta, volumes) = pod?;
            let mount = volume_mount(meta, name, volumes)?;
            s.disk_of_mount_point(&mount.to_string_lossy())
        }
        _ => None,
    };
    disk.and_then(|d| s.number(d)).map(str::to_string)
}

/// The kubelet mount point of the pod's volume `name`: a PVC's bound volume or a CSI
/// ephemeral volume (other kinds have none).
fn volume_mount(meta: &PodMeta, name: &str, volumes: &PodVolumes) -> Option<PathBuf> {
    let spec = meta.pod.spec.as_ref()?;
    let volume = spec.volumes.iter().flatten().find(|v| v.name == name)?;
    let dir = if let Some(pvc) = &volume.persistent_volume_claim {
        (volumes.volume_name)(&meta.namespace, &pvc.claim_name)?
    } else if volume.csi.is_some() {
        volume.name.clone()
    } else {
        return None;
    };
    let pods = volumes.kubelet_root.join("pods").join(&meta.uid);
    Some(
        pods.join("volumes/kubernetes.io~csi")
            .join(dir)
            .join("mount"),
    )
}

/// What a target writes: throttles and weight (BE class, pods) or iocost (the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Throttle,
    Root,
}

impl Kind {
    /// Every file the kind writes.
    fn files(self) -> &'static [&'static str] {
        match self {
            Kind::Throttle => Kind::Throttle.owned(),
            Kind::Root => &[COST_QOS, COST_MODEL],
        }
    }

    /// The files whose listed devices this target owns (`getBlkIORecorder` /
    /// `getDiskConfigRecorder`).
    fn owned(self) -> &'static [&'static str] {
        match self {
            Kind::Throttle => &[THROTTLE[0], THROTTLE[1], THROTTLE[2], THROTTLE[3], WEIGHT],
            Kind::Root => &[COST_QOS],
        }
    }

    /// (file, line) for a block on its disk.
    fn lines(self, c: &IOCfg, dev: &str) -> Vec<(&'static str, String)> {
        let or = |v: Option<i64>, d: i64| v.unwrap_or(d);
        match self {
            Kind::Throttle => {
                let values = [c.read_iops, c.write_iops, c.read_bps, c.write_bps];
                let mut out: Vec<_> = THROTTLE
                    .iter()
                    .zip(values)
                    .map(|(f, v)| (*f, format!("{dev} {}", or(v, 0))))
                    .collect();
                out.push((WEIGHT, format!("{dev} {}", or(c.io_weight_percent, 100))));
                out
            }
            Kind::Root => {
                let qos = format!(
                    "{dev} enable=1 ctrl=user rpct={} rlat={} wpct={} wlat={}",
                    or(c.read_latency_percent, 95),
                    or(c.read_latency, 3000),
                    or(c.write_latency_percent, 95),
                    or(c.write_latency, 3000),
                );
                let model = if c.enable_user_model == Some(true) {
                    format!(
                        "{dev} ctrl=user rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
                        or(c.model_read_bps, 0),
                        or(c.model_read_seq_iops, 0),
                        or(c.model_read_rand_iops, 0),
                        or(c.model_write_bps, 0),
                        or(c.model_write_seq_iops, 0),
                        or(c.model_write_rand_iops, 0),
                    )
                } else {
                    format!("{dev} ctrl=auto")
                };
                vec![(COST_QOS, qos), (COST_MODEL, model)]
            }
        }
    }

    /// (file, line) putting a device no block names back to the default.
    fn reset(self, dev: &str) -> Vec<(&'static str, String)> {
        match self {
            Kind::Throttle => Kind::Throttle.lines(&IOCfg::default(), dev),
            Kind::Root => vec![(COST_QOS, format!("{dev} enable=0"))],
        }
    }
}

/// Device (`maj:min`) → the rest of its line, for the lines of a per-device file.
fn per_device(path: &Path) -> BTreeMap<String, String> {
    crate::os::knob::read_opt(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (dev, rest) = l.trim().split_once(' ')?;
            let (major, minor) = dev.split_once(':')?;
            let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            (numeric(major) && numeric(minor)).then(|| (dev.to_string(), rest.trim().to_string()))
        })
        .collect()
}

/// Does the device's current line already say what `want` says? Settings are compared by
/// key and as numbers (the kernel shows `rpct=95.00` for a written `rpct=95`); a bare value
/// by position.
fn already(want: &str, have: &str) -> bool {
    let setting = |t: &str| {
        t.split_once('=')
            .map(|(k, v)| (k.to_string(), v.to_string()))
    };
    let have_kv: HashMap<String, String> = have.split_whitespace().filter_map(setting).collect();
    let same = |a: &str, b: &str| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    };
    let mut bare = have.split_whitespace().filter(|t| !t.contains('='));
    want.split_whitespace().all(|t| match setting(t) {
        Some((k, v)) => have_kv.get(&k).is_some_and(|h| same(&v, h)),
        None => bare.next().is_some_and(|h| same(t, h)),
    })
}

/// One target's round (`updateBlkIOConfig`): the blocks' lines and the resets of devices
/// no block names any more, or nothing when a block resolves to no disk. Returns the
/// lines written as "file line".
fn update_target(
    ex: &Executor,
    dir: &Path,
    kind: Kind,
    blocks: &[BlockCfg],
    resolve: &dyn Fn(&BlockCfg) -> Option<String>,
) -> Result<Vec<String>, String> {
    let current: HashMap<&str, BTreeMap<String, String>> = kind
        .files()
        .iter()
        .map(|f| (*f, per_device(&dir.join(f))))
        .collect();
    let mut stale: BTreeMap<String, bool> = kind
        .owned()
        .iter()
        .flat_map(|f| current[f].keys())
        .map(|d| (d.clone(), true))
        .collect();
    let mut updates = Vec::new();
    for b in blocks {
        let dev = resolve(b).ok_or_else(|| {
            format!(
                "block {:?} ({:?}) resolves to no disk",
                b.name, b.block_type
            )
        })?;
        stale.insert(dev.clone(), false);
        updates.extend(kind.lines(&b.io_cfg, &dev));
    }
    for dev in stale.iter().filter(|(_, s)| **s).map(|(d, _)| d) {
        updates.extend(kind.reset(dev));
    }
    let mut written = Vec::new();
    for (file, line) in updates {
        let path = dir.join(file);
        if !path.exists() {
            continue;
        }
        let (dev, want) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let have = current.get(file).and_then(|m| m.get(dev));
        if have.is_some_and(|h| already(want, h)) {
            continue;
        }
        let shown = have.map(|h| format!("{dev} {h}"));
        match ex.write_file(&path, &line, shown.as_deref()) {
            Ok(true) => written.push(format!("{file} {line}")),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "blkio value rejected"),
        }
    }
    Ok(written)
}

/// A pod's own blocks: `None` without the annotation (the pod is left alone), an empty
/// list for an empty one (its devices go back to the defaults).
fn pod_blocks(pod: &PodMeta) -> Option<Result<Vec<BlockCfg>, String>> {
    let raw = pod
        .pod
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_POD_BLKIO_QOS)?;
    if raw.is_empty() {
        return Some(Ok(Vec::new()));
    }
    Some(
        crate::api::decode::from_str::<BlkIOQOS>(raw)
            .map(|q| q.blocks.unwrap_or_default())
            .map_err(|e| format!("annotation {ANNOTATION_POD_BLKIO_QOS}: {e}")),
    )
}

/// Pods whose blocks this round applies: a QoS label and running, as Koordinator.
fn managed(pod: &PodMeta) -> bool {
    let running = pod.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    running && pod_qos_class(&pod.pod) != QoSClass::None
}

/// One round; returns "file line" for every line written.
pub fn pass(
    states: &States,
    storage: Option<&LocalStorageInfo>,
    host: &Host,
    ex: &Executor,
    volumes: &PodVolumes,
) -> Vec<String> {
    let cgroups = ex.cgroups();
    if cgroups.version() != Version::V1 {
        return Vec::new();
    }
    let mut written = Vec::new();
    let mut run = |what: &str, dir: PathBuf, kind, blocks: &[BlockCfg], pod: Option<&PodMeta>| {
        let resolve = |b: &BlockCfg| disk_number(b, storage, host, pod.map(|p| (p, volumes)));
        match update_target(ex, &dir, kind, blocks, &resolve) {
            Ok(w) => written.extend(w),
            Err(why) => tracing::warn!(target = what, %why, "blkio left as it is this round"),
        }
    };
    let rq = &states.slo().resource_qos;
    // A class without blkioQOS is not touched; one switched off has its devices reset.
    let blocks_of = |c: Option<&crate::api::slo::nodeslo::ResourceQOS>| {
        let cfg = c?.blkio_qos.as_ref()?;
        let on = cfg.enable == Some(true);
        Some(if on {
            cfg.blkio_qos.blocks.clone().unwrap_or_default()
        } else {
            Vec::new()
        })
    };
    if let Some(blocks) = blocks_of(rq.be_class.as_ref()) {
        let dir = cgroups.dir_path(Subsystem::Blkio, &cgroups.qos_dir(KubeQoS::BestEffort));
        run("BE class", dir, Kind::Throttle, &blocks, None);
    }
    if let Some(blocks) = blocks_of(rq.cgroup_root.as_ref()) {
        let dir = cgroups.dir_path(Subsystem::Blkio, &crate::os::CgroupDir::new(""));
        run("cgroup root", dir, Kind::Root, &blocks, None);
    }
    for pod in states.pods.iter().filter(|p| managed(p)) {
        match pod_blocks(pod) {
            None => {}
            Some(Err(e)) => tracing::warn!(pod = %pod.name, error = %e, "blkio left as it is"),
            Some(Ok(blocks)) => {
                let dir = cgroups.dir_path(Subsystem::Blkio, &pod.dir);
                run(&pod.name, dir, Kind::Throttle, &blocks, Some(pod));
            }
        }
    }
    written
}

/// The PVCs the managed pods' `podvolume` blocks name: (namespace, claim).
fn claims(states: &States) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for pod in states.pods.iter().filter(|p| managed(p)) {
        let Some(Ok(blocks)) = pod_blocks(pod) else {
            continue;
        };
        let volumes = pod.pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        for b in blocks
            .iter()
            .filter(|b| b.block_type.as_deref() == Some("podvolume"))
        {
            let claim = volumes
                .into_iter()
                .flatten()
                .filter(|v| b.name.as_deref() == Some(v.name.as_str()))
                .find_map(|v| v.persistent_volume_claim.as_ref());
            if let Some(c) = claim {
                out.push((pod.namespace.clone(), c.claim_name.clone()));
            }
        }
    }
    out
}

/// A PVC's bound volume is asked of the API server at most this often (Koordinator keeps
/// a watch of every PVC in the cluster; the koordlet asks only for the claims its pods'
/// blocks name).
const VOLUME_NAME_TTL: Duration = Duration::from_secs(60);

/// BlkIOReconcile every second (cgroup v1).
pub struct Blkio {
    pub host: Host,
    pub ex: Arc<Executor>,
    pub storage: NodeStorageInfo,
    pub client: kube::Client,
    pub kubelet_root: PathBuf,
    /// (namespace, claim) → its bound volume and when it was asked.
    volume_names: HashMap<(String, String), (Option<String>, Instant)>,
}

impl Blkio {
    async fn refresh_volume_names(&mut self, states: &States) {
        let wanted = claims(states);
        self.volume_names.retain(|k, _| wanted.contains(k));
        for key in wanted {
            if self
                .volume_names
                .get(&key)
                .is_some_and(|(_, at)| at.elapsed() < VOLUME_NAME_TTL)
            {
                continue;
            }
            let api: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
                kube::Api::namespaced(self.client.clone(), &key.0);
            let name = match api.get_opt(&key.1).await {
                Ok(pvc) => pvc.and_then(|p| p.spec?.volume_name),
                Err(e) => {
                    tracing::debug!(claim = %key.1, error = %e, "PVC not read");
                    None
                }
            };
            self.volume_names.insert(key, (name, Instant::now()));
        }
    }
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
            self.refresh_volume_names(states).await;
            let names = &self.volume_names;
            let volume_name = |ns: &str, claim: &str| {
                let (name, _) = names.get(&(ns.to_string(), claim.to_string()))?;
                name.clone()
            };
            let volumes = PodVolumes {
                kubelet_root: &self.kubelet_root,
                volume_name: &volume_name,
            };
            for w in pass(states, storage.as_deref(), &self.host, &self.ex, &volumes) {
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
            client: d.client.clone(),
            kubelet_root: d.kubelet_root.clone(),
            volume_names: HashMap::new(),
        })
    },
};

#[cfg(test)]
#[path = "blkio_tests.rs"]
mod tests;
