//! The admin endpoint every process serves: `/healthz`, `/readyz`, `/metrics` and
//! `/debug/config`.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::http::{Body, json, respond, text};
use super::{Metrics, Readiness};

#[derive(Clone)]
pub struct AdminState {
    pub readiness: Readiness,
    pub metrics: Metrics,
    /// The effective configuration with secrets redacted.
    pub config: Arc<serde_json::Value>,
}

/// Binds the admin address, naming it in the error.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on admin address {addr} (common.adminAddr): {e}")
    })
}

pub async fn serve(
    listener: TcpListener,
    state: AdminState,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let handler = move |req: Request<hyper::body::Incoming>| {
        let state = state.clone();
        async move {
            let path = req.uri().path();
            match extra_route(path) {
                Some(h) if req.method() == Method::GET => h(&req),
                _ => route(&state, req.method(), path),
            }
        }
    };
    super::http::serve(listener, handler, stop).await?;
    Ok(())
}

/// A path a role adds to the admin endpoint while it runs (the koordlet's `/events`).
pub type ExtraRoute = Arc<dyn Fn(&Request<hyper::body::Incoming>) -> Response<Body> + Send + Sync>;

static EXTRA: std::sync::RwLock<Vec<(&'static str, ExtraRoute)>> =
    std::sync::RwLock::new(Vec::new());

/// Serves `path` with `handler` on every admin endpoint of the process from now on.
pub fn add_route(path: &'static str, handler: ExtraRoute) {
    let mut extra = EXTRA.write().unwrap_or_else(|e| e.into_inner());
    extra.retain(|(p, _)| *p != path);
    extra.push((path, handler));
}

fn extra_route(path: &str) -> Option<ExtraRoute> {
    let extra = EXTRA.read().unwrap_or_else(|e| e.into_inner());
    extra
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, h)| h.clone())
}

fn route(state: &AdminState, method: &Method, path: &str) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    match path {
        "/livez" => text(StatusCode::OK, "ok\n"),
        "/healthz" => {
            let (healthy, body) = state.readiness.health();
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(status, body)
        }
        "/readyz" => {
            let (ready, body) = state.readiness.report();
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(status, body)
        }
        "/metrics" => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            state.metrics.encode(),
        ),
        "/debug/config" => json(StatusCode::OK, &state.config),
        _ => text(StatusCode::NOT_FOUND, format!("{path} not found\n")),
    }
}
