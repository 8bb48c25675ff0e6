//! The rooted host layer for /proc, /sys and the cgroup filesystem, with the roots as
//! constructor arguments so tests run against temp-dir trees. Every read or write of a
//! kernel interface file (cgroup and resctrl files, /proc, /sys, device nodes) and of the
//! kubelet's state goes through here — `knob.rs` for files by path, `cgroup`, `system`,
//! `procfs`, `rdma`, `pci` for the typed views — as does every piece of `unsafe` code
//! (process spawning, signals, resource limits, allocator tuning and trimming). koord's
//! own files (its data dir, sockets, logs, certificates, configuration) use `files.rs` or
//! are opened by the part that owns them.

pub mod cgroup;
pub mod coresched;
pub mod files;
pub mod knob;
pub mod memory;
pub mod mount;
pub mod nvml;
pub mod parse;
pub mod pci;
pub mod process;
pub mod procfs;
pub mod rdma;
pub mod selfstat;
pub mod storage;

pub use cgroup::{CgroupDir, CgroupError, Cgroups, Driver, Resource, Subsystem, Version};
pub mod system;
pub mod tc;
pub mod tuning;
