//! ElasticQuota admission in `/validate-pod` (`evaluate_quota.go` and
//! `pkg/webhook/quotaevaluate`, gate `EnableQuotaAdmission`; updates that move a pod to
//! another quota with `EnableQuotaAdmissionOnUpdate`): a pod is admitted only while its
//! quota's `child-request` annotation plus the pod's requests stays within the quota's
//! `admission` annotation (else its `max`), on the resources `max` names; the admitted
//! requests are added to `child-request` at once (the scheduler's status publisher
//! rewrites it with the true sum later). Writes to one quota are serialised in this
//! replica and retried on conflicts, as Koordinator's evaluator does.

use crate::manager::features;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::PostParams;

use crate::api::extension::keys::*;
use crate::api::pod::{Amounts, add, amounts, pod_requests};
use crate::api::quota::ElasticQuota;
use crate::manager::webhook::Handlers;
use crate::manager::webhook::review::{Operation, Request};

/// The resources the evaluator counts (Koordinator's `podResources`).
const POD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "kubernetes.io/batch-cpu",
    "kubernetes.io/batch-memory",
    "kubernetes.io/mid-cpu",
    "kubernetes.io/mid-memory",
    "koordinator.sh/gpu",
    "nvidia.com/gpu",
    "koordinator.sh/gpu.shared",
    "koordinator.sh/gpu-memory-ratio",
];

const RETRIES: usize = 3;

/// Why a pod is not admitted into its quota, in Koordinator's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuotaAdmissionError {
    #[error("elastic quota {0} not found")]
    NotFound(String),
    #[error("more than one elastic quota {0} found")]
    Ambiguous(String),
    #[error("annotation {key}: {reason}")]
    Annotation { key: String, reason: String },
    #[error("exceeded quota: {quota}, requested: {requested}, used: {used}, limited: {limited}")]
    Exceeded {
        quota: String,
        requested: String,
        used: String,
        limited: String,
    },
    /// Reading or writing the quota failed (the last conflict after the retries).
    #[error("{0}")]
    Api(String),
}

fn annotation_list(q: &ElasticQuota, key: &str) -> Result<Amounts, QuotaAdmissionError> {
    let raw = q.metadata.annotations.as_ref().and_then(|a| a.get(key));
    match raw.filter(|s| !s.is_empty()) {
        None => Ok(Amounts::new()),
        Some(s) => serde_json::from_str::<BTreeMap<String, Quantity>>(s)
            .map(|l| amounts(Some(&l)))
            .map_err(|e| QuotaAdmissionError::Annotation {
                key: key.to_string(),
                reason: e.to_string(),
            }),
    }
}

/// Go's `Quantity.String()` for koord's integer amounts.
fn shown(name: &str, v: i64) -> String {
    let q = match name {
        "cpu" | "requests.cpu" => crate::api::quantity::cpu_from_milli(v),
        "memory"
        | "requests.memory"
        | "ephemeral-storage"
        | "requests.ephemeral-storage"
        | "kubernetes.io/batch-memory"
        | "kubernetes.io/mid-memory" => crate::api::quantity::bytes_binary(v),
        _ => crate::api::quantity::from_int(v),
    };
    q.0
}

/// Koordinator's `prettyPrint` of `a` masked to `names`: `name=value` sorted by name,
/// comma-separated (a name `a` lacks is left out).
fn pretty(a: &Amounts, names: &[&String]) -> String {
    names
        .iter()
        .filter_map(|n| a.get(*n).map(|v| format!("{n}={}", shown(n, *v))))
        .collect::<Vec<_>>()
        .join(",")
}

