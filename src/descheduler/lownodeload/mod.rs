//! LowNodeLoad (`pkg/descheduler/framework/plugins/loadaware`). Work in progress (issue
//! 22): its arguments, node usage, thresholds, classification and anomaly detectors are
//! here and tested; the eviction passes, the framework and the role are not built yet.

pub mod anomaly;
pub mod args;
pub mod classify;
