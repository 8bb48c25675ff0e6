//! A small HTTP/1.1 server loop shared by the admin endpoint, the embedded API server and
//! the webhook: every connection is a task in a `JoinSet` owned by the loop, so stopping
//! the loop stops its connections (nothing is detached).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
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
}

/// Reads a request body up to `limit` bytes.
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}

/// Serves one connection (plain TCP or TLS) with `handler`.
pub fn serve_connection<S, F, Fut>(conns: &mut JoinSet<()>, io: S, handler: F)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    conns.spawn(async move {
        let service = hyper::service::service_fn(move |req| {
            let handler = handler.clone();
            async move { Ok::<_, Infallible>(handler(req).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(TokioIo::new(io), service);
        if let Err(err) = conn.await {
            tracing::debug!(%err, "http connection ended with an error");
        }
    });
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
    let mut conns = JoinSet::new();
    let mut handshakes = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let config = tls.read().unwrap_or_else(|p| p.into_inner()).clone();
                    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
                    handshakes.spawn(tokio::time::timeout(std::time::Duration::from_secs(10), accept));
                }
                Err(err) => {
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(done) = handshakes.join_next(), if !handshakes.is_empty() => match done {
                Ok(Ok(Ok(stream))) => serve_connection(&mut conns, stream, handler.clone()),
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
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    serve_connection(&mut conns, stream, handler.clone());
                }
                Err(err) => {
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
    Ok(())
}
