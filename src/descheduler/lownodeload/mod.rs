//! LowNodeLoad (`pkg/descheduler/framework/plugins/loadaware`): arguments, node usage,
//! thresholds, classification, anomaly detectors, the pool loop, the node-level and the prod
//! eviction passes (`pass::LowNodeLoad`). The framework runs it at Balance.

pub mod anomaly;
pub mod args;
pub mod balance;
pub mod classify;
pub mod pass;
mod plugin;

pub use plugin::plugin;

#[cfg(test)]
#[path = "koordinator_tests.rs"]
mod koordinator_tests;
