//! Reservation (`pkg/scheduler/plugins/reservation`): capacity booked ahead for its owners.
//! The plugin (`plugin.rs`) runs at PreFilter, Filter, Score, Reserve and PreBind: a
//! Reservation is scheduled as its reserve pod, and an owner pod is placed into a matching
//! Reservation's capacity (the model of reservations and owner matching is
//! `scheduler/model/`; the Reservation controller is `scheduler/reservation_live.rs`).

mod candidates;
mod fit;
pub mod plugin;
pub mod pre_allocation;
mod preempt;
mod state;

#[cfg(test)]
#[path = "pre_allocation_tests.rs"]
mod pre_allocation_tests;

#[cfg(test)]
#[path = "preemptible_tests.rs"]
mod preemptible_tests;
#[cfg(test)]
#[path = "preemption_tests.rs"]
mod preemption_tests;
