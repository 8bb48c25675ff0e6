//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets and
//! ReplicationControllers (`kubectl scale`): an `autoscaling/v1` Scale whose
//! `spec.replicas` is the object's.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::write::{body_bytes, guaranteed_update, parse_object};
use super::{Query, ResourceRequest, ServerState, dry_run};
use crate::api::patch::{self, PatchType};
use crate::apiserver::error::ApiError;
use crate::kernel::http::{Body, json as json_response};

/// The Scale view of a scalable object.
fn to_scale(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_default();
    let keep = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ];
    let metadata: serde_json::Map<String, Value> = keep
        .iter()
        .filter_map(|k| meta.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .or_else(|| obj.pointer("/spec/selector"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": metadata,
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {"replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
                   "selector": selector},
    })
}

fn replicas_of(scale: &Value, rr: &ResourceRequest) -> Result<i64, ApiError> {
    let name = rr.name.as_deref().unwrap_or("");
    match scale.pointer("/spec/replicas") {
        Some(Value::Number(n))
            if n.as_i64()
                .is_some_and(|r| (0..=i32::MAX as i64).contains(&r)) =>
        {
            Ok(n.as_i64().unwrap_or(0))
        }
        Some(other) => Err(ApiError::invalid(
            &rr.info,
            name,
            format!("spec.replicas: Invalid value: {other}: must be greater than or equal to 0"),
        )),
        None => Err(ApiError::invalid(
            &rr.info,
            name,
            "spec.replicas: Required value",
        )),
    }
}

pub async fn serve(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let name = rr.name.clone().unwrap_or_default();
    let current = || {
        state
            .store
            .get(&rr.info.key(), rr.ns(), &name)
            .ok_or_else(|| ApiError::not_found(&rr.info, &name))
    };
    let method = req.method().clone();
    if method == Method::GET {
        return Ok(json_response(
            StatusCode::OK,
            &to_scale(&current()?.value()),
        ));
    }
    let dry = dry_run(q, "UpdateOptions")?;
    let m = super::write::manager(rr, &req, q)?;
    let (ct, bytes) = body_bytes(req).await?;
    let kind = PatchType::from_content_type(&ct);
    let put = match method {
        Method::PUT => Some(parse_object(&ct, bytes.clone()).await?),
        _ => None,
    };
    let compute = |old: &Value| {
        let scale = match (&method, kind) {
            (&Method::PUT, _) => put.clone().unwrap_or_default(),
            (&Method::PATCH, Some(k)) if k != PatchType::Apply => {
                patch::apply(k, &to_scale(old), &bytes)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?
            }
            (&Method::PATCH, _) => {
                return Err(ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format ({ct})"
                )));
            }
            _ => return Err(ApiError::method_not_allowed(&format!("{method} scale"))),
        };
        let mut new = old.clone();
        new["spec"]["replicas"] = replicas_of(&scale, rr)?.into();
        Ok(new)
    };
    let has_status = rr.info.has_status();
    let finish = |old: &Value, new: &mut Value| {
        crate::apiserver::fieldmanager::record_update(Some(old), new, &m, has_status)
    };
    let resp = guaranteed_update(state, rr, None, dry, compute, finish).await?;
    if dry {
        return Ok(resp);
    }
    Ok(json_response(
        StatusCode::OK,
        &to_scale(&current()?.value()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_show_replicas_and_selector() {
        let d = json!({"metadata": {"name": "web", "namespace": "default", "labels": {"x": "y"}},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
                       "status": {"replicas": 2}});
        let s = to_scale(&d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
        assert!(s["metadata"].get("labels").is_none());
    }
}
