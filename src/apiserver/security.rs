//! What makes `--embedded` safe to run as root on a shared machine: HTTPS with a CA of its
//! own, a bearer token every request must carry, and a data directory only its owner can
//! read. The CA, serving certificate and token live under `<dataDir>/pki` so a kubeconfig
//! written once keeps working across restarts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::kernel::tls::{self, CertBundle};
use crate::os::files;

const CA_NAME: &str = "koord-embedded-ca";
const CA_FILE: &str = "ca.crt";
const CA_KEY_FILE: &str = "ca.key";
const CERT_FILE: &str = "apiserver.crt";
const KEY_FILE: &str = "apiserver.key";
const TOKEN_FILE: &str = "token";

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("TLS for the embedded API server: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    File(#[from] files::FileError),
    #[error("{0}")]
    Key(String),
}

/// The credentials of a server: its certificates (when it serves HTTPS) and its token.
#[derive(Clone)]
pub struct Credentials {
    pub tls: Option<CertBundle>,
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    /// Never prints the token or the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("tls", &self.tls.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Credentials {
    pub fn server_config(&self) -> Result<Option<Arc<rustls::ServerConfig>>, SecurityError> {
        let Some(b) = &self.tls else {
            return Ok(None);
        };
        Ok(Some(tls::server_config(
            b.cert_pem.as_bytes(),
            b.key_pem.as_bytes(),
        )?))
    }
}

/// Writes `text` to `path` with mode 0600, atomically.
pub fn write_private(path: &Path, text: &str) -> Result<(), SecurityError> {
    Ok(files::write_atomic(
        path,
        text.as_bytes(),
        0o600,
        files::Sync::Durable,
    )?)
}

/// Where the token in use is kept under a data dir.
pub fn token_file(data_dir: &Path) -> PathBuf {
    data_dir.join("pki").join(TOKEN_FILE)
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Names the serving certificate covers: loopback under every name, and `addr`.
fn san_names(addr: SocketAddr) -> Vec<String> {
    let mut names = vec![
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "localhost".to_string(),
    ];
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        names.push(addr.ip().to_string());
    }
    names
}

/// A credential file: never through a link, never another user's (a token planted in the
/// data dir must not be adopted).
fn read_optional(path: &Path) -> Result<Option<String>, SecurityError> {
    Ok(files::read_private(path)?)
}

/// How long before its end a serving certificate is replaced.
pub const RENEW_BEFORE: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

/// The kept CA (certificate and key), when both are there.
fn kept_ca(pki: &Path) -> Result<Option<tls::CaKey>, SecurityError> {
    Ok(
        match (
            read_optional(&pki.join(CA_FILE))?,
            read_optional(&pki.join(CA_KEY_FILE))?,
        ) {
            (Some(cert_pem), Some(key_pem)) => Some(tls::CaKey { cert_pem, key_pem }),
            _ => None,
        },
    )
}

/// Certificates from `pki`; a serving certificate is issued anew (under the kept CA, so
/// every kubeconfig stays good) when missing, not covering `addr`, or within
/// [`RENEW_BEFORE`] of its end; everything is generated anew when the CA cannot do that.
pub fn load_or_generate_tls(pki: &Path, addr: SocketAddr) -> Result<CertBundle, SecurityError> {
    let names = san_names(addr);
    let marker = pki.join("apiserver.names");
    let existing = (
        read_optional(&pki.join(CA_FILE))?,
        read_optional(&pki.join(CERT_FILE))?,
        read_optional(&pki.join(KEY_FILE))?,
        read_optional(&marker)?,
    );
    if let (Some(ca_pem), Some(cert_pem), Some(key_pem), Some(n)) = existing {
        let b = CertBundle {
            ca_pem,
            cert_pem,
            key_pem,
        };
        if n == names.join(",") && tls::valid_for(&b, &names[0], RENEW_BEFORE) {
            return Ok(b);
        }
    }
    if let Some(ca) = kept_ca(pki)? {
        let (cert_pem, key_pem) = tls::issue(CA_NAME, &ca, &names)?;
        let b = CertBundle {
            ca_pem: ca.cert_pem,
            cert_pem,
            key_pem,
        };
        if tls::valid_for(&b, &names[0], RENEW_BEFORE) {
            tracing::info!(dir = %pki.display(), "issued a new serving certificate for the embedded API server");
            write_private(&pki.join(CERT_FILE), &b.cert_pem)?;
            write_private(&pki.join(KEY_FILE), &b.key_pem)?;
            write_private(&marker, &names.join(","))?;
            return Ok(b);
        }
    }
    tracing::info!(dir = %pki.display(), "generating the embedded API server's CA and certificates");
    let ca = tls::generate_ca(CA_NAME)?;
    let (cert_pem, key_pem) = tls::issue(CA_NAME, &ca, &names)?;
    write_private(&pki.join(CA_KEY_FILE), &ca.key_pem)?;
    write_private(&pki.join(CA_FILE), &ca.cert_pem)?;
    write_private(&pki.join(CERT_FILE), &cert_pem)?;
    write_private(&pki.join(KEY_FILE), &key_pem)?;
    write_private(&marker, &names.join(","))?;
    Ok(CertBundle {
        ca_pem: ca.cert_pem,
        cert_pem,
        key_pem,
    })
}

