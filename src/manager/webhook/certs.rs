//! Serving certificates: self-managed (a CA and serving certificate generated once and
//! kept in a Secret, or in files for `WEBHOOK_CERT_WRITER=fs`) or provided (files mounted
//! by the operator, re-read on every resync so rotation needs no restart).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde::{Deserialize, Serialize};

use super::Config;
use crate::kernel::tls::{self, CertBundle};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CertWriter {
    /// Generate into the Secret `namespace/secretName` (Koordinator's default).
    #[default]
    Secret,
    /// Generate into `certDir` (Koordinator's `WEBHOOK_CERT_WRITER=fs`).
    Fs,
    /// Use `certDir/tls.crt` and `tls.key` as given (and `ca.crt` for the caBundle).
    Provided,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("Secret {0}: {1}")]
    Api(String, kube::Error),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// What the server presents, and the CA the webhook configurations should trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub ca_pem: Option<String>,
    pub cert_pem: String,
    pub key_pem: String,
}

const CA_CERT: &str = "ca-cert.pem";
const CERT: &str = "cert.pem";
const KEY: &str = "key.pem";
const TLS_CERT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";

/// The names the serving certificate must cover: the Service's DNS names and `host`.
pub fn names(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if !cfg.host.is_empty() {
        out.push(cfg.host.clone());
    }
    let svc = format!("{}.{}.svc", cfg.service_name, cfg.namespace);
    out.push(format!("{svc}.cluster.local"));
    out.push(svc);
    out
}

/// The name Koordinator checks a stored certificate against.
fn primary_name(cfg: &Config) -> String {
    names(cfg).into_iter().next().unwrap_or_default()
}

/// Whether `b` is a usable pair, signed by its CA, valid for `name` six months from now
/// (so a certificate is renewed half a year before it expires).
pub fn valid(b: &CertBundle, name: &str) -> bool {
    tls::valid_for(b, name, Duration::from_secs(180 * 86_400))
}

fn generate(cfg: &Config) -> Result<CertBundle, CertError> {
    Ok(tls::generate("koordinator-webhook-ca", &names(cfg))?)
}

fn served(b: CertBundle) -> Served {
    Served {
        ca_pem: Some(b.ca_pem),
        cert_pem: b.cert_pem,
        key_pem: b.key_pem,
    }
}

/// The certificate to serve now, creating or renewing it when self-managed.
pub async fn ensure(cfg: &Config, client: &kube::Client) -> Result<Served, CertError> {
    match cfg.cert_writer {
        CertWriter::Secret => ensure_secret(cfg, client).await.map(served),
        CertWriter::Fs => ensure_files(cfg).map(served),
        CertWriter::Provided => provided(&cfg.cert_dir),
    }
}

fn from_secret(s: &Secret) -> CertBundle {
    let get = |k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default()
    };
    CertBundle {
        ca_pem: get(CA_CERT),
        cert_pem: get(CERT),
        key_pem: get(KEY),
    }
}

fn secret_data(b: &CertBundle) -> BTreeMap<String, ByteString> {
    [
        (CA_CERT, &b.ca_pem),
        (CERT, &b.cert_pem),
        (TLS_CERT, &b.cert_pem),
        (KEY, &b.key_pem),
        (TLS_KEY, &b.key_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.clone().into_bytes())))
    .collect()
}

async fn ensure_secret(cfg: &Config, client: &kube::Client) -> Result<CertBundle, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    let what = format!("{}/{}", cfg.namespace, cfg.secret_name);
    let err = |e| CertError::Api(what.clone(), e);
    let name = primary_name(cfg);
    for _ in 0..3 {
        let current = api.get_opt(&cfg.secret_name).await.map_err(err)?;
        if let Some(s) = &current {
            let b = from_secret(s);
            if valid(&b, &name) {
                return Ok(b);
            }
        }
        let bundle = generate(cfg)?;
        let mut secret = current.clone().unwrap_or_else(|| Secret {
            metadata: ObjectMeta {
                name: Some(cfg.secret_name.clone()),
                namespace: Some(cfg.namespace.clone()),
                ..Default::default()
            },
            ..Default::default()
        });
        secret.data = Some(secret_data(&bundle));
        let pp = PostParams::default();
        let result = match current {
            None => api.create(&pp, &secret).await,
            Some(_) => api.replace(&cfg.secret_name, &pp, &secret).await,
        };
        match result {
            Ok(_) => {
                tracing::info!(secret = %what, "generated webhook certificates");
                return Ok(bundle);
            }
            // Another replica won the race: use what it wrote.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(err(e)),
        }
    }
    let s = api.get(&cfg.secret_name).await.map_err(err)?;
    Ok(from_secret(&s))
}

