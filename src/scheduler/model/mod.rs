//! The scheduler's shared model: what the framework and several plugins both reason about,
//! parsed once from the objects the scheduler watches — reservations and their owners, a
//! node's CPU topology and NUMA zones, device totals and allocations, the quota tree's
//! runtime, storage (PVs, claims, classes, CSINodes). It sits below the framework
//! (`model < framework < plugins < cycle/live`, kept by
//! the layering test in `scheduler/mod.rs`), so the framework names no plugin type.

pub mod devices;
pub mod gpu_templates;
pub mod network_topology;
pub mod owners;
pub mod quota;
pub mod reservation;
pub mod reservation_index;
pub mod topology;
pub mod transform;
pub mod volumes;
