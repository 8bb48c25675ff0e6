//! `/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`: self checks, tree checks,
//! namespace binding conflicts and deletion guards.

use crate::api::field::FieldError;
use crate::manager::features;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::topology::{QuotaInfo, Topology};
use crate::api::extension::keys::*;
use crate::api::pod::Amounts;
use crate::manager::webhook::Handlers;
use crate::manager::webhook::review::{Operation, Request, Verdict};

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    let topo = h.quota_topology();
    let result = match req.operation {
        Operation::Create | Operation::Update => {
            let Some(obj) = req.object.as_ref() else {
                return Verdict::deny("ElasticQuota request without an object");
            };
            let old = req
                .old_object
                .as_ref()
                .filter(|_| req.operation == Operation::Update)
                .map(QuotaInfo::from_value)
                .transpose();
            match (QuotaInfo::from_value(obj), old) {
                (Ok(new), Ok(old)) => write(h, &topo, &new, old.as_ref(), req.operation)
                    .map(|()| h.quota_overlay.record(&new.name.clone(), Some(new))),
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
        Operation::Delete => {
            let name = if req.name.is_empty() {
                req.subject()
                    .and_then(|o| o.pointer("/metadata/name"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            } else {
                req.name.clone()
            };
            delete(h, &topo, &name).map(|()| h.quota_overlay.record(&name, None))
        }
        Operation::Connect => Ok(()),
    };
    match result {
        Ok(()) => Verdict::Allow,
        Err(e) => Verdict::deny(e),
    }
}

fn write(
    h: &Handlers,
    topo: &Topology,
    new: &QuotaInfo,
    old: Option<&QuotaInfo>,
    op: Operation,
) -> Result<(), FieldError> {
    if op == Operation::Create {
        if topo.get(&new.name).is_some() {
            return Err(FieldError::duplicate(
                "metadata.name",
                format!("ElasticQuota {:?} already exists", new.name),
            ));
        }
    } else {
        let Some(old) = old else {
            return Err(FieldError::whole("update without the old object"));
        };
        if unchanged(old, new) {
            return Ok(());
        }
        if new.name == QUOTA_ROOT || new.name == QUOTA_SYSTEM {
            return Err(FieldError::forbidden(
                "metadata.name",
                format!("{} cannot be modified", new.name),
            ));
        }
        if topo.get(&new.name).is_none() {
            return Err(FieldError::not_found(
                "metadata.name",
                format!("ElasticQuota {:?} is not known", new.name),
            ));
        }
    }
    namespace_conflicts(topo, new)?;
    self_checks(new)?;
    let pods = h.lookup.pods();
    topology_checks(h, topo, new, &pods)
}

fn unchanged(old: &QuotaInfo, new: &QuotaInfo) -> bool {
    old.parent == new.parent
        && old.is_parent == new.is_parent
        && old.tree_id == new.tree_id
        && old.namespaces == new.namespaces
        && old.min == new.min
        && old.max == new.max
        && old.shared_weight == new.shared_weight
        && old.strict_keys == new.strict_keys
}

fn namespace_conflicts(topo: &Topology, new: &QuotaInfo) -> Result<(), FieldError> {
    for ns in &new.namespaces {
        if let Some(other) = topo
            .quotas
            .values()
            .find(|q| q.name != new.name && q.namespaces.contains(ns))
        {
            return Err(FieldError::invalid(
                format!("metadata.annotations[{ANNOTATION_QUOTA_NAMESPACES}]"),
                format!(
                    "namespace {ns:?} is already bound to quota {:?}",
                    other.name
                ),
            ));
        }
    }
    Ok(())
}

fn negative(what: &str, a: &Amounts) -> Result<(), FieldError> {
    match a.iter().find(|(_, v)| **v < 0) {
        Some((k, v)) => Err(FieldError::invalid(
            format!("{what}[{k}]"),
            format!("{v}: must not be negative"),
        )),
        None => Ok(()),
    }
}

pub fn self_checks(q: &QuotaInfo) -> Result<(), FieldError> {
    negative("spec.max", &q.max)?;
    negative("spec.min", &q.min)?;
    if let Some(w) = &q.shared_weight {
        negative(
            &format!("metadata.annotations[{ANNOTATION_QUOTA_SHARED_WEIGHT}]"),
            w,
        )?;
    }
    for (k, min) in &q.min {
        match q.max.get(k) {
            None => {
                return Err(FieldError::invalid(
                    format!("spec.min[{k}]"),
                    "the key is missing from spec.max",
                ));
            }
            Some(max) if min > max => {
                return Err(FieldError::invalid(
                    format!("spec.min[{k}]"),
                    format!(
                        "min {} is larger than max {}",
                        shown(k, *min),
                        shown(k, *max)
                    ),
                ));
            }
            _ => {}
        }
    }
    for k in &q.strict_keys {
        let used = q.used.get(k).copied().unwrap_or(0);
        let max = q.max.get(k).copied().unwrap_or(0);
        if max < used {
            return Err(FieldError::invalid(
                format!("spec.max[{k}]"),
                format!("max {max} is below used {used} (strict key)"),
            ));
        }
    }
    Ok(())
}

fn keys(a: &Amounts) -> BTreeSet<&str> {
    a.keys().map(String::as_str).collect()
}

/// Σ of `quotas`' min, per key.
fn sum_min<'a>(quotas: impl Iterator<Item = &'a QuotaInfo>) -> Amounts {
    let mut out = Amounts::new();
    for q in quotas {
        for (k, v) in &q.min {
            let e = out.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }
    out
}

/// An amount as a user reads it: cpu in milli-cores, the rest as plain values.
fn shown(key: &str, v: i64) -> String {
    if key == "cpu" {
        format!("{v}m")
    } else {
        v.to_string()
    }
}

/// Every key of `sum` is ≤ the same key of `cap` (absent = 0).
fn within(sum: &Amounts, cap: &Amounts) -> Result<(), (String, String, String)> {
    for (k, v) in sum {
        let c = cap.get(k).copied().unwrap_or(0);
        if *v > c {
            return Err((k.clone(), shown(k, *v), shown(k, c)));
        }
    }
    Ok(())
}

fn pods_bound(pods: &[std::sync::Arc<Pod>], q: &QuotaInfo) -> bool {
    pods.iter().any(|p| {
        let ns = p.metadata.namespace.as_deref().unwrap_or("");
        let label = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_QUOTA_NAME));
        label.is_some_and(|l| *l == q.name) || ns == q.name || q.namespaces.iter().any(|n| n == ns)
    })
}

fn topology_checks(
    h: &Handlers,
    topo: &Topology,
    new: &QuotaInfo,
    pods: &[std::sync::Arc<Pod>],
) -> Result<(), FieldError> {
    if new.is_root {
        return Ok(());
    }
    let old = topo.get(&new.name);
    let children: Vec<&QuotaInfo> = topo.children(&new.name).collect();
    // 1. is-parent transitions.
    if let Some(old) = old {
        if old.is_parent && !new.is_parent && !children.is_empty() {
            return Err(FieldError::forbidden(
                format!("metadata.labels[{LABEL_QUOTA_IS_PARENT}]"),
                format!("quota {} still has child quotas", new.name),
            ));
        }
        if !old.is_parent && new.is_parent && pods_bound(pods, new) {
            return Err(FieldError::forbidden(
                format!("metadata.labels[{LABEL_QUOTA_IS_PARENT}]"),
                format!("quota {} still has pods", new.name),
            ));
        }
        // 2. tree id is immutable.
        if old.tree_id != new.tree_id {
            return Err(FieldError::invalid(
                format!("metadata.labels[{LABEL_QUOTA_TREE_ID}]"),
                format!("{:?}: field is immutable", new.tree_id),
            ));
        }
    }
    let parent = (new.parent != QUOTA_ROOT).then(|| topo.get(&new.parent));
    if let Some(Some(p)) = parent
        && p.tree_id != new.tree_id
    {
        return Err(FieldError::invalid(
            format!("metadata.labels[{LABEL_QUOTA_TREE_ID}]"),
            format!(
                "{:?}: must equal the parent's tree id {:?}",
                new.tree_id, p.tree_id
            ),
        ));
    }
    if let Some(c) = children.iter().find(|c| c.tree_id != new.tree_id) {
        return Err(FieldError::invalid(
            format!("metadata.labels[{LABEL_QUOTA_TREE_ID}]"),
            format!(
                "{:?}: child quota {} has tree id {:?}",
                new.tree_id, c.name, c.tree_id
            ),
        ));
    }
    if parent.is_none() && !new.is_parent {
        return Ok(());
    }
    // 3. the parent exists and is a parent quota.
    let parent = match parent {
        Some(None) => {
            return Err(FieldError::not_found(
                format!("metadata.labels[{LABEL_QUOTA_PARENT}]"),
                format!("parent quota {:?} does not exist", new.parent),
            ));
        }
        Some(Some(p)) if !p.is_parent => {
            return Err(FieldError::invalid(
                format!("metadata.labels[{LABEL_QUOTA_PARENT}]"),
                format!(
                    "{:?} is not a parent quota ({LABEL_QUOTA_IS_PARENT} is not true)",
                    new.parent
                ),
            ));
        }
        Some(Some(p)) => Some(p),
        None => None,
    };
    key_checks(h, new, parent, &children)?;
    if new.allow_force_update {
        return Ok(());
    }
    min_checks(topo, new, parent, &children)
}

/// Rule 4: max keys equal the parent's and the children's (a subset with the gate
/// ElasticQuotaEnableUpdateResourceKey); min keys nest.
fn key_checks(
    h: &Handlers,
    new: &QuotaInfo,
    parent: Option<&QuotaInfo>,
    children: &[&QuotaInfo],
) -> Result<(), FieldError> {
    let subset_ok = h
        .gates
        .on(features::ELASTIC_QUOTA_ENABLE_UPDATE_RESOURCE_KEY);
    let keys_ok = |child: &Amounts, parent: &Amounts| {
        if subset_ok {
            keys(child).is_subset(&keys(parent))
        } else {
            keys(child) == keys(parent)
        }
    };
    if let Some(p) = parent {
        if !keys_ok(&new.max, &p.max) {
            return Err(FieldError::invalid(
                "spec.max",
                format!(
                    "resource keys {:?} differ from parent {}'s {:?}",
                    keys(&new.max),
                    p.name,
                    keys(&p.max)
                ),
            ));
        }
        if !keys(&new.min).is_subset(&keys(&p.min)) {
            return Err(FieldError::invalid(
                "spec.min",
                format!(
                    "resource keys {:?} are not all in parent {}'s min {:?}",
                    keys(&new.min),
                    p.name,
                    keys(&p.min)
                ),
            ));
        }
    }
    for c in children {
        if !keys_ok(&c.max, &new.max) {
            return Err(FieldError::invalid(
                "spec.max",
                format!(
                    "resource keys {:?} differ from child {}'s {:?}",
                    keys(&new.max),
                    c.name,
                    keys(&c.max)
                ),
            ));
        }
        if !keys(&c.min).is_subset(&keys(&new.min)) {
            return Err(FieldError::invalid(
                "spec.min",
                format!(
                    "child {}'s min keys {:?} are not all in {:?}",
                    c.name,
                    keys(&c.min),
                    keys(&new.min)
                ),
            ));
        }
    }
    Ok(())
}

/// Rule 5: Σ siblings' min (with the new self) ≤ the parent's min; Σ children's min ≤ own min.
fn min_checks(
    topo: &Topology,
    new: &QuotaInfo,
    parent: Option<&QuotaInfo>,
    children: &[&QuotaInfo],
) -> Result<(), FieldError> {
    if let Some(p) = parent {
        let siblings = topo.children(&p.name).filter(|s| s.name != new.name);
        let sum = sum_min(siblings.chain(std::iter::once(new)));
        if let Err((k, s, c)) = within(&sum, &p.min) {
            return Err(FieldError::invalid(
                format!("spec.min[{k}]"),
                format!(
                    "the children of {} would need {s} in total, more than its min {c}",
                    p.name
                ),
            ));
        }
    }
    let sum = sum_min(children.iter().copied());
    if let Err((k, s, c)) = within(&sum, &new.min) {
        return Err(FieldError::invalid(
            format!("spec.min[{k}]"),
            format!("{c} is less than the sum of the children's min {s}"),
        ));
    }
    Ok(())
}

fn delete(h: &Handlers, topo: &Topology, name: &str) -> Result<(), FieldError> {
    if [QUOTA_ROOT, QUOTA_SYSTEM, QUOTA_DEFAULT].contains(&name) {
        return Err(FieldError::whole(format!(
            "ElasticQuota {name} is built in and cannot be deleted"
        )));
    }
    if topo.get(name).is_none() {
        return Err(FieldError::whole(format!(
            "ElasticQuota {name:?} is not known"
        )));
    }
    if let Some(c) = topo.children(name).next() {
        return Err(FieldError::whole(format!(
            "ElasticQuota {name} has child quotas (e.g. {}); delete them first",
            c.name
        )));
    }
    let has_pods = h.lookup.pods().iter().any(|p| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_QUOTA_NAME))
            .is_some_and(|l| l == name)
    });
    if has_pods {
        return Err(FieldError::whole(format!(
            "ElasticQuota {name} still has pods labelled {LABEL_QUOTA_NAME}={name}"
        )));
    }
    Ok(())
}
