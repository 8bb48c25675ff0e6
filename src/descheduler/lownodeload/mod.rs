//! LowNodeLoad (`pkg/descheduler/framework/plugins/loadaware`). Work in progress (issue
//! 22): its arguments, node usage, thresholds, classification, anomaly detectors and the
//! node-level eviction pass are here and tested; the prod pass, the pool loop, the
//! framework (profiles, evictor, limits), PodMigrationJobs and the role are not built yet.

pub mod anomaly;
pub mod args;
pub mod balance;
pub mod classify;
