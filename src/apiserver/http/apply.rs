//! Server-side apply: `PATCH` with `application/apply-patch+yaml` (`kubectl apply
//! --server-side`). Creates the object when it is missing; otherwise merges the manager's
//! configuration under optimistic concurrency like every other write.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use super::write::{body_bytes, create_object, guaranteed_update, parse_object};
use super::{Query, ResourceRequest, ServerState};
use crate::apiserver::error::ApiError;
use crate::apiserver::fieldmanager::{self, Conflicts, Manager};
use crate::kernel::http::Body;

fn conflict_error(c: Conflicts) -> ApiError {
    let causes: Vec<Value> = c
        .causes()
        .iter()
        .map(|(who, field)| {
            json!({"type": "FieldManagerConflict", "message": format!("conflict with {who}"), "field": field})
        })
        .collect();
    let mut e = ApiError::new(409, "Conflict", c.message());
    e.details = Some(json!({"causes": causes}));
    e
}

pub async fn apply(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
    m: Manager,
    dry: bool,
) -> Result<Response<Body>, ApiError> {
    if q.get("fieldManager").is_none() {
        return Err(ApiError::invalid_option(
            "PatchOptions",
            "fieldManager: Required value: is required for apply patch",
        ));
    }
    let force = q.flag("force");
    let (_, bytes) = body_bytes(req).await?;
    // YAML is a superset of JSON, so one parser reads both forms of an apply body.
    let mut applied = parse_object("application/yaml", bytes).await?;
    check_applied(rr, &applied)?;
    let fv = crate::apiserver::validate::FieldValidation::parse(q.get("fieldValidation"))?;
    let warnings = crate::apiserver::validate::builtin(&rr.info, &rr.version, &mut applied, fv)?;
    let name = rr.name.clone().unwrap_or_default();
    let has_status = rr.info.has_status();
    if state.store.latest(&rr.info.key(), rr.ns(), &name).is_none() {
        let merged =
            fieldmanager::apply(None, &applied, &m, force, has_status).map_err(conflict_error)?;
        let entries = merged.pointer("/metadata/managedFields").cloned();
        let created = create_object(state, rr, merged, dry, |o| {
            if let (Some(e), Some(meta)) = (entries, o["metadata"].as_object_mut()) {
                meta.insert("managedFields".into(), e);
            }
        })
        .await;
        // Someone else created it meanwhile: apply onto theirs.
        if !matches!(&created, Err(e) if e.reason == "AlreadyExists") {
            return created.map(|r| crate::apiserver::validate::with_warnings(r, &warnings));
        }
    }
    let compute = |old: &Value| {
        fieldmanager::apply(Some(old), &applied, &m, force, has_status).map_err(conflict_error)
    };
    let resp = guaranteed_update(state, rr, None, dry, compute, |_, _| {}).await?;
    Ok(crate::apiserver::validate::with_warnings(resp, &warnings))
}

/// The configuration must name the object of the URL, as kube-apiserver requires.
fn check_applied(rr: &ResourceRequest, applied: &Value) -> Result<(), ApiError> {
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    let url_name = rr.name.as_deref().unwrap_or("");
    let name = applied
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    for (field, want) in [
        ("kind", rr.info.kind.clone()),
        ("apiVersion", rr.api_version()),
    ] {
        let got = applied.get(field).and_then(Value::as_str).unwrap_or("");
        if got != want {
            return Err(ApiError::bad_request(format!(
                "{field} of the apply configuration ({got:?}) does not match the request ({want})"
            )));
        }
    }
    Ok(())
}
