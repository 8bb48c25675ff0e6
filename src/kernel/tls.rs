//! TLS for koord's servers: self-managed CA and serving certificates (rcgen), and rustls
//! server configs from PEM files.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
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

/// Generates a CA named `ca_name` and a serving certificate for `names` (DNS names or IP
/// addresses).
pub fn generate(ca_name: &str, names: &[String]) -> Result<CertBundle, TlsError> {
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
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("koord"),
    );
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    Ok(CertBundle {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
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
    fn generated_bundle_loads() {
        let b = generate("test-ca", &["127.0.0.1".into(), "svc.ns.svc".into()]).unwrap();
        assert!(b.ca_pem.contains("BEGIN CERTIFICATE"));
        server_config(b.cert_pem.as_bytes(), b.key_pem.as_bytes()).unwrap();
        assert!(server_config(b"junk", b.key_pem.as_bytes()).is_err());
    }
}
