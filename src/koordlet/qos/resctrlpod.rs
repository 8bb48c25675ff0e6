//! Resctrl (gate `Resctrl`; Koordinator's `runtimehooks/hooks/resctrl`): a pod with the
//! `node.koordinator.sh/resctrl` annotation gets a resctrl group of its own,
//! `koordlet-<pod uid>`, with the LLC ways and memory bandwidth the annotation asks —
//! `{"llc": {"schemata": {"range": [start%, end%]}, "schemataPerCache": [{"cacheID": 0,
//! "range": [..]}]}, "mb": {"schemata": {"percent": 50}, "schemataPerCache": [..]}}` — and
//! its containers' tasks in it; the group goes when the pod or its annotation does.
//! Each second, as a reconciler (Koordinator also sets it from the sandbox and container
//! hooks; here a new container's tasks move within a second of starting). The RdtResctrl
//! class groups leave such pods alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Deserialize;

use super::context::{QosCtx, count};
use super::executor::Executor;
use super::resctrl::{ResctrlError, l3_mask, mb_value, move_tasks, supported_or_mount};
use super::runner::{Entry, Round, Strategy};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::os::Resource;
use crate::os::knob;
use crate::os::system::Host;

pub use super::resctrl::ANNOTATION_RESCTRL;
/// A pod's group is this and its UID (`ClosdIdPrefix`).
pub const CLOSID_PREFIX: &str = "koordlet-";

#[derive(Debug, Default, Deserialize)]
struct ResctrlConfig {
    #[serde(default)]
    llc: Part,
    #[serde(default)]
    mb: Part,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    schemata: SchemataConfig,
    #[serde(default)]
    schemata_per_cache: Vec<PerCache>,
}

#[derive(Debug, Default, Deserialize)]
struct SchemataConfig {
    #[serde(default)]
    percent: i64,
    #[serde(default)]
    range: Vec<i64>,
}

#[derive(Debug, Deserialize)]
struct PerCache {
    #[serde(default, rename = "cacheID")]
    cache_id: u32,
    #[serde(flatten)]
    schemata: SchemataConfig,
}

/// The hardware a group's schemata is computed for.
pub struct Rdt<'a> {
    /// The root's L3 mask (`info/L3/cbm_mask`), hex.
    pub cbm: &'a str,
    pub cache_ids: &'a [u32],
    pub amd: bool,
    pub mba: bool,
}

/// What the host's resctrl has, read once for a pass.
struct HostRdt {
    cbm: String,
    ids: Vec<u32>,
    amd: bool,
    mba: bool,
}

impl HostRdt {
    fn of(host: &Host, cbm: String) -> HostRdt {
        let (vendor, flags) = host.cpu_flags().unwrap_or_default();
        let mut ids = host.l3_cache_ids();
        if ids.is_empty() {
            ids.push(0);
        }
        HostRdt {
            cbm: cbm.trim().to_string(),
            ids,
            amd: vendor.contains("AMD"),
            mba: flags.iter().any(|f| f == "mba"),
        }
    }

    fn rdt(&self) -> Rdt<'_> {
        Rdt {
            cbm: &self.cbm,
            cache_ids: &self.ids,
            amd: self.amd,
            mba: self.mba,
        }
    }
}

/// A pod's schemata from its annotation (`ParseSchemata`): an `L3` line when every cache
/// has a mask, an `MB` line when every cache has a bandwidth (and the CPU has MBA).
pub fn pod_schemata(annotation: &str, rdt: &Rdt) -> Result<String, String> {
    let cfg: ResctrlConfig = serde_json::from_str(annotation)
        .map_err(|e| format!("annotation {ANNOTATION_RESCTRL}: {e}"))?;
    let zero = || -> BTreeMap<u32, i64> { rdt.cache_ids.iter().map(|i| (*i, 0)).collect() };
    let (mut l3, mut mb) = (zero(), zero());
    if cfg.mb.schemata.percent != 0 {
        mb.values_mut()
            .for_each(|v| *v = mb_value(cfg.mb.schemata.percent, rdt.amd));
    }
    for c in &cfg.mb.schemata_per_cache {
        mb.insert(c.cache_id, mb_value(c.schemata.percent, rdt.amd));
    }
    let mask = |range: &[i64]| match range {
        [start, end] => l3_mask(rdt.cbm, *start, *end)
            .and_then(|m| i64::from_str_radix(&m, 16).ok())
            .ok_or_else(|| {
                format!("annotation {ANNOTATION_RESCTRL}: no L3 ways in range {range:?}")
            }),
        _ => Err(String::new()),
    };
    if let Ok(m) = mask(&cfg.llc.schemata.range) {
        l3.values_mut().for_each(|v| *v = m);
    }
    for c in &cfg.llc.schemata_per_cache {
        if let Ok(m) = mask(&c.schemata.range) {
            l3.insert(c.cache_id, m);
        }
    }
    let line = |prefix: &str, m: &BTreeMap<u32, i64>, hex: bool| {
        let items: Vec<String> = m
            .iter()
            .map(|(id, v)| {
                if hex {
                    format!("{id}={v:x}")
                } else {
                    format!("{id}={v}")
                }
            })
            .collect();
        format!("{prefix}:{}\n", items.join(";"))
    };
    let mut out = String::new();
    if l3.len() == rdt.cache_ids.len() && !l3.is_empty() && l3.values().all(|v| *v > 0) {
        out.push_str(&line("L3", &l3, true));
    }
    if rdt.mba && !mb.is_empty() && mb.values().all(|v| *v > 0) {
        out.push_str(&line("MB", &mb, false));
    }
    Ok(out)
}

