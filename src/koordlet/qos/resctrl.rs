//! resctrl (`pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile.go`): LLC ways (CAT) and memory bandwidth (MBA) per QoS group
//! `LSR`, `LS`, `BE` under `<sys>/fs/resctrl`, and the tasks of pods whose class enables
//! `resctrlQOS` moved into their group. Where the CPU has `cat_l3`/`mba` but resctrl is not
//! mounted, the koordlet mounts it at `<sys>/fs/resctrl` first, as Koordinator does; hosts
//! without the flags, or where the mount fails, are skipped with one warning.

use std::collections::BTreeSet;
use std::path::Path;

use super::context::{QosCtx, count};
use super::executor::Executor;
use super::runner::{Entry, Round, Strategy};
use crate::api::extension::qos::{QoSClass, pod_qos_class_with_default};
use crate::api::slo::nodeslo::{ResctrlQOS, ResourceQOS};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::os::Resource;
use crate::os::knob;
use crate::os::system::Host;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

pub const GROUPS: [&str; 3] = ["LSR", "LS", "BE"];

/// `extension.AnnotationResctrl`: a pod with it has a group of its own (`resctrlpod.rs`),
/// not its class's.
pub const ANNOTATION_RESCTRL: &str = "node.koordinator.sh/resctrl";

/// The L3 mask for a way range: ways = bit length of the root mask (contiguous ones),
/// start = ⌈ways × start%⌉, end = ⌈ways × end%⌉, mask = 2^end − 2^start.
pub fn l3_mask(root_cbm_hex: &str, start_pct: i64, end_pct: i64) -> Option<String> {
    let root = u64::from_str_radix(root_cbm_hex.trim(), 16).ok()?;
    if root == 0 || (root + 1) & root != 0 {
        return None;
    }
    let ways = 64 - root.leading_zeros() as i64;
    let at = |p: i64| (ways * p.clamp(0, 100) + 99) / 100;
    let (start, end) = (at(start_pct), at(end_pct));
    if end <= start {
        return None;
    }
    Some(format!("{:x}", (1u64 << end) - (1u64 << start)))
}

/// MB value: Intel rounds the percent up to a multiple of 10; AMD uses an absolute value.
pub fn mb_value(pct: i64, amd: bool) -> i64 {
    let pct = pct.clamp(0, 100);
    if amd {
        if pct == 100 {
            2048
        } else {
            (25.0 * 8.0 * 0.8 * pct as f64 / 100.0) as i64
        }
    } else {
        (pct + 9) / 10 * 10
    }
}

/// The schemata file content for one group.
pub fn schemata(
    q: &ResctrlQOS,
    root_cbm: &str,
    l3_ids: &[u32],
    amd: bool,
    with_mb: bool,
) -> Option<String> {
    let mask = l3_mask(
        root_cbm,
        q.cat_range_start_percent.unwrap_or(0),
        q.cat_range_end_percent.unwrap_or(100),
    )?;
    let join =
        |f: &dyn Fn(u32) -> String| l3_ids.iter().map(|id| f(*id)).collect::<Vec<_>>().join(";");
    let mut out = format!("L3:{}\n", join(&|id| format!("{id}={mask}")));
    if with_mb {
        let mb = mb_value(q.mba_percent.unwrap_or(100), amd);
        out.push_str(&format!("MB:{}\n", join(&|id| format!("{id}={mb}"))));
    }
    Some(out)
}

/// Koordinator's defaults per group (BE: ways 0–30 %).
fn defaults(group: &str) -> ResctrlQOS {
    ResctrlQOS {
        cat_range_start_percent: Some(0),
        cat_range_end_percent: Some(if group == "BE" { 30 } else { 100 }),
        mba_percent: Some(100),
    }
}

/// (config, enabled) of a group from the NodeSLO.
pub fn group_config(states: &States, group: &str) -> (ResctrlQOS, bool) {
    let s = &states.slo().resource_qos;
    let class: Option<&ResourceQOS> = match group {
        "LSR" => s.lsr_class.as_ref(),
        "LS" => s.ls_class.as_ref(),
        _ => s.be_class.as_ref(),
    };
    let cfg = class.and_then(|c| c.resctrl_qos.clone());
    let enabled = cfg.as_ref().is_some_and(|c| c.enable == Some(true));
    let q = cfg
        .map(|c| crate::api::sloconfig::overlay(&defaults(group), &c.resctrl_qos))
        .unwrap_or_else(|| defaults(group));
    (q, enabled)
}

