//! One Prometheus registry per process that every role registers into.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

pub use super::metric_docs::{FamilyDoc, Labelled, Labels};

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopLabels {
    name: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnsupportedLabels {
    role: String,
    kind: String,
    name: String,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    /// Every registered family (an empty family shows no labels on `/metrics`, so the
    /// exposition alone cannot say what a process exports).
    docs: Arc<Mutex<Vec<FamilyDoc>>>,
    /// Counter families exposed without `_total` (Koordinator's Go counters).
    bare: Arc<Mutex<std::collections::BTreeSet<String>>>,
    loops: Family<LoopLabels, Counter>,
    unsupported: Family<UnsupportedLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let m = Self {
            registry: Arc::default(),
            docs: Arc::default(),
            bare: Arc::default(),
            loops: Family::default(),
            unsupported: Family::default(),
        };
        m.register(
            "koord_unsupported_config",
            "Plugins, feature gates, flags and args in the configuration that koord accepts but does not implement yet (1 each)",
            m.unsupported.clone(),
        );
        m.register(
            "koord_loop_iterations",
            "Wake-ups of each long-running event loop; an idle process keeps these nearly still",
            m.loops.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        m.register("koord_build_info", "koord build information", build);
        let (requests, latency, waits) = super::rest_metrics::families();
        m.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            requests,
        );
        m.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            latency,
        );
        m.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            waits,
        );
        m.register(
            "koord_watch_decode_errors",
            "Watched objects skipped because they do not decode (the others are used), by kind",
            super::watch::decode_failures(),
        );
        m.register_collector(
            super::process_metrics::families(),
            Box::new(super::process_metrics::ProcessCollector),
        );
        m
    }

    /// Registers a metric under its full name (Koordinator style, e.g.
    /// `koordlet_node_resource_usage`).
    pub fn register(&self, name: &str, help: &str, metric: impl Metric + Labelled) {
        self.document(FamilyDoc {
            name: name.to_string(),
            kind: metric.metric_type().as_str().to_string(),
            help: help.to_string(),
            labels: metric.labels(),
        });
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .register(name, help, metric);
    }

    fn document(&self, doc: FamilyDoc) {
        self.docs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(doc);
    }

    /// Names the labels of a family whose label sets are built at run time
    /// (`Vec<(&str, String)>`), for the reference.
    pub fn describe_labels(&self, name: &str, labels: &[&str]) {
        let mut docs = self.docs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = docs.iter_mut().find(|d| d.name == name) {
            d.labels = Labels::Named(labels.iter().map(|l| l.to_string()).collect());
        }
    }

    /// Registers a counter exposed under `name` itself, as Koordinator's Go counters named
    /// without `_total` (`koordlet_pod_eviction`, `slo_controller_nodeslo_reconcile_count`).
    pub fn register_bare_counter(&self, name: &str, help: &str, metric: impl Metric + Labelled) {
        self.bare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string());
        self.register(name, help, metric);
    }

    /// Registers a collector that encodes the `families` itself at each scrape.
    pub fn register_collector(
        &self,
        families: Vec<FamilyDoc>,
        collector: Box<dyn prometheus_client::collector::Collector>,
    ) {
        for f in families {
            self.document(f);
        }
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .register_collector(collector);
    }

    /// The wake-up counter of one event loop (`koord_loop_iterations_total{name=...}`):
    /// a loop that spins shows up here without a timing test.
    pub fn loop_counter(&self, name: &str) -> Counter {
        self.loops
            .get_or_create(&LoopLabels {
                name: name.to_string(),
            })
            .clone()
    }

    /// Names registered so far (counters without the `_total` the exposition adds).
    pub fn names(&self) -> Vec<String> {
        let docs = self.docs.lock().unwrap_or_else(|p| p.into_inner());
        docs.iter().map(|d| d.name.clone()).collect()
    }

    /// Every family registered so far, under the name the exposition gives it.
    pub fn families(&self) -> Vec<FamilyDoc> {
        let bare = self.bare.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let docs = self.docs.lock().unwrap_or_else(|p| p.into_inner());
        docs.iter()
            .map(|d| {
                let mut d = d.clone();
                if d.kind == "counter" && !bare.contains(&d.name) {
                    d.name.push_str("_total");
                }
                d
            })
            .collect()
    }

    /// Sets `koord_unsupported_config{role,kind,name}` to 1 (see `kernel::compat`).
    pub fn mark_unsupported(&self, role: &str, kind: &str, name: &str) {
        self.unsupported
            .get_or_create(&UnsupportedLabels {
                role: role.into(),
                kind: kind.into(),
                name: name.into(),
            })
            .set(1);
    }

    /// The exposition as Prometheus reads it (tests).
    #[cfg(test)]
    pub fn scrape(&self) -> prometheus_parse::Scrape {
        let text = self.encode();
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("valid Prometheus text format")
    }

    /// The exposition in Prometheus's text format 0.0.4 (see `kernel::exposition`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        {
            let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &registry) {
                tracing::warn!(%err, "encoding metrics failed");
            }
        }
        let bare = self.bare.lock().unwrap_or_else(|p| p.into_inner());
        super::exposition::text_004(&out, &bare)
    }
}
