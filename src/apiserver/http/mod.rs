//! The REST surface: routing of `/api`, `/apis`, discovery, OpenAPI and resource paths
//! to the handlers.

pub mod access;
pub mod apply;
pub mod delete;
pub mod exec;
pub mod logs;
pub mod metrics;
pub mod negotiate;
pub mod patch;
pub mod read;
pub mod scale;
pub mod subresource;
pub mod write;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::admission::Admission;
use super::registry::{Registry, ResourceInfo};
use super::store::{Store, Stored};
use crate::apiserver::error::ApiError;
use crate::kernel::http::{Body, json as json_response, respond, text};

/// Largest request body accepted (kube-apiserver's limit is about 3 MiB).
pub const MAX_BODY: usize = 3 << 20;

pub struct ServerState {
    pub store: Arc<Store>,
    pub registry: Registry,
    pub admission: Admission,
    /// The TLS of the listener and the admin token (the node runtime's kubelet API takes
    /// the same credentials).
    pub auth: crate::kernel::http::ServerAuth,
    /// Every request but health checks is authenticated (admin token or ServiceAccount
    /// token) and authorized by RBAC.
    pub authn: crate::apiserver::auth::Authenticator,
    pub authz: crate::apiserver::auth::rbac::Authorizer,
    pub server_addr: String,
    pub continues: ContinueCache,
    pub bookmark_interval: Duration,
    /// Where the embedded node runtime writes container logs (`pods/log`).
    pub pod_logs: Option<std::path::PathBuf>,
    /// The embedded node runtime, for `pods/exec`.
    pub exec: std::sync::OnceLock<crate::noderuntime::exec::Exec>,
    /// The `(group, resource)`s a garbage collector in this process looks after: only for
    /// them does a DELETE with `Orphan` or `Foreground` propagation hold the object with
    /// kube's `orphan` / `foregroundDeletion` finalizer (nothing would ever release others).
    pub collected: std::sync::OnceLock<Vec<(String, String)>>,
    pub inflight: InFlight,
}

/// kube-apiserver's max-in-flight filter: reads and writes each have so many seats;
/// long-running requests (watches, logs, exec) take none.
#[derive(Debug, Clone)]
pub struct InFlight {
    read_only: Arc<tokio::sync::Semaphore>,
    mutating: Arc<tokio::sync::Semaphore>,
}

/// kube-apiserver's defaults: `--max-requests-inflight`, `--max-mutating-requests-inflight`.
pub const MAX_REQUESTS_INFLIGHT: usize = 400;
pub const MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

impl Default for InFlight {
    fn default() -> Self {
        InFlight::new(MAX_REQUESTS_INFLIGHT, MAX_MUTATING_REQUESTS_INFLIGHT)
    }
}

impl InFlight {
    pub fn new(read_only: usize, mutating: usize) -> InFlight {
        InFlight {
            read_only: Arc::new(tokio::sync::Semaphore::new(read_only.max(1))),
            mutating: Arc::new(tokio::sync::Semaphore::new(mutating.max(1))),
        }
    }

    /// A seat, or kube's 429 when every one is taken.
    fn seat(&self, mutating: bool) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        let sem = if mutating {
            &self.mutating
        } else {
            &self.read_only
        };
        sem.clone().try_acquire_owned().map_err(|_| {
            ApiError::too_many_requests("Too many requests, please try again later.").retry_after(1)
        })
    }
}

/// Watches, followed logs, exec and attach hold their request for as long as they last.
fn long_running(rr: &ResourceRequest, q: &Query) -> bool {
    rr.watch_path
        || q.flag("watch")
        || matches!(
            rr.subresource.as_deref(),
            Some("exec" | "attach" | "portforward" | "proxy")
        )
        || (rr.subresource.as_deref() == Some("log") && q.flag("follow"))
}

/// The response with `seat` held until its body has been sent.
fn holding(resp: Response<Body>, seat: tokio::sync::OwnedSemaphorePermit) -> Response<Body> {
    use http_body_util::BodyExt;
    resp.map(|b| {
        b.map_frame(move |f| {
            let _held = &seat;
            f
        })
        .boxed_unsync()
    })
}

