//! Where a pod may run, as kube-scheduler decides it: node selector terms, required node
//! affinity and taint tolerations. Shared by the scheduler's filters and the
//! descheduler's node-fit check.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

fn requirement(r: &NodeSelectorRequirement, get: impl Fn(&str) -> Option<String>) -> bool {
    let v = get(&r.key);
    let values = r.values.as_deref().unwrap_or(&[]);
    let num = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(&v)),
        "NotIn" => v.is_none_or(|v| !values.contains(&v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" => {
            matches!((v.as_deref().and_then(num), values.first().and_then(|s| num(s))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((v.as_deref().and_then(num), values.first().and_then(|s| num(s))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// A term matches when all its expressions and fields match; an empty term matches nothing.
pub fn term_matches(
    t: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    node_name: &str,
) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or(&[]);
    let fields = t.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement(r, |k| labels.get(k).cloned()))
        && fields
            .iter()
            .all(|r| requirement(r, |k| (k == "metadata.name").then(|| node_name.to_string())))
}

/// `nodeSelector` and required node affinity of a pod spec hold on a node.
pub fn node_matches(spec: &PodSpec, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    placement_matches(spec.node_selector.as_ref(), required, labels, node_name)
}

/// [`node_matches`] from the two parts of a spec it reads (for callers that keep only
/// those, like the descheduler's pod view).
pub fn placement_matches(
    node_selector: Option<&BTreeMap<String, String>>,
    required: Option<&NodeSelector>,
    labels: &BTreeMap<String, String>,
    node_name: &str,
) -> bool {
    let selector_ok = node_selector
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let affinity_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| term_matches(t, labels, node_name))
    });
    selector_ok && affinity_ok
}

/// Whether one toleration matches a taint (upstream `ToleratesTaint`).
pub fn toleration_matches(t: &Toleration, taint: &Taint) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok = t.key.as_deref().is_none_or(|k| k.is_empty())
        || t.key.as_deref() == Some(taint.key.as_str());
    let op = t.operator.as_deref().unwrap_or("Equal");
    let value_ok = match op {
        "Exists" => true,
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    };
    effect_ok && key_ok && value_ok
}

pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| toleration_matches(t, taint))
}