/// One round over the pods: their groups, schemata and tasks, and stale groups removed.
/// Returns what was changed: (`schemata`, `tasks` or `removed`, the group).
pub fn pass(
    states: &States,
    host: &Host,
    ex: &Executor,
) -> Result<Vec<(&'static str, String)>, ResctrlError> {
    let root = host.resctrl_root();
    let cbm = knob::read(&root.join("info/L3/cbm_mask"))?;
    let facts = HostRdt::of(host, cbm);
    let rdt = facts.rdt();
    let mut written = Vec::new();
    let mut live = BTreeSet::new();
    for pod in states.pods.iter() {
        let annotations = pod.pod.metadata.annotations.as_ref();
        let Some(annotation) = annotations.and_then(|a| a.get(ANNOTATION_RESCTRL)) else {
            continue;
        };
        let group = format!("{CLOSID_PREFIX}{}", pod.uid);
        live.insert(group.clone());
        let schemata = match pod_schemata(annotation, &rdt) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(pod = %pod.name, namespace = %pod.namespace, error = %e, "resctrl annotation ignored");
                continue;
            }
        };
        let dir = root.join(&group);
        knob::ensure_dir(&dir)?;
        let path = dir.join("schemata");
        if !schemata.is_empty()
            && ex.write_file(&path, &schemata, knob::read_opt(&path).as_deref())?
        {
            written.push(("schemata", group.clone()));
        }
        let tasks: Vec<String> = pod
            .containers
            .iter()
            .flat_map(|c| {
                ex.cgroups()
                    .read(Resource::Tasks, &c.dir)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        if move_tasks(ex, &dir.join("tasks"), &tasks) > 0 {
            written.push(("tasks", group));
        }
    }
    for stale in stale_groups(&root, &live) {
        remove_group(&root.join(&stale));
        written.push(("removed", stale));
    }
    Ok(written)
}

/// The group a container of the pod in `req` joins at creation (Resctrl's PreCreateContainer,
/// through NRI's `rdtClass`), made with its schemata first — the runtime only joins an
/// existing group; none when the pod has no annotation or the host no resctrl (then the
/// reconciler is all there is).
pub fn ready_group(
    host: &Host,
    req: &crate::kernel::hookproto::ContainerResourceHookRequest,
) -> Result<Option<String>, String> {
    let Some(annotation) = req.pod_annotations.get(ANNOTATION_RESCTRL) else {
        return Ok(None);
    };
    let Some(uid) = req
        .pod_meta
        .as_ref()
        .map(|m| m.uid.as_str())
        .filter(|u| !u.is_empty())
    else {
        return Ok(None);
    };
    let root = host.resctrl_root();
    let Some(cbm) = knob::read_opt(&root.join("info/L3/cbm_mask")) else {
        return Ok(None);
    };
    let schemata = pod_schemata(annotation, &HostRdt::of(host, cbm).rdt())?;
    let group = format!("{CLOSID_PREFIX}{uid}");
    let dir = root.join(&group);
    knob::ensure_dir(&dir).map_err(|e| e.to_string())?;
    if !schemata.is_empty() {
        let path = dir.join("schemata");
        if knob::read_opt(&path).as_deref().map(str::trim) != Some(schemata.trim()) {
            knob::write(&path, &schemata).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(Some(group))
}

/// Groups of ours (`koordlet-…`) no pod asks for any more.
fn stale_groups(root: &Path, live: &BTreeSet<String>) -> Vec<String> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(CLOSID_PREFIX) && !live.contains(n))
        .collect()
}

/// rmdir moves a resctrl group's tasks back to the default group; a plain directory
/// (a test's stand-in tree) is removed with its files.
fn remove_group(dir: &Path) {
    if std::fs::remove_dir(dir).is_err()
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        tracing::warn!(group = %dir.display(), error = %e, "resctrl group not removed");
    }
}

pub struct ResctrlPods {
    pub host: Host,
    pub ex: Arc<Executor>,
}

impl Strategy for ResctrlPods {
    fn name(&self) -> &'static str {
        "resctrlpods"
    }

    fn prepare(&mut self) -> bool {
        match supported_or_mount(&self.host, &crate::os::mount::resctrl) {
            Ok(true) => true,
            _ => {
                tracing::warn!(root = %self.host.resctrl_root().display(), "resctrl unsupported here; pods' resctrl annotations ignored");
                false
            }
        }
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        match pass(states, &self.host, &self.ex) {
            Ok(written) => {
                // By kind, not by group: one series per pod would grow without bound.
                for (kind, _) in written {
                    count(ctx, "resctrlpods", kind.into(), 1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "pod resctrl round failed"),
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

pub const ENTRY: Entry = Entry {
    gate: features::RESCTRL,
    build: |d| {
        Box::new(ResctrlPods {
            host: d.host.clone(),
            ex: d.executor.clone(),
        })
    },
};

#[cfg(test)]
#[path = "resctrlpod_tests.rs"]
mod tests;
