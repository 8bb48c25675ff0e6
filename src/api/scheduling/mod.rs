//! `scheduling.koordinator.sh/v1alpha1`: Reservation, PodMigrationJob, Device,
//! ScheduleExplanation, ClusterNetworkTopology.

pub mod device;
pub mod explanation;
pub mod gang;
pub mod migration;
pub mod network_topology;
pub mod reservation;

pub use device::*;
pub use migration::*;
pub use reservation::*;