fn group_of(class: QoSClass) -> Option<&'static str> {
    match class {
        QoSClass::Lse | QoSClass::Lsr => Some("LSR"),
        QoSClass::Ls => Some("LS"),
        QoSClass::Be => Some("BE"),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResctrlError {
    #[error(transparent)]
    File(#[from] crate::os::files::FileError),
    #[error(transparent)]
    Write(#[from] super::executor::ExecError),
}

fn write_if_changed(ex: &Executor, path: &Path, content: &str) -> Result<bool, ResctrlError> {
    let current = knob::read_opt(path);
    Ok(ex.write_file(path, content, current.as_deref())?)
}

/// Whether the host can do resctrl: CPU flags and a mounted resctrl filesystem.
pub fn supported(host: &Host) -> Result<bool, crate::os::system::HostError> {
    supported_or_mount(host, &|_| Ok(()))
}

/// [`supported`], mounting the resctrl filesystem first with `mount` when the CPU has the
/// flags but it is not mounted (Koordinator's `CheckAndTryEnableResctrlCat`). A failed
/// mount is logged and counts as unsupported.
pub fn supported_or_mount(
    host: &Host,
    mount: &dyn Fn(&Path) -> std::io::Result<()>,
) -> Result<bool, crate::os::system::HostError> {
    let (_, flags) = host.cpu_flags()?;
    if !flags.iter().any(|f| f == "cat_l3" || f == "mba") {
        return Ok(false);
    }
    let cbm = host.resctrl_root().join("info/L3/cbm_mask");
    if cbm.exists() {
        return Ok(true);
    }
    match mount(&host.resctrl_root()) {
        Ok(()) => tracing::info!(root = %host.resctrl_root().display(), "resctrl mounted"),
        Err(e) => {
            tracing::warn!(root = %host.resctrl_root().display(), error = %e, "resctrl could not be mounted")
        }
    }
    Ok(cbm.exists())
}

/// One round: groups, schemata and tasks. Returns the files written.
pub fn pass(states: &States, host: &Host, ex: &Executor) -> Result<Vec<String>, ResctrlError> {
    let cgroups = ex.cgroups();
    let root = host.resctrl_root();
    let (vendor, flags) = host.cpu_flags().unwrap_or_default();
    let amd = vendor.contains("AMD");
    let with_mb = flags.iter().any(|f| f == "mba");
    let cbm = knob::read(&root.join("info/L3/cbm_mask"))?;
    let mut ids = host.l3_cache_ids();
    if ids.is_empty() {
        ids.push(0);
    }
    let mut written = Vec::new();
    for g in GROUPS {
        let dir = root.join(g);
        knob::ensure_dir(&dir)?;
        let (q, enabled) = group_config(states, g);
        if let Some(content) = schemata(&q, &cbm, &ids, amd, with_mb)
            && write_if_changed(ex, &dir.join("schemata"), &content)?
        {
            written.push(format!("{g}/schemata"));
        }
        if !enabled {
            continue;
        }
        let mut threads = Vec::new();
        for pod in states
            .pods
            .iter()
            .filter(|p| group_of(pod_qos_class_with_default(&p.pod)) == Some(g))
        {
            let annotations = pod.pod.metadata.annotations.as_ref();
            if annotations.is_some_and(|a| a.contains_key(ANNOTATION_RESCTRL)) {
                continue;
            }
            for c in &pod.containers {
                let t = cgroups.read(Resource::Tasks, &c.dir).unwrap_or_default();
                threads.extend(t.lines().map(str::to_string));
            }
        }
        let moved = move_tasks(ex, &dir.join("tasks"), &threads);
        written.extend(std::iter::repeat_n(format!("{g}/tasks"), moved));
    }
    Ok(written)
}

/// Writes each task not yet in the group's `tasks` file (the kernel takes one id per
/// write); how many were written.
pub(super) fn move_tasks(ex: &Executor, path: &Path, tasks: &[String]) -> usize {
    let present: BTreeSet<String> = knob::read_opt(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    tasks
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty() && !present.contains(*t))
        .filter(|t| ex.write_file(path, t, None).unwrap_or(false))
        .count()
}

/// RdtResctrl every second, when the host supports it (else one warning and done).
pub struct Resctrl {
    pub host: Host,
    pub ex: Arc<Executor>,
}

impl Strategy for Resctrl {
    fn name(&self) -> &'static str {
        "resctrl"
    }

    fn prepare(&mut self) -> bool {
        match supported_or_mount(&self.host, &crate::os::mount::resctrl) {
            Ok(true) => true,
            Ok(false) => {
                tracing::warn!(root = %self.host.resctrl_root().display(), "resctrl unsupported here (no cat_l3/mba or not mounted); LLC/MBA isolation skipped");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "resctrl support unknown; LLC/MBA isolation skipped");
                false
            }
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        match pass(states, &self.host, &self.ex) {
            Ok(written) => {
                for w in written {
                    count(ctx, "resctrl", w, 1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "resctrl round failed"),
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// RdtResctrl.
pub const ENTRY: Entry = Entry {
    gate: features::RDT_RESCTRL,
    build: |d| {
        Box::new(Resctrl {
            host: d.host.clone(),
            ex: d.executor.clone(),
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_bandwidth() {
        assert_eq!(
            l3_mask("7ff", 0, 30).as_deref(),
            Some("f"),
            "11 ways: ways 0..4"
        );
        assert_eq!(l3_mask("7ff", 0, 100).as_deref(), Some("7ff"));
        assert_eq!(l3_mask("fffff", 50, 100).as_deref(), Some("ffc00"));
        assert!(l3_mask("7f3", 0, 100).is_none(), "not contiguous");
        assert!(l3_mask("ff", 50, 50).is_none(), "empty range");
        assert_eq!((mb_value(35, false), mb_value(100, false)), (40, 100));
        assert_eq!((mb_value(100, true), mb_value(50, true)), (2048, 80));
    }

    #[test]
    fn schemata_per_cache_and_tasks_on_a_fake_tree() {
        let q = defaults("BE");
        assert_eq!(
            schemata(&q, "7ff", &[0, 1], false, true).unwrap(),
            "L3:0=f;1=f\nMB:0=100;1=100\n"
        );
        let proc_root = tempfile::tempdir().unwrap();
        let sys_root = tempfile::tempdir().unwrap();
        std::fs::write(
            proc_root.path().join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu cat_l3 mba\n",
        )
        .unwrap();
        let host = Host::new(proc_root.path(), sys_root.path());
        assert_eq!(
            supported(&host).map_err(|e| e.to_string()),
            Ok(false),
            "not mounted"
        );
        std::fs::create_dir_all(host.resctrl_root().join("info/L3")).unwrap();
        std::fs::write(host.resctrl_root().join("info/L3/cbm_mask"), "7ff\n").unwrap();
        assert_eq!(supported(&host).map_err(|e| e.to_string()), Ok(true));
        let never = |_: &Path| -> std::io::Result<()> { panic!("mounted already: no mount") };
        assert_eq!(supported_or_mount(&host, &never).ok(), Some(true));
        let cg = crate::os::Cgroups::new(
            sys_root.path(),
            crate::os::Version::V1,
            crate::os::Driver::Cgroupfs,
            "",
        );
        let ex = Executor::new(cg, std::time::Duration::from_secs(60));
        let written = pass(&States::default(), &host, &ex).unwrap();
        assert_eq!(written, ["LSR/schemata", "LS/schemata", "BE/schemata"]);
        assert_eq!(
            std::fs::read_to_string(host.resctrl_root().join("BE/schemata")).unwrap(),
            "L3:0=f\nMB:0=100\n"
        );
        assert!(
            pass(&States::default(), &host, &ex).unwrap().is_empty(),
            "unchanged: nothing written"
        );
        std::fs::write(
            proc_root.path().join("cpuinfo"),
            "processor\t: 0\nflags\t: fpu\n",
        )
        .unwrap();
        assert_eq!(
            supported(&host).map_err(|e| e.to_string()),
            Ok(false),
            "no cat_l3/mba"
        );
    }

    /// Not mounted: the koordlet mounts it (here a stand-in makes the files a mount would
    /// show) and checks again; a mount that fails leaves it unsupported.
    #[test]
    fn an_unmounted_resctrl_is_mounted_when_the_cpu_has_it() {
        let proc_root = tempfile::tempdir().unwrap();
        let sys_root = tempfile::tempdir().unwrap();
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu cat_l3\n";
        std::fs::write(proc_root.path().join("cpuinfo"), cpuinfo).unwrap();
        let host = Host::new(proc_root.path(), sys_root.path());
        let failing = |_: &Path| -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EPERM))
        };
        assert_eq!(supported_or_mount(&host, &failing).ok(), Some(false));
        let asked = std::cell::Cell::new(0);
        let mount = |root: &Path| {
            asked.set(asked.get() + 1);
            std::fs::create_dir_all(root.join("info/L3"))?;
            std::fs::write(root.join("info/L3/cbm_mask"), "7ff\n")
        };
        assert_eq!(supported_or_mount(&host, &mount).ok(), Some(true));
        assert_eq!(asked.get(), 1);
        assert_eq!(supported_or_mount(&host, &mount).ok(), Some(true));
        assert_eq!(asked.get(), 1, "mounted: not again");
    }
}
