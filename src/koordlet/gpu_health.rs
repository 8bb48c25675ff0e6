//! GPU health from NVML's Xid events (Koordinator's `gpuHealCheck` and `checkHealth` in
//! `states_device_linux.go`): every GPU is registered for Xid critical errors; one that
//! reports an Xid other than the application ones (13, 31, 43, 45, 68, 109: the GPU is
//! fine) is unhealthy from then on (as upstream, nothing brings it back but a restart),
//! with reason `Xid<n>`; an event NVML cannot place on one GPU marks them all; a GPU too
//! old for events is unhealthy with `DeviceHealthCheckNotSupported`. The Device reports
//! them with `health: false` and a `Healthy=False` condition.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::os::nvml::{Nvml, XidEvent};

/// Why a GPU is unhealthy, and since when (RFC 3339).
#[derive(Debug, Clone, PartialEq)]
pub struct Unhealthy {
    pub code: String,
    pub message: String,
    pub since: String,
}

/// Bus id → why, shared between the watch thread and the Device report.
pub type Health = Arc<Mutex<BTreeMap<String, Unhealthy>>>;

/// Xids of application errors: the GPU stays healthy (NVIDIA's Xid catalogue, as upstream).
const APPLICATION_XIDS: [u64; 6] = [13, 31, 43, 45, 68, 109];

/// How long one NVML wait lasts (upstream's 5 s), so a stop is noticed.
const WAIT_MS: u32 = 5_000;

/// The GPUs one event marks unhealthy, with (code, message); `all` is every GPU's bus id.
pub fn marks(event: &XidEvent, all: &[String]) -> Vec<(String, String, String)> {
    if APPLICATION_XIDS.contains(&event.xid) {
        return Vec::new();
    }
    let code = format!("Xid{}", event.xid);
    let message = format!("Xid error detected on device, error code: {}", event.xid);
    let on: Vec<String> = match &event.bus_id {
        Some(bus) => vec![bus.clone()],
        None => all.to_vec(),
    };
    on.into_iter()
        .map(|b| (b, code.clone(), message.clone()))
        .collect()
}

fn record(health: &Health, marks: Vec<(String, String, String)>) {
    let since = crate::api::time::now();
    let mut h = health.lock().unwrap_or_else(|p| p.into_inner());
    for (bus, code, message) in marks {
        tracing::warn!(gpu = %bus, %code, %message, "GPU unhealthy");
        h.insert(
            bus,
            Unhealthy {
                code,
                message,
                since: since.clone(),
            },
        );
    }
}

/// Watches in a thread of its own (NVML's wait blocks), with its own NVML handle, until
/// `stop`; what it finds lands in the returned map. Without event support nothing is
/// watched (and nothing is marked).
pub fn spawn(library: String, stop: Arc<AtomicBool>) -> Health {
    let health: Health = Arc::default();
    let out = health.clone();
    let started = std::thread::Builder::new()
        .name("gpu-health".into())
        .spawn(move || watch(&library, &health, &stop));
    if let Err(e) = started {
        tracing::warn!(error = %e, "GPU health watch not started");
    }
    out
}

fn watch(library: &str, health: &Health, stop: &AtomicBool) {
    let nvml = match Nvml::open(library) {
        Ok(Some(n)) => n,
        Ok(None) => return,
        Err(e) => return tracing::warn!(error = %e, "GPU health watch: NVML not opened"),
    };
    let all: Vec<String> = match nvml.gpus() {
        Ok(g) => g.into_iter().map(|g| g.bus_id).collect(),
        Err(e) => return tracing::warn!(error = %e, "GPU health watch: no GPUs"),
    };
    let w = match nvml.watch_xids() {
        Ok(Some(w)) => w,
        Ok(None) => return tracing::info!("this NVML has no events: GPU health not watched"),
        Err(e) => return tracing::warn!(error = %e, "GPU health watch not registered"),
    };
    let old = w.unsupported.iter().map(|b| {
        let why = "device does not support health checking".to_string();
        (b.clone(), "DeviceHealthCheckNotSupported".to_string(), why)
    });
    record(health, old.collect());
    while !stop.load(Ordering::Relaxed) {
        match w.wait(WAIT_MS) {
            Ok(Some(e)) => record(health, marks(&e, &all)),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, "NVML event wait failed");
                std::thread::sleep(std::time::Duration::from_millis(WAIT_MS.into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xids_mark_their_gpu_all_gpus_or_none() {
        let all = ["0000:10:00.0".to_string(), "0000:11:00.0".to_string()];
        let on = |bus: Option<&str>, xid| {
            let e = XidEvent {
                bus_id: bus.map(str::to_string),
                xid,
            };
            marks(&e, &all)
        };
        assert_eq!(
            on(Some("0000:11:00.0"), 79),
            [(
                "0000:11:00.0".to_string(),
                "Xid79".to_string(),
                "Xid error detected on device, error code: 79".to_string()
            )]
        );
        for app in [13, 31, 43, 45, 68, 109] {
            assert!(on(Some("0000:10:00.0"), app).is_empty(), "Xid {app}");
        }
        let both: Vec<String> = on(None, 48).into_iter().map(|m| m.0).collect();
        assert_eq!(both, all, "an event on no one GPU marks them all");
    }
}
