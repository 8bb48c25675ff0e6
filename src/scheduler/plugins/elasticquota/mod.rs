//! ElasticQuota (`pkg/scheduler/plugins/elasticquota`): quota trees, the runtime quota,
//! PreFilter admission and quota-aware preemption. Built so far: the runtime quota
//! calculation ([`runtime`]); the plugin itself is not registered yet (issue 23).

pub mod runtime;
