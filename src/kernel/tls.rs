//! TLS for koord's servers: self-managed CA and serving certificates (rcgen), and rustls
//! server configs from PEM files.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("certificate: {0}")]
    Cert(String),
    #[error("private key: {0}")]
    Key(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A CA and a serving certificate it signed, all PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertBundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA's certificate and its key (kept to issue new serving certificates under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Validity of what koord generates (kubeadm's choice): a CA ten years, a serving
/// certificate one; both from a day before now, for clocks a little behind.
pub const CA_DAYS: i64 = 3650;
pub const CERT_DAYS: i64 = 365;

fn valid_from_now(params: &mut CertificateParams, days: i64) {
    use k8s_openapi::jiff::{ToSpan, tz::TimeZone};
    let today = k8s_openapi::jiff::Timestamp::now()
        .to_zoned(TimeZone::UTC)
        .date();
    let ymd = |d: k8s_openapi::jiff::civil::Date| {
        rcgen::date_time_ymd(d.year() as i32, d.month() as u8, d.day() as u8)
    };
    if let (Ok(from), Ok(until)) = (today.checked_sub(1.day()), today.checked_add(days.days())) {
        params.not_before = ymd(from);
        params.not_after = ymd(until);
    }
}

fn ca_params(ca_name: &str) -> Result<CertificateParams, TlsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    valid_from_now(&mut ca_params, CA_DAYS);
    Ok(ca_params)
}

/// A new CA named `ca_name`.
pub fn generate_ca(ca_name: &str) -> Result<CaKey, TlsError> {
    let key = KeyPair::generate()?;
    let ca = CertifiedIssuer::self_signed(ca_params(ca_name)?, key)?;
    Ok(CaKey {
        cert_pem: ca.pem(),
        key_pem: ca.key().serialize_pem(),
    })
}

/// A serving certificate for `names` (DNS names or IP addresses) signed by the CA named
/// `ca_name` whose key is `ca`; (certificate, key) PEM.
pub fn issue(ca_name: &str, ca: &CaKey, names: &[String]) -> Result<(String, String), TlsError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| TlsError::Key(e.to_string()))?;
    let issuer = Issuer::new(ca_params(ca_name)?, ca_key);
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("koord"),
    );
    valid_from_now(&mut params, CERT_DAYS);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Generates a CA named `ca_name` and a serving certificate for `names` (DNS names or IP
/// addresses).
pub fn generate(ca_name: &str, names: &[String]) -> Result<CertBundle, TlsError> {
    let ca = generate_ca(ca_name)?;
    let (cert_pem, key_pem) = issue(ca_name, &ca, names)?;
    Ok(CertBundle {
        ca_pem: ca.cert_pem,
        cert_pem,
        key_pem,
    })
}

/// Whether `b` is a usable pair, signed by its CA, valid for `name` now and still
/// `ahead` from now (so it is replaced before it expires).
pub fn valid_for(b: &CertBundle, name: &str, ahead: std::time::Duration) -> bool {
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{ServerName, UnixTime};
    if server_config(b.cert_pem.as_bytes(), b.key_pem.as_bytes()).is_err() {
        return false;
    }
    let parse = |pem: &str| crate::kernel::http_client::parse_pem_certs(pem.as_bytes()).ok();
    let (Some(ca), Some(chain)) = (parse(&b.ca_pem), parse(&b.cert_pem)) else {
        return false;
    };
    let mut roots = rustls::RootCertStore::empty();
    if ca.into_iter().any(|c| roots.add(c).is_err()) || chain.is_empty() {
        return false;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let Ok(verifier) =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
    else {
        return false;
    };
    let Ok(server) = ServerName::try_from(name.to_string()) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    [now, now + ahead].into_iter().all(|at| {
        verifier
            .verify_server_cert(
                &chain[0],
                &chain[1..],
                &server,
                &[],
                UnixTime::since_unix_epoch(at),
            )
            .is_ok()
    })
}

/// A rustls server config from PEM certificate chain and key.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = crate::kernel::http_client::parse_pem_certs(cert_pem)
        .map_err(|e| TlsError::Cert(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Cert("no certificate in PEM".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Key(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_valid_from_now_for_a_bounded_time() {
        let day = std::time::Duration::from_secs(86_400);
        let b = generate("test-ca", &["127.0.0.1".into()]).unwrap();
        assert!(valid_for(&b, "127.0.0.1", 300 * day));
        assert!(
            !valid_for(&b, "127.0.0.1", 400 * day),
            "a serving certificate lasts a year"
        );
        assert!(!valid_for(&b, "10.0.0.1", day), "only for its names");
        // A new serving certificate from the kept CA chains to the same CA.
        let ca = generate_ca("test-ca").unwrap();
        let (cert_pem, key_pem) = issue("test-ca", &ca, &["localhost".into()]).unwrap();
        let again = CertBundle {
            ca_pem: ca.cert_pem.clone(),
            cert_pem,
            key_pem,
        };
        assert!(valid_for(&again, "localhost", day));
        let other_ca = generate_ca("test-ca").unwrap();
        let foreign = CertBundle {
            ca_pem: other_ca.cert_pem,
            ..again
        };
        assert!(!valid_for(&foreign, "localhost", day));
    }

    #[test]
    fn generated_bundle_loads() {
        let b = generate("test-ca", &["127.0.0.1".into(), "svc.ns.svc".into()]).unwrap();
        assert!(b.ca_pem.contains("BEGIN CERTIFICATE"));
        server_config(b.cert_pem.as_bytes(), b.key_pem.as_bytes()).unwrap();
        assert!(server_config(b"junk", b.key_pem.as_bytes()).is_err());
    }
}
