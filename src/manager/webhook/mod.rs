//! koord-manager's admission webhooks (`pkg/webhook/`): an HTTPS server on every
//! replica (not leader-gated: the API server may call any of them), self-managed or
//! provided certificates, and the Mutating/ValidatingWebhookConfigurations kept pointing
//! at it.

pub mod binding;
pub mod certs;
pub mod configmap;
pub mod configs;
pub mod endpoint;
pub mod enhanced;
pub mod json;
pub mod lookup;
pub mod node;
pub mod pod_device;
pub mod pod_mutate;
pub mod pod_validate;
pub mod quota;
pub mod reservation_mutate;
pub mod review;
pub mod server;

use crate::kernel::features::Gate;
use crate::manager::features;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::manager::features::Gates;
use lookup::Lookup;
use review::{Request, Verdict};

/// Settings of `manager.webhook`. Koordinator's environment variables (`WEBHOOK_PORT`,
/// `WEBHOOK_HOST`, `WEBHOOK_CERT_DIR`, `WEBHOOK_CERT_WRITER`, `POD_NAMESPACE`,
/// `SECRET_NAME`, `SERVICE_NAME`, `MUTATING_WEBHOOK_NAME`, `VALIDATING_WEBHOOK_NAME`)
/// provide the defaults.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    pub port: u16,
    pub bind_address: IpAddr,
    /// When set, webhook configurations call `https://<host>:<port>/<path>` instead of
    /// the Service (Koordinator's `WEBHOOK_HOST`; `--embedded` uses 127.0.0.1).
    pub host: String,
    pub cert_dir: PathBuf,
    pub cert_writer: certs::CertWriter,
    pub namespace: String,
    pub secret_name: String,
    pub service_name: String,
    pub mutating_configuration_name: String,
    pub validating_configuration_name: String,
    /// How often certificates are checked (files reloaded, Secret re-read) and the
    /// webhook configurations re-asserted.
    pub resync_seconds: u64,
    /// `/validate-pod-binding` (gate `BindingAdmissionWebhook`).
    pub binding_admission: binding::Settings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 9876,
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            host: String::new(),
            cert_dir: PathBuf::from("/tmp/koordinator-webhook-certs"),
            cert_writer: certs::CertWriter::Secret,
            namespace: "koordinator-system".into(),
            secret_name: "koordinator-webhook-certs".into(),
            service_name: "koordinator-webhook-service".into(),
            mutating_configuration_name: "koordinator-mutating-webhook-configuration".into(),
            validating_configuration_name: "koordinator-validating-webhook-configuration".into(),
            resync_seconds: 10,
            binding_admission: binding::Settings::default(),
        }
    }
}

impl Config {
    /// Defaults with Koordinator's environment variables applied (unparsable ones ignored).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Config {
        let mut c = Config::default();
        let set = |slot: &mut String, key: &str| {
            if let Some(v) = var(key).filter(|v| !v.is_empty()) {
                *slot = v;
            }
        };
        set(&mut c.host, "WEBHOOK_HOST");
        set(&mut c.namespace, "POD_NAMESPACE");
        set(&mut c.secret_name, "SECRET_NAME");
        set(&mut c.service_name, "SERVICE_NAME");
        set(&mut c.mutating_configuration_name, "MUTATING_WEBHOOK_NAME");
        set(
            &mut c.validating_configuration_name,
            "VALIDATING_WEBHOOK_NAME",
        );
        if let Some(p) = var("WEBHOOK_PORT").and_then(|p| p.parse().ok()) {
            c.port = p;
        }
        if let Some(d) = var("WEBHOOK_CERT_DIR").filter(|v| !v.is_empty()) {
            c.cert_dir = d.into();
        }
        if var("WEBHOOK_CERT_WRITER").as_deref() == Some("fs") {
            c.cert_writer = certs::CertWriter::Fs;
        }
        c
    }

    pub fn validate(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.resync_seconds == 0 {
            out.push(("resyncSeconds".into(), "must be > 0".into()));
        }
        for (key, v) in [
            ("namespace", &self.namespace),
            ("secretName", &self.secret_name),
            ("serviceName", &self.service_name),
            (
                "mutatingConfigurationName",
                &self.mutating_configuration_name,
            ),
            (
                "validatingConfigurationName",
                &self.validating_configuration_name,
            ),
        ] {
            if v.is_empty() {
                out.push((key.into(), "must not be empty".into()));
            }
        }
        out
    }
}

type Handler = fn(&Handlers, &Request) -> Verdict;

/// (path, gate, handler) — Koordinator's paths; the WebhookFramework gate covers all.
const ROUTES: &[(&str, Gate, Handler)] = &[
    (
        "/mutate-pod",
        features::POD_MUTATING_WEBHOOK,
        pod_mutate::handle,
    ),
    (
        "/validate-pod",
        features::POD_VALIDATING_WEBHOOK,
        pod_validate::handle,
    ),
    (
        "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        features::ELASTIC_MUTATING_WEBHOOK,
        quota::mutate,
    ),
    (
        "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        features::ELASTIC_VALIDATING_WEBHOOK,
        quota::validate,
    ),
    (
        "/mutate-node-status",
        features::NODE_MUTATING_WEBHOOK,
        node::mutate_status,
    ),
    (
        "/validate-node",
        features::NODE_VALIDATING_WEBHOOK,
        node::validate,
    ),
    (
        "/validate-configmap",
        features::CONFIG_MAP_VALIDATING_WEBHOOK,
        configmap::handle,
    ),
    (
        "/mutate-reservation",
        features::RESERVATION_MUTATING_WEBHOOK,
        reservation_mutate::handle,
    ),
    (
        "/validate-pod-binding",
        features::BINDING_ADMISSION_WEBHOOK,
        binding::handle,
    ),
];

