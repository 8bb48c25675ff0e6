//! Collectors: one file each, run in a fixed order by the advisor every base interval
//! (each at its own interval). They read through the host layer and are given the time,
//! so a pass over a fake tree produces exact, testable values.

pub mod be_resource;
pub mod cold_page;
pub mod cpi;
pub mod gpu;
pub mod host_app;
pub mod node_resource;
pub mod node_storage_info;
pub mod pass_clock;
pub mod pod_resource;
pub mod pod_throttled;
pub mod psi;
pub mod resctrl;
pub mod sys_resource;

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::informer::States;
use super::store::{Point, SeriesKey};
use crate::os::Cgroups;
use crate::os::system::Host;

/// What one pass sees.
pub struct CollectEnv<'a> {
    pub host: &'a Host,
    pub cgroups: &'a Cgroups,
    pub states: &'a States,
    /// Wall clock (ms since the epoch): sample timestamps.
    pub now_ms: i64,
    /// Monotonic clock (ns): rates.
    pub mono_ns: u64,
    pub clk_tck: u64,
}

/// Results earlier collectors of a pass hand to later ones (system usage needs node, pod
/// and host-application totals of the same pass).
#[derive(Debug, Default, Clone)]
pub struct Shared {
    pub node_cpu: Option<f64>,
    pub node_memory: Option<f64>,
    pub pods_cpu: Option<f64>,
    pub pods_memory: Option<f64>,
    pub apps_cpu: f64,
    pub apps_memory: f64,
    /// Per NUMA node: the node's CPU cores and memory bytes in use.
    pub node_numa_cpu: std::collections::BTreeMap<u32, f64>,
    pub node_numa_memory: std::collections::BTreeMap<u32, f64>,
    /// Per NUMA node, the pods' memory bytes (`memory.numa_stat`); None until the pod
    /// collector ran this pass.
    pub pods_numa_memory: Option<std::collections::BTreeMap<u32, f64>>,
}

pub type Samples = Vec<(SeriesKey, Point)>;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CollectError(pub String);

macro_rules! collect_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CollectError {
            fn from(e: $t) -> Self {
                CollectError(e.to_string())
            }
        }
    )*};
}

collect_error_from!(
    crate::os::system::HostError,
    crate::os::CgroupError,
    crate::os::parse::ParseError,
    std::io::Error
);

pub trait Collector: Send {
    fn name(&self) -> &'static str;
    fn interval(&self) -> Duration;
    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        shared: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError>;
    /// Permanently unavailable on this host (CPI without perf events): the reason.
    fn disabled(&self) -> Option<&str> {
        None
    }
}

/// Rates of change of counters per key, forgetting keys not seen for a while.
#[derive(Debug)]
pub struct Rates<K> {
    prev: HashMap<K, (f64, u64)>,
    ttl_ns: u64,
}

impl<K: Hash + Eq + Clone> Rates<K> {
    pub fn new(ttl: Duration) -> Self {
        Rates {
            prev: HashMap::new(),
            ttl_ns: ttl.as_nanos() as u64,
        }
    }

    /// Δcounter per second since the previous sample; `None` on the first sample or when
    /// the counter went backwards (a restarted cgroup). The key is copied only the first
    /// time it is seen (hundreds of lookups a pass).
    pub fn per_second<Q>(&mut self, key: &Q, counter: f64, mono_ns: u64) -> Option<f64>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (c0, t0) = match self.prev.get_mut(key) {
            Some(slot) => std::mem::replace(slot, (counter, mono_ns)),
            None => {
                self.prev.insert(key.to_owned(), (counter, mono_ns));
                return None;
            }
        };
        if mono_ns <= t0 || counter < c0 {
            return None;
        }
        Some((counter - c0) * 1e9 / (mono_ns - t0) as f64)
    }

    /// Drops keys last seen before `mono_ns - ttl`.
    pub fn expire(&mut self, mono_ns: u64) {
        let ttl = self.ttl_ns;
        self.prev
            .retain(|_, (_, t)| mono_ns.saturating_sub(*t) <= ttl);
    }
}

