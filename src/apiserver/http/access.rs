//! Who may do what, at the door of every request: the user (token, then impersonation),
//! RBAC on the request's attributes (403 with kube's message), and the review and
//! TokenRequest endpoints that answer from the same authenticator and authorizer.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::{ResourceRequest, ServerState};
use crate::apiserver::auth::{self, Attributes, User};
use crate::apiserver::error::ApiError;
use crate::kernel::http::{Body, json as json_response};

/// kube's `NewForbidden` for a denied request.
pub fn forbidden(a: &Attributes, user: &User) -> ApiError {
    let why = a.forbidden_message(&user.name);
    if !a.resource_request {
        return ApiError::forbidden(format!("forbidden: {why}"));
    }
    let qualified = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", a.name)
    };
    let mut e = ApiError::forbidden(message);
    let mut d = json!({"name": a.name, "kind": a.resource});
    if !a.api_group.is_empty() {
        d["group"] = a.api_group.clone().into();
    }
    e.details = Some(d);
    e
}

/// The user a request acts as, authorized for what it asks: 401 without valid
/// credentials, 403 when RBAC (or an impersonation it attempts) does not allow it.
pub fn admit(
    state: &ServerState,
    req: &Request<Incoming>,
    path: &str,
    watch: bool,
) -> Result<User, ApiError> {
    let real = state
        .authn
        .authenticate(req.headers(), &state.store)
        .ok_or_else(ApiError::unauthorized)?;
    let user = match auth::impersonation(req.headers()) {
        None => real,
        Some((as_user, checks)) => {
            for c in checks {
                if !state.authz.authorize(&state.store, &real, &c).0 {
                    return Err(forbidden(&c, &real));
                }
            }
            as_user
        }
    };
    // kube's privileged-group authorizer: nothing to look at for system:masters.
    if user.is_master() {
        return Ok(user);
    }
    let a = Attributes::of_request(req.method(), path, watch);
    if !state.authz.authorize(&state.store, &user, &a).0 {
        return Err(forbidden(&a, &user));
    }
    Ok(user)
}

/// POST of a review: the object back with its `status` (201), never stored.
pub async fn review(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let mut obj = super::subresource::body_json(req).await?;
    obj["apiVersion"] = rr.api_version().into();
    obj["kind"] = rr.info.kind.clone().into();
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let mut spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    if rr.info.kind == "LocalSubjectAccessReview" {
        spec["resourceAttributes"]["namespace"] = rr.ns().into();
    }
    obj["status"] = auth::review::answer(
        &state.store,
        &state.authn,
        &state.authz,
        &rr.user,
        &rr.info.kind,
        &spec,
    );
    Ok(json_response(StatusCode::CREATED, &obj))
}

/// `POST serviceaccounts/<name>/token`.
pub async fn token(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let b = super::subresource::body_json(req).await?;
    let name = rr.name.clone().unwrap_or_default();
    let out =
        auth::review::token_request(&state.store, &state.authn, &rr.info, rr.ns(), &name, &b)?;
    Ok(json_response(StatusCode::CREATED, &out))
}
