//! Reservation (`pkg/scheduler/plugins/reservation`): capacity booked ahead for its owners.
//! Work in progress (issue 21): the model, owner matching and the reserve pod are here;
//! scheduling of Reservations and owner pods is not wired into the framework yet, so the
//! plugin name stays refused in configurations.

pub mod plugin;