/// The `koordlet.collectors` configuration section (Koordinator's defaults).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// Base collection interval (`collect-res-used-interval`).
    pub collect_res_used_interval_seconds: u64,
    pub psi_interval_seconds: u64,
    pub cpi_interval_seconds: u64,
    /// How long CPI counters count before they are read.
    pub cpi_window_seconds: u64,
    /// ColdPageCollector's interval (`-coldpage-collector-interval`).
    pub cold_page_interval_seconds: u64,
    /// ResctrlCollector runs with this and its gate (`-enable-resctrl-collector`).
    pub enable_resctrl_collector: bool,
    /// Its interval (`-resctrl-collector-interval`).
    pub resctrl_interval_seconds: u64,
    /// NodeStorageInfoCollector's interval (`-collect-node-storage-info-interval`); it runs
    /// with BlkIOReconcile.
    pub node_storage_info_interval_seconds: u64,
    /// Collectors to skip by name (`nodeResource`, `podResource`, `podThrottled`,
    /// `beResource`, `hostApplication`, `sysResource`, `psi`, `cpi`, `coldPage`, `resctrl`, `gpu`).
    pub disabled: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            collect_res_used_interval_seconds: 1,
            psi_interval_seconds: 10,
            cpi_interval_seconds: 60,
            cpi_window_seconds: 10,
            cold_page_interval_seconds: 5,
            enable_resctrl_collector: false,
            resctrl_interval_seconds: 10,
            node_storage_info_interval_seconds: 1,
            disabled: Vec::new(),
        }
    }
}

/// The gated collectors that are on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gated {
    pub psi: bool,
    pub cpi: bool,
    pub resctrl: bool,
    pub cold_page: bool,
}

/// The collectors, in pass order. PSI, CPI, cold pages and resctrl also need their feature
/// gates; GPU
/// usage needs gate Accelerators, which hands it the NVML library (`nvml`).
pub fn registry(cfg: &Config, gated: Gated, nvml: Option<&str>) -> Vec<Box<dyn Collector>> {
    let base = Duration::from_secs(cfg.collect_res_used_interval_seconds.max(1));
    let ttl = base * 20;
    let mut all: Vec<Box<dyn Collector>> = vec![
        Box::new(node_resource::NodeResource::new(base, ttl)),
        Box::new(pod_resource::PodResource::new(base, ttl)),
        Box::new(pod_throttled::PodThrottled::new(base, ttl)),
        Box::new(be_resource::BeResource::new(base, ttl)),
        Box::new(host_app::HostApplication::new(base, ttl)),
        Box::new(sys_resource::SysResource::new(base)),
    ];
    if gated.psi {
        all.push(Box::new(psi::Psi::new(Duration::from_secs(
            cfg.psi_interval_seconds.max(1),
        ))));
    }
    if gated.cpi {
        all.push(Box::new(cpi::Cpi::new(
            Duration::from_secs(cfg.cpi_interval_seconds.max(1)),
            Duration::from_secs(cfg.cpi_window_seconds.max(1)),
        )));
    }
    if gated.cold_page {
        all.push(Box::new(cold_page::ColdPage::new(Duration::from_secs(
            cfg.cold_page_interval_seconds.max(1),
        ))));
    }
    if gated.resctrl && cfg.enable_resctrl_collector {
        all.push(Box::new(resctrl::Resctrl::new(Duration::from_secs(
            cfg.resctrl_interval_seconds.max(1),
        ))));
    }
    if let Some(library) = nvml {
        all.push(Box::new(gpu::GpuUsage::new(library, base)));
    }
    all.retain(|c| !cfg.disabled.iter().any(|d| d == c.name()));
    all
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests;
