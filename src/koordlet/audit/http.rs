//! `/events` on the koordlet's admin endpoint (gate `AuditEventsHTTPHandler`).

use std::sync::Arc;

use hyper::{Request, StatusCode};

use super::Auditor;
use crate::kernel::http::respond;

/// Starts recording with gate `AuditEvents`, and serves `/events` with
/// `AuditEventsHTTPHandler` (Koordinator's handler reads nothing without the first).
pub fn start(config: &super::Config, record: bool, http: bool) {
    if !record {
        return;
    }
    let auditor = super::setup(config.clone());
    tracing::info!(dir = %config.log_dir.display(), "audit events recorded");
    if http {
        crate::kernel::admin::add_route("/events", Arc::new(move |req| handle(&auditor, req)));
    }
}

fn handle<B>(auditor: &Auditor, req: &Request<B>) -> hyper::Response<crate::kernel::http::Body> {
    let query: Vec<(String, String)> = req
        .uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let json = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .any(|v| v.as_bytes() == b"application/json");
    let answer = auditor.query(get("size"), get("pageToken"), json);
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut resp = respond(status, answer.content_type, answer.body);
    if let Some(t) = answer.next_page_token
        && let Ok(v) = hyper::header::HeaderValue::from_str(&t)
    {
        resp.headers_mut().insert("Next-Page-Token", v);
    }
    resp
}
