//! LowNodeLoad (`pkg/descheduler/framework/plugins/loadaware`). Work in progress (issue
//! 22): arguments, node usage, thresholds, classification, anomaly detectors, the pool
//! loop, the node-level and the prod eviction passes are here and tested
//! (`pass::LowNodeLoad`); the framework (profiles, DefaultEvictor filter, limits),
//! PodMigrationJobs, explain and the role itself are not built yet.

pub mod anomaly;
pub mod args;
pub mod balance;
pub mod classify;
pub mod pass;