/// Everything a handler needs; cheap to share across connections.
pub struct Handlers {
    pub gates: Gates,
    pub lookup: Arc<dyn Lookup>,
    /// A number in [0, 2^32) per call; profiles' `probability` rolls against it.
    pub roll: Box<dyn Fn() -> u32 + Send + Sync>,
    pub quota_overlay: quota::Overlay,
    /// (namespace, name) of slo-controller-config.
    pub slo_config: (String, String),
    /// PodEnhancedValidator's rules (kept current by a watch when its gate is on).
    pub enhanced: enhanced::Shared,
    /// ElasticQuota admission (`EnableQuotaAdmission`): set by the running manager.
    pub quota_admission: Option<quota::admission::Evaluator>,
    /// `/validate-pod-binding`'s settings and its decision counts.
    pub binding: binding::Settings,
    pub binding_decisions: Option<BindingDecisions>,
}

/// `koord_manager_webhook_binding_admission_decisions_total{decision}`.
pub type BindingDecisions = prometheus_client::metrics::family::Family<
    Vec<(&'static str, String)>,
    prometheus_client::metrics::counter::Counter,
>;

impl Handlers {
    pub fn new(gates: Gates, lookup: Arc<dyn Lookup>, slo_config: (String, String)) -> Handlers {
        let state = AtomicU64::new(u64::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..8]
                .try_into()
                .unwrap_or([7; 8]),
        ));
        Handlers {
            gates,
            lookup,
            roll: Box::new(move || splitmix(&state)),
            quota_overlay: quota::Overlay::default(),
            slo_config,
            enhanced: Default::default(),
            quota_admission: None,
            binding: binding::Settings::default(),
            binding_decisions: None,
        }
    }

    fn count_binding(&self, d: binding::Decision) {
        if let Some(f) = &self.binding_decisions {
            f.get_or_create(&vec![("decision", d.label().to_string())])
                .inc();
        }
    }

    pub fn quota_topology(&self) -> quota::topology::Topology {
        let infos = self
            .lookup
            .quotas()
            .iter()
            .filter_map(|q| quota::topology::QuotaInfo::from_quota(q).ok())
            .collect::<Vec<_>>();
        let mut topo = quota::topology::Topology::build(infos);
        self.quota_overlay.apply(&mut topo);
        topo
    }

    fn route(&self, path: &str) -> Option<Handler> {
        if !self.gates.on(features::WEBHOOK_FRAMEWORK) {
            return None;
        }
        ROUTES
            .iter()
            .find(|(p, gate, _)| *p == path && self.gates.on(*gate))
            .map(|(_, _, h)| *h)
    }

    /// Paths served with the current gates.
    pub fn enabled_paths(&self) -> Vec<&'static str> {
        ROUTES
            .iter()
            .map(|(p, _, _)| *p)
            .filter(|p| self.route(p).is_some())
            .collect()
    }

    /// Answers one AdmissionReview body: (HTTP status, JSON body). Unknown paths are 404,
    /// malformed reviews 400; every 200 carries a well-formed AdmissionReview.
    pub fn serve(&self, path: &str, body: &[u8]) -> (u16, Value) {
        match self.decide(path, body) {
            Ok((req, verdict)) => self.answer(path, &req, &verdict),
            Err(e) => e,
        }
    }

    /// As [`Handlers::serve`], with the checks that write to the API server (ElasticQuota
    /// admission of `/validate-pod`).
    pub async fn serve_async(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let (req, mut verdict) = match self.decide(path, body) {
            Ok(d) => d,
            Err(e) => return e,
        };
        if path == "/validate-pod"
            && matches!(verdict, Verdict::Allow)
            && let Some(q) = &self.quota_admission
            && let Err(why) = pod_validate::evaluate_quota(self, q, &req).await
        {
            verdict = Verdict::deny(why);
        }
        self.answer(path, &req, &verdict)
    }

    fn decide(&self, path: &str, body: &[u8]) -> Result<(Request, Verdict), (u16, Value)> {
        let Some(handler) = self.route(path) else {
            return Err((
                404,
                json!({"error": format!("no webhook is served at {path}")}),
            ));
        };
        let req = Request::parse(body).map_err(|e| (400, json!({"error": e.to_string()})))?;
        let verdict = handler(self, &req);
        Ok((req, verdict))
    }

    fn answer(&self, path: &str, req: &Request, verdict: &Verdict) -> (u16, Value) {
        if let Verdict::Deny { message, .. } = verdict {
            tracing::info!(path, kind = %req.kind, namespace = %req.namespace, name = %req.name, reason = %message, "admission denied");
        }
        (200, review::response(req, verdict))
    }
}

fn splitmix(state: &AtomicU64) -> u32 {
    let mut z = state
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 32) as u32
}

pub use server::start;

#[cfg(test)]
mod test_util;
