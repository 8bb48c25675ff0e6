//! The rooted host layer for /proc, /sys and the cgroup filesystem, with the roots as
//! constructor arguments so tests run against temp-dir trees. The only `unsafe` code of
//! koord lives in this module (process spawning, signals, resource limits, allocator
//! tuning and trimming). Not yet everything: some koordlet QoS writers (`qos/executor.rs`,
//! `resctrl.rs`, `blkio.rs`, `oomscoreadj.rs`), `collectors/cpi.rs`, `runtimehooks/rdma.rs`,
//! `apiserver/node.rs` and `kernel/host.rs` still open their files themselves.

pub mod cgroup;
pub mod coresched;
pub mod files;
pub mod memory;
pub mod nvml;
pub mod parse;
pub mod pci;
pub mod process;
pub mod procfs;
pub mod rdma;
pub mod selfstat;

pub use cgroup::{CgroupDir, CgroupError, Cgroups, Driver, Resource, Subsystem, Version};
pub mod system;
pub mod tuning;
