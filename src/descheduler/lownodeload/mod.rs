//! LowNodeLoad (`pkg/descheduler/framework/plugins/loadaware`). Work in progress (issue
//! 22): its arguments, node usage, thresholds and classification are here and tested; the
//! anomaly detector, the eviction passes and the role itself are not built yet.

pub mod args;
pub mod classify;
