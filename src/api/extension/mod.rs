//! Koordinator's well-known names (`apis/extension` upstream): labels, annotations,
//! extended resources, priority classes and QoS classes, and how a pod's class is derived.

pub mod keys;
pub mod nodereservation;
pub mod priority;
pub mod qos;
pub mod resources;
pub mod resourcestatus;

pub use priority::PriorityClass;
pub use qos::QoSClass;