fn read(path: &Path) -> Result<String, CertError> {
    std::fs::read_to_string(path).map_err(|e| CertError::Io(path.to_path_buf(), e))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), CertError> {
    use crate::os::files;
    let mode = if private { 0o600 } else { 0o644 };
    files::write_atomic(path, text.as_bytes(), mode, files::Sync::Cached).map_err(|e| match e {
        files::FileError::Io(p, e) => CertError::Io(p, e),
        other => CertError::Io(path.to_path_buf(), std::io::Error::other(other.to_string())),
    })
}

fn ensure_files(cfg: &Config) -> Result<CertBundle, CertError> {
    let dir = &cfg.cert_dir;
    let current = CertBundle {
        ca_pem: read(&dir.join(CA_CERT)).unwrap_or_default(),
        cert_pem: read(&dir.join(CERT)).unwrap_or_default(),
        key_pem: read(&dir.join(KEY)).unwrap_or_default(),
    };
    if valid(&current, &primary_name(cfg)) {
        return Ok(current);
    }
    std::fs::create_dir_all(dir).map_err(|e| CertError::Io(dir.clone(), e))?;
    let b = generate(cfg)?;
    write(&dir.join(CA_CERT), &b.ca_pem, false)?;
    for f in [CERT, TLS_CERT] {
        write(&dir.join(f), &b.cert_pem, false)?;
    }
    for f in [KEY, TLS_KEY] {
        write(&dir.join(f), &b.key_pem, true)?;
    }
    tracing::info!(dir = %dir.display(), "generated webhook certificates");
    Ok(b)
}

fn provided(dir: &Path) -> Result<Served, CertError> {
    let cert_pem = read(&dir.join(TLS_CERT))?;
    let key_pem = read(&dir.join(TLS_KEY))?;
    tls::server_config(cert_pem.as_bytes(), key_pem.as_bytes())?;
    let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).ok();
    Ok(Served {
        ca_pem,
        cert_pem,
        key_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certs_are_valid_for_their_names_only() {
        let cfg = Config {
            host: "127.0.0.1".into(),
            ..Config::default()
        };
        let b = generate(&cfg).unwrap();
        assert!(valid(&b, "127.0.0.1"));
        assert!(valid(
            &b,
            "koordinator-webhook-service.koordinator-system.svc"
        ));
        assert!(!valid(&b, "other.example.com"));
        let other = generate(&cfg).unwrap();
        let mixed = CertBundle {
            ca_pem: other.ca_pem,
            ..b.clone()
        };
        assert!(!valid(&mixed, "127.0.0.1"), "signed by another CA");
        assert!(!valid(
            &CertBundle {
                ca_pem: String::new(),
                cert_pem: String::new(),
                key_pem: String::new()
            },
            "x"
        ));
    }

    #[test]
    fn fs_writer_keeps_valid_files_and_provided_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config {
            host: "127.0.0.1".into(),
            cert_dir: dir.path().to_path_buf(),
            cert_writer: CertWriter::Fs,
            ..Config::default()
        };
        let first = ensure_files(&cfg).unwrap();
        assert_eq!(ensure_files(&cfg).unwrap(), first, "valid files are kept");
        std::fs::write(dir.path().join(CERT), "garbage").unwrap();
        assert_ne!(
            ensure_files(&cfg).unwrap(),
            first,
            "invalid files are replaced"
        );
        let p = provided(dir.path()).unwrap();
        assert!(p.ca_pem.is_none(), "no ca.crt in the directory");
        let err = provided(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.crt"), "{err}");
    }
}
