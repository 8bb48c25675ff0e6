//! Shared fixtures of the webhook unit tests.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Handlers;
use super::lookup::Fixed;
use super::review::Request;
use crate::manager::features::Gates;

pub fn handlers(fixed: Fixed) -> Handlers {
    handlers_with(fixed, crate::manager::features::defaults(), 0)
}

/// Handlers whose probability roll always yields `roll`.
pub fn handlers_with(fixed: Fixed, gates: Gates, roll: u32) -> Handlers {
    let mut h = Handlers::new(
        gates,
        Arc::new(fixed),
        ("koordinator-system".into(), "slo-controller-config".into()),
    );
    h.roll = Box::new(move || roll);
    h
}

pub fn request(kind: &str, op: &str, ns: &str, obj: Option<Value>, old: Option<Value>) -> Request {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "t", "kind": {"kind": kind}, "operation": op, "namespace": ns,
            "name": obj.as_ref().or(old.as_ref()).and_then(|o| o.pointer("/metadata/name")).cloned().unwrap_or(Value::Null),
            "object": obj, "oldObject": old}});
    Request::parse(&serde_json::to_vec(&body).unwrap()).unwrap()
}

/// The object after applying a verdict's patch.
pub fn patched(obj: &Value, v: &super::review::Verdict) -> Value {
    let mut out = obj.clone();
    if let super::review::Verdict::Patch(p) = v {
        json_patch::patch(&mut out, p).unwrap();
    }
    out
}
