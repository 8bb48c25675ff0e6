//! ElasticQuota webhooks (`pkg/webhook/elasticquota/`): defaulting on create, tree rules on
//! create/update, deletion guards.

pub mod admission;
pub mod topology;
pub mod tree_affinity;
mod validate;

use crate::api::field::FieldError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::Handlers;
use super::json as j;
use super::review::{Operation, Request, Verdict};
use crate::api::extension::keys::*;
use topology::{QuotaInfo, Topology};

pub use validate::handle as validate;

/// How long this replica trusts its own admitted writes over the cache (the cache
/// normally catches up within milliseconds).
const OVERLAY_TTL: Duration = Duration::from_secs(10);

/// Quotas this replica admitted recently (`None` = deleted), so two quick writes are
/// checked against each other even before the watch delivers the first.
#[derive(Default)]
pub struct Overlay(Mutex<HashMap<String, (Instant, Option<QuotaInfo>)>>);

impl Overlay {
    pub fn record(&self, name: &str, info: Option<QuotaInfo>) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|_, (at, _)| at.elapsed() < OVERLAY_TTL);
        g.insert(name.to_string(), (Instant::now(), info));
    }

    pub fn apply(&self, topo: &mut Topology) {
        let g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (name, (at, info)) in g.iter() {
            if at.elapsed() >= OVERLAY_TTL {
                continue;
            }
            match info {
                Some(i) => topo.quotas.insert(name.clone(), i.clone()),
                None => topo.quotas.remove(name),
            };
        }
    }
}

/// `/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota` (create).
pub fn mutate(h: &Handlers, req: &Request) -> Verdict {
    if req.operation != Operation::Create {
        return Verdict::Allow;
    }
    let Some(original) = req.object.as_ref() else {
        return Verdict::deny("ElasticQuota create without an object");
    };
    let info = match QuotaInfo::from_value(original) {
        Ok(i) => i,
        Err(e) => return Verdict::deny(e),
    };
    if info.is_root {
        return Verdict::Allow;
    }
    let mut q = original.clone();
    match defaults(&h.quota_topology(), &info, &mut q) {
        Ok(()) => Verdict::patched(original, &q),
        Err(e) => Verdict::deny(e),
    }
}

/// Parent label, inherited tree id, shared weight shaped like `spec.max`.
pub fn defaults(topo: &Topology, info: &QuotaInfo, q: &mut Value) -> Result<(), FieldError> {
    let max = q
        .pointer("/spec/max")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let malformed = |f: &str| FieldError::whole(format!("{f} is malformed"));
    let labels = j::path(q, &["metadata", "labels"]).ok_or_else(|| malformed("metadata.labels"))?;
    let parent = labels
        .get(LABEL_QUOTA_PARENT)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if parent.is_none() {
        labels.insert(LABEL_QUOTA_PARENT.into(), QUOTA_ROOT.into());
    }
    let parent = parent.unwrap_or_else(|| QUOTA_ROOT.to_string());
    if info.tree_id.is_empty() && parent != QUOTA_ROOT {
        let p = topo.get(&parent).ok_or_else(|| {
            FieldError::not_found(
                format!("metadata.labels[{LABEL_QUOTA_PARENT}]"),
                format!("parent quota {parent:?}"),
            )
        })?;
        if !p.tree_id.is_empty() {
            labels.insert(LABEL_QUOTA_TREE_ID.into(), p.tree_id.clone().into());
        }
    }
    let ann = j::path(q, &["metadata", "annotations"])
        .ok_or_else(|| malformed("metadata.annotations"))?;
    let current: Option<Map<String, Value>> = ann
        .get(ANNOTATION_QUOTA_SHARED_WEIGHT)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| serde_json::from_str(s).ok());
    let weight = match current {
        None => max,
        Some(mut w) => {
            w.retain(|k, _| max.contains_key(k));
            for (k, v) in &max {
                w.entry(k.clone()).or_insert_with(|| v.clone());
            }
            w
        }
    };
    ann.insert(
        ANNOTATION_QUOTA_SHARED_WEIGHT.into(),
        Value::Object(weight).to_string().into(),
    );
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
