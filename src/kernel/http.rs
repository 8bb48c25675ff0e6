//! A small HTTP/1.1 server loop shared by the admin endpoint, the embedded API server and
//! the webhook: every connection is a task in a `JoinSet` owned by the loop, so stopping
//! the loop stops its connections (nothing is detached).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::kernel::listen::Acceptor;
use tokio_util::sync::CancellationToken;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A complete response body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

pub fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

pub fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body.into())
}

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    respond(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading request body: {0}")]
    Read(String),
    #[error("request body not received within {0:?}")]
    Timeout(Duration),
}

/// How a server authenticates its clients: TLS (certificates that may be rotated while it
/// runs) and a bearer token every request but health checks must carry.
#[derive(Clone, Default)]
pub struct ServerAuth {
    pub tls: Option<TlsSource>,
    pub token: Option<String>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("tls", &self.tls.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ServerAuth {
    /// True without a token; else the request must carry it (compared in constant time,
    /// so the answer's timing tells nothing of the token).
    pub fn allows(&self, headers: &hyper::HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let given = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or_default();
        given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// Time a client has to send a whole request body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads a request body up to `limit` bytes, within [`BODY_TIMEOUT`].
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    let declared = hyper::body::Body::size_hint(&body).lower();
    if declared > limit as u64 {
        return Err(BodyError::TooLarge(limit));
    }
    let collected = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await;
    let Ok(collected) = collected else {
        return Err(BodyError::Timeout(BODY_TIMEOUT));
    };
    match collected {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}

/// What one listener allows: without these, idle and half-sent connections hold file
/// descriptors until the process can accept nothing (not even `/readyz`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once (TLS handshakes included); beyond, new ones wait in the
    /// kernel's backlog until one ends.
    pub max_connections: usize,
    /// Time for a request head to arrive, counted from the connection's start or the end
    /// of its previous response (so an idle keep-alive connection is closed after it too).
    pub header_timeout: Duration,
    /// Time for a TLS handshake to complete.
    pub handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: crate::kernel::listen::default_max_connections(),
            header_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves one connection (plain TCP or TLS) with `handler`.
fn serve_connection<S, F, Fut>(conns: &mut JoinSet<()>, io: S, handler: F, header_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    conns.spawn(async move {
        let service = hyper::service::service_fn(move |req| {
            let handler = handler.clone();
            async move { Ok::<_, Infallible>(answer_or_500(handler(req)).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        if let Err(err) = conn.await {
            tracing::debug!(%err, "http connection ended with an error");
        }
    });
}

/// A handler that panics answers 500 instead of dropping the connection (the panic is
/// still a bug: it is logged at error level).
async fn answer_or_500<Fut>(fut: Fut) -> Response<Body>
where
    Fut: Future<Output = Response<Body>>,
{
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic = %what, "request handler panicked");
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
        }
    }
}

/// Where a TLS server gets its current config (certificates may be reloaded).
pub type TlsSource = Arc<std::sync::RwLock<Arc<rustls::ServerConfig>>>;

/// Like [`serve`], over TLS. The handshake runs inside the connection task.
pub async fn serve_tls<F, Fut>(
    listener: TcpListener,
    tls: TlsSource,
    handler: F,
    stop: CancellationToken,
) -> io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    serve_limited(listener, Some(tls), Limits::default(), handler, stop).await
}

/// Accepts connections until `stop` is cancelled, then closes every connection.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    handler: F,
    stop: CancellationToken,
) -> io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    serve_limited(listener, None, Limits::default(), handler, stop).await
}

/// The accept loop behind [`serve`] and [`serve_tls`], with explicit limits.
pub async fn serve_limited<F, Fut>(
    listener: TcpListener,
    tls: Option<TlsSource>,
    limits: Limits,
    handler: F,
    stop: CancellationToken,
) -> io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let mut conns = JoinSet::new();
    let mut handshakes = JoinSet::new();
    let mut acceptor = Acceptor::new(listener, limits.max_connections, "http");
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            stream = acceptor.accept() => match &tls {
                Some(tls) => {
                    let config = tls.read().unwrap_or_else(|p| p.into_inner()).clone();
                    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
                    handshakes.spawn(tokio::time::timeout(limits.handshake_timeout, accept));
                }
                None => serve_connection(&mut conns, stream, handler.clone(), limits.header_timeout),
            },
            Some(done) = handshakes.join_next(), if !handshakes.is_empty() => match done {
                Ok(Ok(Ok(stream))) => serve_connection(&mut conns, stream, handler.clone(), limits.header_timeout),
                Ok(Ok(Err(err))) => tracing::debug!(%err, "TLS handshake failed"),
                Ok(Err(_)) => tracing::debug!("TLS handshake timed out"),
                Err(_) => {}
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    handshakes.shutdown().await;
    conns.shutdown().await;
    Ok(())
}
