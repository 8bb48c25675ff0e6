//! PATCH: JSON, merge and strategic merge patches through the guaranteed update, and
//! server-side apply handed to `apply`.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;

use super::write::{body_bytes, content_type, guaranteed_update, manager, name_of};
use super::{Query, ResourceRequest, ServerState, dry_run};
use crate::api::patch::{self, PatchType};
use crate::apiserver::error::ApiError;
use crate::apiserver::fieldmanager;
use crate::apiserver::limits;
use crate::apiserver::validate::{self, FieldValidation};
use crate::kernel::http::Body;

pub async fn patch(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(q, "PatchOptions")?;
    let ct = content_type(&req);
    let kind = PatchType::from_content_type(&ct).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format ({ct}) - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
        ))
    })?;
    let m = manager(rr, &req, q)?;
    match kind {
        PatchType::Apply => return super::apply::apply(state, rr, req, q, m, dry).await,
        PatchType::Strategic if !rr.info.builtin => {
            return Err(ApiError::unsupported_media_type(
                "strategic merge patch is not supported for custom resources; use application/merge-patch+json",
            ));
        }
        _ => {}
    }
    let fv = FieldValidation::parse(q.get("fieldValidation"))?;
    let (_, bytes) = body_bytes(req).await?;
    let has_status = rr.info.has_status();
    let finish =
        |old: &Value, new: &mut Value| fieldmanager::record_update(Some(old), new, &m, has_status);
    let warnings = std::sync::Mutex::new(Vec::new());
    let compute = |old: &Value| {
        let mut new = patch::apply(kind, old, &bytes).map_err(|e| match e {
            patch::PatchError::TooManyOperations(_) => {
                ApiError::new(413, "RequestEntityTooLarge", e.to_string())
            }
            patch::PatchError::Apply(m) if m.starts_with("Unable to complete the copy") => {
                ApiError::new(422, "Invalid", m)
            }
            other => ApiError::bad_request(other.to_string()),
        })?;
        limits::check_result(&rr.info, &name_of(old), &new)?;
        let w = validate::builtin(&rr.info, &rr.version, &mut new, fv)?;
        *warnings.lock().unwrap_or_else(|p| p.into_inner()) = w;
        let rv = |v: &Value| v.pointer("/metadata/resourceVersion").cloned();
        if rv(&new).is_some_and(|r| !r.is_null()) && rv(&new) != rv(old) {
            return Err(ApiError::stale(&rr.info, &name_of(old)));
        }
        Ok(new)
    };
    let resp = guaranteed_update(state, rr, None, dry, compute, finish).await?;
    let warnings = warnings.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(validate::with_warnings(resp, &warnings))
}
