//! A small HTTP/1.1 client for koord's own calls: admission webhooks (HTTPS with a CA
//! bundle), the kubelet's `/pods` (HTTPS without verification, as Koordinator does), and
//! tests. One connection per request; these calls are infrequent.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid URL {0:?}")]
    Url(String),
    #[error("connecting to {0}: {1}")]
    Connect(String, String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("request to {0} timed out after {1:?}")]
    Timeout(String, Duration),
    #[error("HTTP: {0}")]
    Http(String),
}

/// How to trust the server of an `https` URL.
#[derive(Clone, Debug)]
pub enum Trust {
    /// PEM certificates (a Kubernetes `caBundle`).
    CaBundle(Vec<u8>),
    /// No verification (kubelet `/pods` with `--kubelet-insecure-tls`, like Koordinator).
    Insecure,
}

/// The most of a response body read: a webhook's or a kubelet's answer past it is an
/// error, not an allocation (a kubelet's `/pods` of 110 pods is a few MiB).
pub const MAX_RESPONSE: usize = 64 << 20;

pub struct Response {
    pub status: StatusCode,
    pub body: Bytes,
}

/// Sends one request and reads the whole response.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    trust: Option<&Trust>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    send_via(None, method, url, headers, body, trust, timeout).await
}

/// Like [`send`], connecting to `via` when given instead of the URL's host: a Service's
/// endpoint, called as kube-apiserver calls a webhook Service (the URL and the server's
/// certificate name the Service, the connection goes to one of its endpoints).
pub async fn send_via(
    via: Option<std::net::SocketAddr>,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    trust: Option<&Trust>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let req = send_inner(via, method, url, headers, body, trust);
    match tokio::time::timeout(timeout, req).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout(url.to_string(), timeout)),
    }
}

async fn send_inner(
    via: Option<std::net::SocketAddr>,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
    trust: Option<&Trust>,
) -> Result<Response, ClientError> {
    let uri: Uri = url.parse().map_err(|_| ClientError::Url(url.to_string()))?;
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or_else(|| ClientError::Url(url.to_string()))?
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = match via {
        Some(addr) => TcpStream::connect(addr).await,
        None => TcpStream::connect((host.as_str(), port)).await,
    };
    let dialed = via.map_or(format!("{host}:{port}"), |a| a.to_string());
    let tcp = tcp.map_err(|e| ClientError::Connect(dialed, e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("{host}:{port}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| ClientError::Http(e.to_string()))?;
    if https {
        let config = tls_config(trust.unwrap_or(&Trust::CaBundle(Vec::new())))?;
        let name =
            ServerName::try_from(host.clone()).map_err(|e| ClientError::Tls(e.to_string()))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| ClientError::Tls(e.to_string()))?;
        exchange(TokioIo::new(tls), req).await
    } else {
        exchange(TokioIo::new(tcp), req).await
    }
}

async fn exchange<T>(io: T, req: Request<Full<Bytes>>) -> Result<Response, ClientError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| ClientError::Http(e.to_string()))?;
    // The connection future must run while the request is in flight; it ends with it.
    let driver = async move {
        let _ = conn.await;
    };
    let request = async move {
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| ClientError::Http(format!("response body: {e}")))?
            .to_bytes();
        Ok(Response { status, body })
    };
    tokio::pin!(driver, request);
    tokio::select! {
        r = &mut request => r,
        // A server that closes after its response (`connection: close`) ends the
        // connection first; the response is already with the request future, and without
        // one that future fails rather than waits (and `send` bounds it anyway).
        _ = &mut driver => request.await,
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_config(trust: &Trust) -> Result<rustls::ClientConfig, ClientError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Tls(e.to_string()))?;
    match trust {
        Trust::Insecure => Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify))
            .with_no_client_auth()),
        Trust::CaBundle(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in parse_pem_certs(pem)? {
                roots
                    .add(cert)
                    .map_err(|e| ClientError::Tls(format!("caBundle: {e}")))?;
            }
            if roots.is_empty() {
                return Err(ClientError::Tls(
                    "no caBundle to verify the server with".into(),
                ));
            }
            Ok(builder.with_root_certificates(roots).with_no_client_auth())
        }
    }
}

/// PEM certificates from a bundle.
pub fn parse_pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClientError::Tls(format!("caBundle is not PEM: {e}")))
}

#[derive(Debug)]
struct NoVerify;

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers with an endless chunked body: the client stops at
    /// `MAX_RESPONSE` with an error instead of holding whatever it is sent.
    #[tokio::test]
    async fn an_endless_response_is_refused_past_the_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 1024];
            let _ = s.read(&mut head).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                .await;
            let chunk = vec![b'x'; 1 << 20];
            let mut sent = 0usize;
            while s.write_all(b"100000\r\n").await.is_ok()
                && s.write_all(&chunk).await.is_ok()
                && s.write_all(b"\r\n").await.is_ok()
            {
                sent += chunk.len();
            }
            sent
        });
        let url = format!("http://{addr}/pods");
        let got = send(Method::GET, &url, &[], None, None, Duration::from_secs(30)).await;
        let err = got.err().expect("refused");
        assert!(err.to_string().contains("response body"), "{err}");
        let sent = server.await.unwrap();
        assert!(sent < 2 * MAX_RESPONSE, "stopped reading, sent {sent}");
    }
}
