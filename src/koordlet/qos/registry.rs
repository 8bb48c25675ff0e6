//! Every QoS strategy the koordlet runs, one row each. A strategy's file holds its pure
//! decision, its round (the [`Strategy`] impl) and its `ENTRY` (the feature gate that
//! switches it on and how it is built); adding one is that file and a row here.

use super::context::{Deps, QosCtx};
use super::runner::{Entry, Strategy};
use super::{
    allocatableevict, batchresource, blkio, cgreconcile, coresched, cpuburst, cpuevict,
    cpunormalization, cpusuppress, hookreconcile, memoryevict, oomscoreadj, resctrl, resctrlpod,
    sysreconcile, tcnetqos, terwayqos, usageevict,
};

pub const REGISTRY: &[Entry] = &[
    cpusuppress::ENTRY,
    batchresource::ENTRY,
    hookreconcile::CPUSETS,
    hookreconcile::BVT,
    cpunormalization::ENTRY,
    coresched::ENTRY,
    oomscoreadj::ENTRY,
    cpuburst::ENTRY,
    cgreconcile::ENTRY,
    resctrl::ENTRY,
    resctrlpod::ENTRY,
    blkio::ENTRY,
    sysreconcile::ENTRY,
    cpuevict::ENTRY,
    memoryevict::ENTRY,
    usageevict::CPU,
    usageevict::MEMORY,
    allocatableevict::CPU,
    allocatableevict::MEMORY,
    tcnetqos::ENTRY,
    terwayqos::ENTRY,
];

/// The strategies whose gates are on, built.
pub fn enabled(gates: &crate::koordlet::features::Gates, d: &Deps) -> Vec<Box<dyn Strategy>> {
    REGISTRY
        .iter()
        .filter(|e| gates.on(e.gate))
        .map(|e| (e.build)(d))
        .collect()
}

/// Starts every QoS strategy whose koordlet feature gate is on.
pub fn spawn(
    gates: &crate::koordlet::features::Gates,
    ctx: impl Fn() -> QosCtx,
    d: Deps,
    tasks: &crate::kernel::Tasks,
) {
    for strategy in enabled(gates, &d) {
        let name = format!("koordlet/qos/{}", strategy.name());
        tasks.spawn(name, super::runner::run(ctx(), strategy));
    }
}
