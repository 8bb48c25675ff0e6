//! `pods/binding` and `pods/eviction`.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::delete::{DeleteOptions, delete_one};
use super::write::WriteError;
use super::{ResourceRequest, ServerState};
use crate::api::selector::Selector;
use crate::apiserver::admission::Attributes;
use crate::apiserver::error::{ApiError, success};
use crate::apiserver::semantics::now;
use crate::apiserver::store::{Change, Filter};
use crate::kernel::http::{Body, json as json_response};

pub(super) async fn body_json(req: Request<Incoming>) -> Result<Value, ApiError> {
    let (ct, bytes) = super::write::body_bytes(req).await?;
    Ok(super::write::parse_options(&ct, bytes)
        .await?
        .unwrap_or_else(|| json!({})))
}

/// Sets `spec.nodeName` once and marks the pod scheduled; a second binding is a conflict.
pub async fn binding(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let body = body_json(req).await?;
    let name = rr.name.clone().unwrap_or_default();
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            &rr.info,
            &name,
            "target.name: Required value",
        ));
    }
    let a = Attributes {
        info: &rr.info,
        version: &rr.version,
        subresource: Some("binding"),
        operation: "CREATE",
        name: &name,
        namespace: rr.ns(),
        old: None,
    };
    state.admission.validate(&a, Some(&body)).await?;
    let info = rr.info.clone();
    state.store.commit(&rr.info.key(), rr.ns(), &name, |cur| {
        let cur = cur.ok_or_else(|| WriteError::Api(ApiError::not_found(&info, &name)))?;
        let mut pod = cur.value();
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(WriteError::Api(ApiError::conflict(&info, &name, &format!("pod {name} is being deleted, cannot be assigned to a host"))));
        }
        match pod.pointer("/spec/nodeName").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => {
                return Err(WriteError::Api(ApiError::conflict(&info, &name, &format!("pod {name} is already assigned to node \"{n}\""))));
            }
            _ => {}
        }
        pod["spec"]["nodeName"] = node.clone().into();
        set_condition(&mut pod, json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now()}));
        Ok(Change::Put(pod))
    })
    .map_err(|e| match e {
        WriteError::Api(e) => e,
        WriteError::Retry => ApiError::internal("binding raced"),
    })?;
    Ok(json_response(StatusCode::CREATED, &success(201)))
}

fn set_condition(obj: &mut Value, cond: Value) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let conds = obj["status"].as_object_mut().and_then(|s| {
        s.entry("conditions").or_insert_with(|| json!([]));
        s.get_mut("conditions").and_then(Value::as_array_mut)
    });
    if let Some(conds) = conds {
        conds.retain(|c| c.get("type") != cond.get("type"));
        conds.push(cond);
    }
}

fn is_healthy(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// `minAvailable`/`maxUnavailable` as a pod count: integers, or percentages of
/// `expected` rounded up.
fn scaled(v: &Value, expected: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s
            .strip_suffix('%')?
            .parse::<i64>()
            .ok()
            .map(|p| (p * expected + 99) / 100),
        _ => None,
    }
}

/// Checks the pod's PodDisruptionBudget like the eviction subresource does.
fn check_budget(
    state: &ServerState,
    ns: &str,
    pod: &Value,
    pod_labels: &std::collections::BTreeMap<String, String>,
) -> Result<(), ApiError> {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed" | "Pending" | "")
        || pod.pointer("/metadata/deletionTimestamp").is_some()
    {
        return Ok(());
    }
    let ns_filter = Filter {
        namespace: Some(ns.to_string()),
        ..Default::default()
    };
    let (_, pdbs) = state.store.list(
        &("policy".into(), "poddisruptionbudgets".into()),
        &ns_filter,
    );
    let matching: Vec<Value> = pdbs
        .iter()
        .map(|p| p.value())
        .filter(|p| {
            let sel = p
                .pointer("/spec/selector")
                .and_then(|s| serde_json::from_value(s.clone()).ok());
            sel.and_then(|s| Selector::from_label_selector(&s).ok())
                .is_some_and(|s| s.matches(pod_labels))
        })
        .collect();
    let pdb = match matching.as_slice() {
        [] => return Ok(()),
        [one] => one,
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let selector = pdb
        .pointer("/spec/selector")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .and_then(|s| Selector::from_label_selector(&s).ok())
        .unwrap_or_default();
    let (_, pods) = state
        .store
        .list(&(String::new(), "pods".into()), &ns_filter);
    let covered: Vec<Value> = pods
        .iter()
        .filter(|p| selector.matches(&p.labels))
        .map(|p| p.value())
        .collect();
    let expected = covered.len() as i64;
    let healthy = covered.iter().filter(|p| is_healthy(p)).count() as i64;
    let desired = match (
        pdb.pointer("/spec/minAvailable"),
        pdb.pointer("/spec/maxUnavailable"),
    ) {
        (Some(min), _) => scaled(min, expected).unwrap_or(0),
        (None, Some(max)) => expected - scaled(max, expected).unwrap_or(0),
        (None, None) => 0,
    };
    let allowed = if is_healthy(pod) {
        healthy - desired > 0
    } else {
        healthy >= desired
    };
    if allowed {
        return Ok(());
    }
    let pdb_name = pdb
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut err = ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    err.details = Some(json!({"causes": [{"reason": "DisruptionBudget",
        "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently")}]}));
    Err(err)
}

/// policy/v1 Eviction: honours the PodDisruptionBudget, then deletes the pod.
pub async fn eviction(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let body = body_json(req).await?;
    let name = rr.name.clone().unwrap_or_default();
    let cur = state
        .store
        .latest(&rr.info.key(), rr.ns(), &name)
        .ok_or_else(|| ApiError::not_found(&rr.info, &name))?;
    check_budget(state, rr.ns(), &cur.value(), &cur.labels)?;
    let opts: DeleteOptions = body
        .get("deleteOptions")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    delete_one(state, &rr.info, &rr.version, rr.ns(), &name, &opts, true).await?;
    Ok(json_response(StatusCode::CREATED, &success(201)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_arithmetic() {
        assert_eq!(scaled(&json!(2), 10), Some(2));
        assert_eq!(scaled(&json!("50%"), 3), Some(2), "percentages round up");
        assert_eq!(scaled(&json!("x"), 3), None);
        let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(is_healthy(&ready));
        assert!(!is_healthy(&json!({"status": {"phase": "Running"}})));
    }
}
