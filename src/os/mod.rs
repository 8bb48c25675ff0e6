//! The rooted host layer: every touch of /proc, /sys and the cgroup filesystem goes through
//! here, with the roots as constructor arguments so tests run against temp-dir trees.
//! The only `unsafe` code of koord lives in this module (process spawning, signals,
//! resource limits and allocator tuning).

pub mod cgroup;
pub mod coresched;
pub mod files;
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
