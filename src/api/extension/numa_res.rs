//! The resources NodeNUMAResource accounts on each NUMA node. Koordinator takes every
//! resource of a NodeResourceTopology zone; the ones pods ask of a zone are cpu and memory,
//! and for batch pods the zone's `batch-cpu`/`batch-memory` (the manager's NUMA-level batch
//! resources). Devices are aligned by DeviceShare's own NUMA hints.

use super::resources::{BATCH_CPU, BATCH_MEMORY, CPU, MEMORY};

/// The names in [`NumaRes`]' order.
pub const NUMA_RESOURCES: [&str; 4] = [CPU, MEMORY, BATCH_CPU, BATCH_MEMORY];

/// Amounts per [`NUMA_RESOURCES`]: cpu in milli-cores, memory in bytes, batch-cpu in
/// milli-cores (its integer value), batch-memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumaRes(pub [i64; 4]);

impl NumaRes {
    pub const CPU: usize = 0;
    pub const MEMORY: usize = 1;

    pub fn cpu_memory(cpu_milli: i64, memory: i64) -> NumaRes {
        NumaRes([cpu_milli, memory, 0, 0])
    }

    /// From a resource list: `get(name)` is the amount of `name`, if listed. Also says which
    /// resources were listed.
    pub fn from_list(get: impl Fn(&str) -> Option<i64>) -> (NumaRes, [bool; 4]) {
        let (mut out, mut listed) = (NumaRes::default(), [false; 4]);
        for (i, name) in NUMA_RESOURCES.iter().enumerate() {
            if let Some(v) = get(name) {
                out.0[i] = v;
                listed[i] = true;
            }
        }
        (out, listed)
    }

    pub fn cpu(&self) -> i64 {
        self.0[Self::CPU]
    }

    pub fn memory(&self) -> i64 {
        self.0[Self::MEMORY]
    }

    pub fn add(&mut self, other: &NumaRes) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// `self - other`, never below zero.
    pub fn minus(&self, other: &NumaRes) -> NumaRes {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a = (*a - b).max(0);
        }
        out
    }

    /// (name, amount) for every nonzero amount.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, &'static str, i64)> + '_ {
        NUMA_RESOURCES
            .iter()
            .enumerate()
            .map(|(i, n)| (i, *n, self.0[i]))
            .filter(|(_, _, v)| *v != 0)
    }
}