/// The quota's `child-request` once the pod is admitted; `None` when the pod asks for
/// nothing the quota limits; an error in Koordinator's words when it does not fit.
pub fn admit(quota: &ElasticQuota, pod: &Pod) -> Result<Option<Amounts>, QuotaAdmissionError> {
    let max = amounts(quota.spec.max.as_ref());
    if !max.keys().any(|k| POD_RESOURCES.contains(&k.as_str())) {
        return Ok(None);
    }
    let used = annotation_list(quota, ANNOTATION_QUOTA_CHILD_REQUEST)?;
    let admission = annotation_list(quota, "quota.scheduling.koordinator.sh/admission")?;
    let admission = if admission.is_empty() {
        max.clone()
    } else {
        admission
    };
    // Pods that finished count nothing (QuotaV1Pod).
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Ok(None);
    }
    let requested: Amounts = pod_requests(pod)
        .into_iter()
        .filter(|(k, v)| max.contains_key(k) && *v != 0)
        .collect();
    if requested.is_empty() {
        return Ok(None);
    }
    let mut new_used = used.clone();
    add(&mut new_used, &requested);
    // quotav1.LessThanOrEqual: only resources the admission names are limited.
    let exceeded: Vec<&String> = requested
        .keys()
        .filter(|k| {
            admission
                .get(*k)
                .is_some_and(|limit| new_used.get(*k).copied().unwrap_or(0) > *limit)
        })
        .collect();
    if !exceeded.is_empty() {
        let ns = quota.metadata.namespace.as_deref().unwrap_or("");
        let name = quota.metadata.name.as_deref().unwrap_or("");
        return Err(QuotaAdmissionError::Exceeded {
            quota: format!("{ns}/{name}"),
            requested: pretty(&requested, &exceeded),
            used: pretty(&used, &exceeded),
            limited: pretty(&admission, &exceeded),
        });
    }
    Ok(Some(new_used))
}

/// Which quota the request charges, when the gates ask for admission: `None` to skip.
pub fn quota_of(h: &Handlers, req: &Request, pod: &Pod, old: Option<&Pod>) -> Option<String> {
    let ns = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(&req.namespace);
    let topo = h.quota_topology();
    let by_ns = !h.gates.on(features::DISABLE_DEFAULT_QUOTA);
    let name = super::topology::quota_name_of(&topo, pod, ns, by_ns);
    match req.operation {
        Operation::Create => {}
        Operation::Update if h.gates.on(features::ENABLE_QUOTA_ADMISSION_ON_UPDATE) => {
            let old = old?;
            let old_ns = old.metadata.namespace.as_deref().unwrap_or(ns);
            let before = super::topology::quota_name_of(&topo, old, old_ns, by_ns);
            if before == name {
                return None;
            }
        }
        _ => return None,
    }
    let system = [QUOTA_DEFAULT, QUOTA_SYSTEM, QUOTA_ROOT];
    (!name.is_empty() && !system.contains(&name.as_str())).then_some(name)
}

/// The namespace of the one quota called `name`, as Koordinator's errors put it.
pub fn namespace_of(h: &Handlers, name: &str) -> Result<String, QuotaAdmissionError> {
    let found: Vec<Arc<ElasticQuota>> = h
        .lookup
        .quotas()
        .into_iter()
        .filter(|q| q.metadata.name.as_deref() == Some(name))
        .collect();
    match found.as_slice() {
        [] => Err(QuotaAdmissionError::NotFound(name.to_string())),
        [q] => Ok(q.metadata.namespace.clone().unwrap_or_default()),
        _ => Err(QuotaAdmissionError::Ambiguous(name.to_string())),
    }
}

/// The live evaluator: one lock per quota, fresh reads, conflict retries.
pub struct Evaluator {
    client: kube::Client,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Evaluator {
    pub fn new(client: kube::Client) -> Evaluator {
        Evaluator {
            client,
            locks: Mutex::new(HashMap::new()),
        }
    }

    fn lock_of(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.retain(|k, l| k == key || Arc::strong_count(l) > 1);
        locks.entry(key.to_string()).or_default().clone()
    }

    /// Admits `pod` into the quota named `name` (found among the cached quotas), or says
    /// why not.
    pub async fn evaluate(
        &self,
        h: &Handlers,
        name: &str,
        pod: &Pod,
    ) -> Result<(), QuotaAdmissionError> {
        let api_err = |e: String| QuotaAdmissionError::Api(e);
        let ns = namespace_of(h, name)?;
        let lock = self.lock_of(&format!("{ns}/{name}"));
        let _held = lock.lock().await;
        let api: Api<ElasticQuota> = Api::namespaced(self.client.clone(), &ns);
        let mut last = String::new();
        for _ in 0..RETRIES {
            let mut quota = api.get(name).await.map_err(|e| api_err(e.to_string()))?;
            let Some(used) = admit(&quota, pod)? else {
                return Ok(());
            };
            let shown: BTreeMap<&String, String> =
                used.iter().map(|(k, v)| (k, shown(k, *v))).collect();
            let json = serde_json::to_string(&shown).map_err(|e| api_err(e.to_string()))?;
            quota
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION_QUOTA_CHILD_REQUEST.to_string(), json);
            match api.replace(name, &PostParams::default(), &quota).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => last = e.message,
                Err(e) => return Err(api_err(e.to_string())),
            }
        }
        Err(api_err(last))
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
