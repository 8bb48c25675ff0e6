//! The koordlet's enforcing half (`pkg/koordlet/qosmanager/`): QoS strategies deciding from the
//! NodeSLO and measured usage, writing through one resource executor.

pub mod allocatableevict;
pub mod batchresource;
pub mod blkio;
pub mod cfsquotaburst;
pub mod cgreconcile;
pub mod context;
pub mod coresched;
pub mod cpuburst;
pub mod cpuevict;
pub mod cpunormalization;
pub mod cpusuppress;
pub mod evictor;
pub mod executor;
pub mod hookreconcile;
pub mod kubeqos;
pub mod memoryevict;
pub mod netqos;
pub mod oomscoreadj;
pub mod pagecache;
pub mod pick;
pub mod podreconcile;
pub mod registry;
pub mod resctrl;
pub mod resctrlpod;
pub mod runner;
pub mod sysreconcile;
pub mod tcnetqos;
pub mod terwayqos;
pub mod usageevict;
