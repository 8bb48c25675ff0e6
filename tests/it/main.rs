//! The integration suite in one binary (one link of kube, tonic, sled and rustls instead of
//! one per file): in-process API servers and the real `koord` binary on loopback ports.

#[path = "../common/mod.rs"]
mod common;

mod api_roundtrip;
mod apiserver_crud;
mod apiserver_sim;
mod apiserver_subresources;
mod apiserver_watch;
mod arbitration;
mod bus;
mod chart;
mod cli;
mod client_workloads;
mod crd_chart;
mod crd_deletion;
mod crd_drift;
mod descheduler;
mod descheduler_upstream;
mod device_plugin_adaption;
mod dropin;
mod explain;
mod explain_schedule;
mod faults;
mod gang;
mod history;
mod job_preemption;
mod kubectl;
mod list_exact;
mod manager;
mod manifests_run;
mod metric_names;
mod migration_loop;
mod network_topology;
mod npu_templates;
mod nri;
mod nvml;
mod podrun;
mod preemption;
mod protobuf_lists;
mod quota;
mod rbac;
mod reservation;
mod reservation_pre_allocation;
mod rolejobs;
mod scheduler;
mod scheduler_diff;
mod scheduler_name;
mod scheduler_props;
mod second_client;
mod shutdown;
mod side_by_side;
mod volumes;
mod webhook;
mod webhook_props;
mod workloads;
