//! koord: Koordinator rebuilt in Rust as one binary. `--role` picks what a process does;
//! roles share only `kernel`, `api` and `bus`.

pub mod api;
pub mod apiserver;
pub mod bus;
pub mod cli;
pub mod config;
pub mod descheduler;
pub mod explain;
pub mod kernel;
pub mod koordlet;
pub mod manager;
pub mod noderuntime;
pub mod run;
pub mod runtime_proxy;
pub mod scheduler;
