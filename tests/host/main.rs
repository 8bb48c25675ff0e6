//! Suites that use the real host when they can (root: cgroups, the node runtime, a private
//! containerd) and skip with a printed reason otherwise. Kept apart from `it` so a host
//! problem does not hide the pure integration results.

#[path = "../common/mod.rs"]
mod common;

mod colocation_qos;
mod devices_embedded;
mod embedded;
mod fulldisk;
mod grpc_authority;
mod hardening;
mod koordlet_cgroup;
mod koordlet_coresched;
mod koordlet_embedded;
mod koordlet_evict;
mod koordlet_evict_cri;
mod koordlet_gates_embedded;
mod koordlet_qos;
mod koordlet_qos_embedded;
mod kubectl_day_one;
mod noderuntime;
mod noderuntime_hooks;
mod noderuntime_security;
mod nrt_batch_embedded;
mod numa_embedded;
mod pod_identity;
mod runtime_hooks;
mod runtime_proxy;
mod tour;