/// The credentials for a server at `addr`: with `tls`, certificates kept under
/// `<data_dir>/pki` (or made in memory without a data dir); the configured token, else
/// (with `tls`) one generated once and kept there too.
pub fn prepare(
    data_dir: Option<&Path>,
    addr: SocketAddr,
    tls_on: bool,
    configured_token: Option<String>,
) -> Result<Credentials, SecurityError> {
    let configured_token = configured_token.filter(|t| !t.trim().is_empty());
    if !tls_on {
        return Ok(Credentials {
            tls: None,
            token: configured_token,
        });
    }
    let Some(dir) = data_dir else {
        return Ok(Credentials {
            tls: Some(tls::generate(CA_NAME, &san_names(addr))?),
            token: configured_token.or_else(|| Some(random_token())),
        });
    };
    let pki = dir.join("pki");
    files::private_dir(&pki)?;
    let tls = load_or_generate_tls(&pki, addr)?;
    // The token in use is always kept here (0600, like the kubeconfig that holds it too),
    // so the node's own clients (the koordlet reading the kubelet API) find it.
    let path = pki.join(TOKEN_FILE);
    let kept = read_optional(&path)?.map(|t| t.trim().to_string());
    let token = match (configured_token, kept) {
        (Some(t), kept) => {
            if kept.as_deref() != Some(t.as_str()) {
                write_private(&path, &t)?;
            }
            t
        }
        (None, Some(t)) if !t.is_empty() => t,
        (None, _) => {
            let t = random_token();
            write_private(&path, &t)?;
            t
        }
    };
    Ok(Credentials {
        tls: Some(tls),
        token: Some(token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn credentials_are_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let a = prepare(Some(dir.path()), addr, true, None).unwrap();
        let b = prepare(Some(dir.path()), addr, true, None).unwrap();
        assert_eq!(a.token, b.token);
        assert_eq!(a.tls, b.tls);
        assert_eq!(a.token.as_ref().map(String::len), Some(64));
        assert_eq!(mode(&dir.path().join("pki")), 0o700);
        for f in [CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE, TOKEN_FILE] {
            assert_eq!(mode(&dir.path().join("pki").join(f)), 0o600, "{f}");
        }
        assert!(a.server_config().unwrap().is_some());
        assert!(!format!("{a:?}").contains(a.token.as_deref().unwrap()));
        let other: SocketAddr = "10.1.2.3:6443".parse().unwrap();
        let c = prepare(Some(dir.path()), other, true, Some("given".into())).unwrap();
        assert_ne!(c.tls, a.tls, "a new address needs a new certificate");
        assert_eq!(c.token.as_deref(), Some("given"));
    }

    #[test]
    fn a_serving_certificate_near_its_end_is_reissued_under_the_kept_ca() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        files::private_dir(&pki).unwrap();
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let first = load_or_generate_tls(&pki, addr).unwrap();
        assert_eq!(
            load_or_generate_tls(&pki, addr).unwrap(),
            first,
            "kept while good"
        );
        // A certificate that ends within the renewal window (here: one of another CA,
        // as good as expired for this check) is replaced, the CA kept.
        let stale = tls::generate(CA_NAME, &["127.0.0.1".into()]).unwrap();
        write_private(&pki.join(CERT_FILE), &stale.cert_pem).unwrap();
        write_private(&pki.join(KEY_FILE), &stale.key_pem).unwrap();
        let renewed = load_or_generate_tls(&pki, addr).unwrap();
        assert_eq!(renewed.ca_pem, first.ca_pem, "kubeconfigs stay good");
        assert_ne!(renewed.cert_pem, first.cert_pem);
        assert!(tls::valid_for(&renewed, "127.0.0.1", RENEW_BEFORE));
    }

    #[test]
    fn plain_http_keeps_only_a_configured_token() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let c = prepare(None, addr, false, Some(" ".into())).unwrap();
        assert!(c.tls.is_none() && c.token.is_none());
    }
}