/// Snapshots behind `continue` tokens, so every page of a list is served at the
/// revision of its first page. Bounded by count, age and the bytes of the objects they
/// hold (a snapshot keeps versions the store has since replaced alive); the newest is
/// always kept, so a list bigger than the budget still pages.
pub struct ContinueCache {
    inner: Mutex<(u64, HashMap<u64, Snapshot>)>,
    max_bytes: u64,
}

impl Default for ContinueCache {
    fn default() -> Self {
        ContinueCache::with_budget(CONTINUE_MAX_BYTES)
    }
}

/// When it was taken, its revision, the items, and their bytes.
type Snapshot = (Instant, u64, Arc<Vec<Arc<Stored>>>, u64);

const CONTINUE_TTL: Duration = Duration::from_secs(120);
/// Snapshots kept at once; the oldest go first (their clients re-list on 410).
const CONTINUE_MAX: usize = 64;
/// Bytes of objects all snapshots may hold together.
pub const CONTINUE_MAX_BYTES: u64 = 256 << 20;

impl ContinueCache {
    pub fn with_budget(max_bytes: u64) -> ContinueCache {
        ContinueCache {
            inner: Mutex::default(),
            max_bytes,
        }
    }

    pub fn put(&self, rev: u64, items: Arc<Vec<Arc<Stored>>>) -> u64 {
        let bytes: u64 = items.iter().map(|o| o.bytes.len() as u64).sum();
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.retain(|_, (at, _, _, _)| at.elapsed() < CONTINUE_TTL);
        let held = |m: &HashMap<u64, Snapshot>| m.values().map(|s| s.3).sum::<u64>();
        while g.1.len() >= CONTINUE_MAX || (!g.1.is_empty() && held(&g.1) + bytes > self.max_bytes)
        {
            let Some(oldest) = g.1.keys().min().copied() else {
                break;
            };
            g.1.remove(&oldest);
        }
        g.0 += 1;
        let id = g.0;
        g.1.insert(id, (Instant::now(), rev, items, bytes));
        id
    }

    pub fn get(&self, id: u64) -> Option<(u64, Arc<Vec<Arc<Stored>>>)> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.get(&id)
            .filter(|(at, _, _, _)| at.elapsed() < CONTINUE_TTL)
            .map(|(_, r, i, _)| (*r, i.clone()))
    }

    /// Bytes of the objects the snapshots hold.
    pub fn held_bytes(&self) -> u64 {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.values().map(|s| s.3).sum()
    }
}

/// Decoded query parameters.
#[derive(Default, Debug)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
    pub fn u64(&self, k: &str) -> Option<u64> {
        self.get(k).and_then(|v| v.parse().ok())
    }
}

/// How long a read for a resourceVersion the store has not reached waits for it.
const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

/// The `resourceVersion` parameter of a read: `None` when absent or "0" (any state will
/// do). It must be an unsigned integer (400); one above the current revision is waited for
/// briefly, then refused as kube-apiserver does ("Too large resource version").
pub async fn read_rv(store: &Store, q: &Query) -> Result<Option<u64>, ApiError> {
    let Some(raw) = q.get("resourceVersion") else {
        return Ok(None);
    };
    let rv: u64 = raw.parse().map_err(|e| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: {raw:?}: invalid resource version: {e}"
        ))
    })?;
    if rv == 0 {
        return Ok(None);
    }
    let deadline = Instant::now() + FUTURE_RV_WAIT;
    while store.visible_rev() < rv {
        if Instant::now() >= deadline {
            return Err(ApiError::too_large_rv(rv, store.visible_rev()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Some(rv))
}

/// Whether a write is a dry run: `dryRun=All`, the only value kube-apiserver accepts.
pub fn dry_run(q: &Query, options_kind: &str) -> Result<bool, ApiError> {
    match q.get("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::invalid_option(
            options_kind,
            format!("dryRun[0]: Unsupported value: {other:?}: supported values: \"All\""),
        )),
    }
}

/// One resource request after routing.
pub struct ResourceRequest {
    pub info: Arc<ResourceInfo>,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub watch_path: bool,
    /// Who asks (after impersonation).
    pub user: Arc<crate::apiserver::auth::User>,
}

