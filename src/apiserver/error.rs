//! API errors as `Status` objects, with the reasons and codes Kubernetes uses.

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::apiserver::cause::{Cause, quote};
use crate::apiserver::registry::ResourceInfo;
use crate::kernel::http::{Body, json as json_response};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, info: &ResourceInfo, name: &str) -> Self {
        let mut d = json!({"name": name, "kind": info.resource});
        if !info.group.is_empty() {
            d["group"] = info.group.clone().into();
        }
        self.details = Some(d);
        self
    }

    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", info.qualified()),
        )
        .with_details(info, name)
    }

    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", info.qualified()),
        )
        .with_details(info, name)
    }

    pub fn conflict(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                info.qualified()
            ),
        )
        .with_details(info, name)
    }

    pub fn stale(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            info,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `message` reads `field: reason` as Kubernetes' field errors do; kubectl prints the
    /// causes.
    pub fn invalid(info: &ResourceInfo, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let (field, detail) = message.split_once(": ").unwrap_or(("", message.as_str()));
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {message}", qualified_kind(info)),
        );
        err.details = Some(json!({
            "name": name,
            "kind": info.kind,
            "group": info.group,
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}]
        }));
        err
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn route_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn method_not_allowed(what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource: {what}"),
        )
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 406 with kube-apiserver's wording, for an Accept header naming only what this
    /// object cannot be served as.
    pub fn not_acceptable(media: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (not {media})"
            ),
        )
    }

    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// `details.retryAfterSeconds`, also sent as the `Retry-After` header.
    pub fn retry_after(mut self, secs: u64) -> Self {
        let d = self.details.get_or_insert_with(|| json!({}));
        d["retryAfterSeconds"] = secs.into();
        self
    }

    /// 413 with kube-apiserver's wording.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// A resourceVersion the server has not reached yet (kube-apiserver waits a few
    /// seconds for it first).
    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        e
    }

    /// An invalid option value, as kube-apiserver reports `dryRun=garbage`.
    pub fn invalid_option(kind: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            422,
            "Invalid",
            format!("{kind}.meta.k8s.io \"\" is invalid: {message}"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn status_object(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }

    pub fn into_response(self) -> Response<Body> {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = json_response(code, &self.status_object());
        let retry = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64);
        if let Some(secs) = retry.filter(|_| code == StatusCode::TOO_MANY_REQUESTS) {
            resp.headers_mut()
                .insert(hyper::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}

impl From<crate::apiserver::store::StoreError> for ApiError {
    /// A full disk is kube-apiserver's 507; any other storage failure a 500.
    fn from(e: crate::apiserver::store::StoreError) -> Self {
        match e {
            crate::apiserver::store::StoreError::Unavailable(f) if f.no_space => {
                ApiError::new(507, "InsufficientStorage", f.to_string())
            }
            e => ApiError::internal(e.to_string()),
        }
    }
}

/// `{"kind":"Status","status":"Success"}` for deletes of collections and subresources.
/// `Kind.group` as kube names a kind in an `Invalid` message (`Pod`, `Deployment.apps`).
pub fn qualified_kind(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.kind.clone()
    } else {
        format!("{}.{}", info.kind, info.group)
    }
}

/// kube's `NewInvalid`: one 422 with a cause per field (`[a, b]` when there are several).
pub fn invalid_causes(info: &ResourceInfo, name: &str, causes: &[Cause]) -> ApiError {
    let list: Vec<String> = causes.iter().map(Cause::message).collect();
    let joined = match list.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let mut err = ApiError::new(
        422,
        "Invalid",
        format!(
            "{} {} is invalid: {joined}",
            qualified_kind(info),
            quote(name)
        ),
    );
    let mut details = json!({
        "name": name,
        "kind": info.kind,
        "causes": causes.iter().map(Cause::status_cause).collect::<Vec<_>>(),
    });
    if !info.group.is_empty() {
        details["group"] = info.group.clone().into();
    }
    err.details = Some(details);
    err
}

/// `Err(invalid)` when there is any cause.
pub fn check_causes(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid_causes(info, name, &causes))
    }
}

pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

impl From<crate::kernel::http::BodyError> for ApiError {
    fn from(e: crate::kernel::http::BodyError) -> Self {
        use crate::kernel::http::BodyError;
        match e {
            BodyError::TooLarge(limit) => ApiError::too_large(limit),
            BodyError::Timeout(_) => ApiError::new(408, "Timeout", e.to_string()),
            BodyError::Read(_) => ApiError::bad_request(e.to_string()),
        }
    }
}
