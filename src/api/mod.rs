//! Koordinator's API: CRD types with the same group, version, kind, plural, scope and
//! field names as upstream, plus the well-known labels, annotations and resources.

// kube-derive takes repeated keys (`printcolumn`, `shortname`, `derive`) by design.
#![allow(clippy::duplicated_attributes)]

pub mod analysis;
pub mod config;
pub mod cpuset;
pub mod crds;
pub mod decode;
pub mod duration;
pub mod extension;
pub mod field;
pub mod input;
pub mod kubeletqos;
pub mod names;
pub mod patch;
pub mod placement;
pub mod pod;
pub mod podresources;
pub mod quantity;
pub mod quota;
pub mod scheduling;
pub mod schema;
pub mod selector;
pub mod slo;
pub mod sloconfig;
pub mod time;
pub mod topology;
pub mod trim;
pub mod volumes;
pub mod xpu;
