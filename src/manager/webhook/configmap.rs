//! `/validate-configmap` (`pkg/webhook/cm/plugins/sloconfig/`): slo-controller-config is checked with
//! the same parser the manager runs with; every other ConfigMap passes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Handlers;
use super::json as j;
use super::review::{Operation, Request, Verdict};
use crate::api::sloconfig::validate::validate_configmap;

fn data(v: Option<&Value>) -> Option<BTreeMap<String, String>> {
    v.map(|o| j::str_map(o.get("data")))
}

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Verdict::Allow;
    }
    let Some(obj) = req.object.as_ref() else {
        return Verdict::Allow;
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&req.name);
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(&req.namespace);
    if name != h.slo_config.1 || ns != h.slo_config.0 {
        return Verdict::Allow;
    }
    if let Some(bad) = obj
        .get("data")
        .and_then(Value::as_object)
        .and_then(|m| m.iter().find(|(_, v)| !v.is_string()))
    {
        return Verdict::deny(format!("data.{}: must be a string", bad.0));
    }
    let new = data(Some(obj)).unwrap_or_default();
    let old = data(req.old_object.as_ref()).filter(|_| req.operation == Operation::Update);
    match validate_configmap(&new, old.as_ref(), &h.lookup.nodes()) {
        Ok(()) => Verdict::Allow,
        Err(e) => Verdict::deny(format!("ConfigMap {ns}/{name}: {e}")),
    }
}
