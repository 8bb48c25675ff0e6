//! `slo.koordinator.sh/v1alpha1`: NodeSLO and NodeMetric.

pub mod nodemetric;
pub mod nodeslo;

pub use nodemetric::*;
pub use nodeslo::*;