impl ResourceRequest {
    pub fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }
    pub fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

/// The object bytes as the requested version presents them.
pub fn render(obj: &Stored, api_version: &str) -> Bytes {
    let prefix = format!("{{\"apiVersion\":\"{api_version}\",");
    if obj.bytes.starts_with(prefix.as_bytes()) {
        return obj.bytes.clone();
    }
    let mut v = obj.value();
    v["apiVersion"] = api_version.into();
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

pub fn object_response(code: StatusCode, obj: &Stored, api_version: &str) -> Response<Body> {
    respond(code, "application/json", render(obj, api_version))
}

pub fn version_info() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-koord",
        "gitCommit": env!("CARGO_PKG_VERSION"), "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "rust", "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// Entry point for every request.
pub async fn handle(state: Arc<ServerState>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    if matches!(path.as_str(), "/healthz" | "/livez") {
        return text(StatusCode::OK, "ok");
    }
    if path == "/readyz" {
        return match state.store.failure() {
            None => text(StatusCode::OK, "ok"),
            Some(f) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("[-]etcd failed: {f}\n"),
            ),
        };
    }
    let query = Query::parse(req.uri().query());
    let user = match access::admit(&state, &req, &path, query.flag("watch")) {
        Ok(u) => Arc::new(u),
        Err(e) => return e.into_response(),
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    tracing::debug!(method = %req.method(), path = %path, query = req.uri().query().unwrap_or(""), "request");
    let ok = |v: &Value| Ok(Routed::Done(json_response(StatusCode::OK, v)));
    let routed = match segs.as_slice() {
        ["version"] => ok(&version_info()),
        ["api"] => ok(&state.registry.api_versions(&state.server_addr)),
        ["apis"] => ok(&state.registry.group_list()),
        ["apis", g] => state
            .registry
            .group(g)
            .map_or_else(|| Err(ApiError::route_not_found()), |d| ok(&d)),
        ["api", "v1"] => discovery(&state, "", "v1").map(Routed::Done),
        ["apis", g, v] => discovery(&state, g, v).map(Routed::Done),
        [
            "apis",
            crate::apiserver::registry::METRICS_GROUP,
            "v1beta1",
            rest @ ..,
        ] if !rest.is_empty() => metrics::serve(&state, rest, &query).map(Routed::Done),
        ["openapi", rest @ ..] => super::openapi::serve(&state.registry, rest).map(Routed::Done),
        ["api", "v1", rest @ ..] => resolve(&state, "", "v1", rest, &user).map(Routed::Resource),
        ["apis", g, v, rest @ ..] => resolve(&state, g, v, rest, &user).map(Routed::Resource),
        _ => Err(ApiError::route_not_found()),
    };
    let mutating = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let accept = negotiate::accept_of(&req);
    let mut seat = None;
    let result = match routed {
        Ok(Routed::Done(resp)) => return resp,
        Ok(Routed::Resource(rr)) if long_running(&rr, &query) => {
            dispatch(&state, rr, req, &query, accept.as_deref()).await
        }
        Ok(Routed::Resource(rr)) => match state.inflight.seat(mutating) {
            Ok(s) => {
                seat = Some(s);
                dispatch(&state, rr, req, &query, accept.as_deref()).await
            }
            Err(e) => Err(e),
        },
        Err(err) => Err(err),
    };
    // A write is answered once it is on disk (with whatever else committed meanwhile).
    if mutating
        && result.is_ok()
        && let Err(e) = state.store.durable(state.store.rev()).await
    {
        return ApiError::from(e).into_response();
    }
    let resp = result.unwrap_or_else(ApiError::into_response);
    let resp = negotiate::negotiate(resp, accept.as_deref()).await;
    // A body of one known size is handed to the connection whole; only a streamed one
    // (a list) is still being produced when the handler returns.
    let streamed = hyper::body::Body::size_hint(resp.body()).exact().is_none();
    match seat {
        Some(s) if streamed => holding(resp, s),
        _ => resp,
    }
}

enum Routed {
    Done(Response<Body>),
    Resource(ResourceRequest),
}

fn discovery(state: &ServerState, g: &str, v: &str) -> Result<Response<Body>, ApiError> {
    state
        .registry
        .resource_list(g, v)
        .map(|d| json_response(StatusCode::OK, &d))
        .ok_or_else(ApiError::route_not_found)
}

fn resolve(
    state: &ServerState,
    group: &str,
    version: &str,
    rest: &[&str],
    user: &Arc<crate::apiserver::auth::User>,
) -> Result<ResourceRequest, ApiError> {
    let (watch_path, rest) = match rest.first() {
        Some(&"watch") => (true, &rest[1..]),
        _ => (false, rest),
    };
    let lookup = |r: &str| state.registry.lookup(group, version, r);
    let build = |info: Arc<ResourceInfo>,
                 ns: Option<&str>,
                 tail: &[&str]|
     -> Result<ResourceRequest, ApiError> {
        if tail.len() > 2 {
            return Err(ApiError::route_not_found());
        }
        let sub = tail.get(1).map(|s| s.to_string());
        if let Some(s) = &sub
            && !info.has_subresource(s)
        {
            return Err(ApiError::route_not_found());
        }
        Ok(ResourceRequest {
            info,
            version: version.to_string(),
            namespace: ns.map(str::to_string),
            name: tail.first().map(|s| s.to_string()),
            subresource: sub,
            watch_path,
            user: user.clone(),
        })
    };
    match rest {
        ["namespaces", ns, res, tail @ ..] if lookup(res).is_some_and(|i| i.namespaced) => build(
            lookup(res).ok_or_else(ApiError::route_not_found)?,
            Some(ns),
            tail,
        ),
        [res, tail @ ..] => {
            let info = lookup(res).ok_or_else(ApiError::route_not_found)?;
            if info.namespaced && !tail.is_empty() {
                return Err(ApiError::route_not_found());
            }
            build(info, None, tail)
        }
        [] => Err(ApiError::route_not_found()),
    }
}

async fn dispatch(
    state: &Arc<ServerState>,
    rr: ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let method = req.method().clone();
    let sub = rr.subresource.clone();
    if rr.info.is_review() {
        return match (&method, rr.name.is_some()) {
            (&Method::POST, false) => access::review(state, &rr, req).await,
            _ => Err(ApiError::method_not_allowed(&format!(
                "{method} {}",
                rr.info.qualified()
            ))),
        };
    }
    match (&method, rr.name.is_some(), sub.as_deref()) {
        (&Method::GET, false, None) if rr.watch_path || q.flag("watch") => {
            read::watch(state, &rr, q, accept).await
        }
        (&Method::GET, false, None) => {
            read_rv(&state.store, q).await?;
            read::list(state, &rr, q, accept)
        }
        (&Method::GET, true, Some("log")) => logs::serve(state, &rr, q).await,
        (&Method::GET | &Method::PUT | &Method::PATCH, true, Some("scale")) => {
            scale::serve(state, &rr, req, q).await
        }
        (&Method::GET | &Method::POST, true, Some("exec")) => exec::serve(state, &rr, req).await,
        (&Method::GET, true, None | Some("status")) => {
            read_rv(&state.store, q).await?;
            read::get(state, &rr, accept)
        }
        (&Method::POST, false, None) => write::create(state, &rr, req, q).await,
        (&Method::POST, true, Some("binding")) => subresource::binding(state, &rr, req).await,
        (&Method::POST, true, Some("token")) => access::token(state, &rr, req).await,
        (&Method::POST, true, Some("eviction")) => subresource::eviction(state, &rr, req).await,
        (&Method::PUT, true, None | Some("status") | Some("finalize")) => {
            write::update(state, &rr, req, q).await
        }
        (&Method::PATCH, true, None | Some("status")) => patch::patch(state, &rr, req, q).await,
        (&Method::DELETE, true, None) => delete::delete(state, &rr, req, q).await,
        (&Method::DELETE, false, None) => delete::delete_collection(state, &rr, q).await,
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} {}",
            rr.info.qualified()
        ))),
    }
}
