//! Readiness is earned: `/readyz` is 503 until every registered component says it is ready,
//! and again once the process drains.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabel {
    component: String,
}

#[derive(Clone, Default)]
pub struct Readiness {
    components: Arc<Mutex<BTreeMap<String, bool>>>,
    /// Components that have been ready at least once: `/healthz` (the chart probes the
    /// scheduler's and descheduler's readiness there) fails until each has.
    ever: Arc<Mutex<std::collections::BTreeSet<String>>>,
    draining: Arc<AtomicBool>,
    gauge: Family<ComponentLabel, Gauge>,
}

impl Readiness {
    pub fn new(metrics: &super::Metrics) -> Self {
        let r = Self::default();
        metrics.register(
            "koord_component_ready",
            "Whether a component (role or sub-component) reports ready",
            r.gauge.clone(),
        );
        r
    }

    /// Registers a component as not ready.
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let name = name.into();
        self.components
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone(), false);
        self.gauge
            .get_or_create(&ComponentLabel {
                component: name.clone(),
            })
            .set(0);
        ReadyHandle {
            name,
            readiness: self.clone(),
        }
    }

    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Every component ready, and not draining (what `report` says without its body).
    pub fn is_ready(&self) -> bool {
        let components = self.components.lock().unwrap_or_else(|p| p.into_inner());
        self.ready_with(&components)
    }

    fn ready_with(&self, components: &BTreeMap<String, bool>) -> bool {
        !components.is_empty()
            && components.values().all(|ok| *ok)
            && !self.draining.load(Ordering::SeqCst)
    }

    /// (ready, body) in kube-apiserver's `[+]name ok` style.
    pub fn report(&self) -> (bool, String) {
        let components = self.components.lock().unwrap_or_else(|p| p.into_inner());
        let mut body = String::new();
        let ready = self.ready_with(&components);
        for (name, ok) in components.iter() {
            let mark = if *ok { "[+]" } else { "[-]" };
            let state = if *ok { "ok" } else { "not ready" };
            body.push_str(&format!("{mark}{name} {state}\n"));
        }
        if self.draining.load(Ordering::SeqCst) {
            body.push_str("[-]shutdown draining\n");
        }
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ready, body)
    }

    /// (healthy, body): every registered component has been ready at least once — a role
    /// that never synced (a watch it may not make, a store it cannot open) is not healthy.
    pub fn health(&self) -> (bool, String) {
        let components = self.components.lock().unwrap_or_else(|p| p.into_inner());
        let ever = self.ever.lock().unwrap_or_else(|p| p.into_inner());
        let never: Vec<&String> = components.keys().filter(|c| !ever.contains(*c)).collect();
        if components.is_empty() {
            return (false, "nothing started yet\n".into());
        }
        if never.is_empty() {
            return (true, "ok\n".into());
        }
        let mut body = String::new();
        for c in never {
            body.push_str(&format!("[-]{c} never ready\n"));
        }
        body.push_str("healthz check failed\n");
        (false, body)
    }

    fn set(&self, name: &str, ready: bool) {
        if ready {
            self.ever
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.to_string());
        }
        self.components
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), ready);
        self.gauge
            .get_or_create(&ComponentLabel {
                component: name.to_string(),
            })
            .set(i64::from(ready));
    }
}

#[derive(Clone)]
pub struct ReadyHandle {
    name: String,
    readiness: Readiness,
}

impl ReadyHandle {
    pub fn set(&self, ready: bool) {
        self.readiness.set(&self.name, ready);
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A sub-component that must also be ready before the process is.
    pub fn child(&self, suffix: &str) -> ReadyHandle {
        self.readiness.register(format!("{}/{}", self.name, suffix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_all_ready_and_not_draining() {
        let r = Readiness::new(&super::super::Metrics::new());
        assert!(!r.report().0, "nothing registered is not ready");
        assert!(!r.is_ready());
        let a = r.register("manager");
        let b = r.register("scheduler");
        a.set(true);
        assert!(!r.report().0);
        assert!(!r.is_ready());
        assert!(!r.health().0, "scheduler never ready: {}", r.health().1);
        b.set(true);
        let (ok, body) = r.report();
        assert!(ok, "{body}");
        assert!(r.health().0);
        assert!(r.is_ready());
        assert!(body.contains("[+]manager ok"));
        a.set(false);
        assert!(
            r.health().0,
            "once ready, healthy: a role that loses a watch stays alive"
        );
        a.set(true);
        r.set_draining();
        assert!(!r.report().0);
        assert!(!r.is_ready());
    }
}
