//! `scheduling.koordinator.sh/v1alpha1`: Reservation, PodMigrationJob, Device.

pub mod device;
pub mod gang;
pub mod migration;
pub mod reservation;

pub use device::*;
pub use migration::*;
pub use reservation::*;
