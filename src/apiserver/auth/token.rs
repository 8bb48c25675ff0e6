//! ServiceAccount tokens as kube-apiserver issues them: JWTs (ES256 here) with kube's
//! claims (`sub: system:serviceaccount:<ns>:<name>`, the `kubernetes.io` claim naming the
//! ServiceAccount and the object the token is bound to), an audience and an expiry, signed
//! with a key kept under `<dataDir>/pki/sa.key` so tokens outlive a restart.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};

use crate::apiserver::security::{SecurityError, write_private};

/// The issuer and default audience, as a kubeadm cluster names them.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const KEY_FILE: &str = "sa.key";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ref {
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KubeClaims {
    pub namespace: String,
    pub serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: u64,
    pub iat: u64,
    pub nbf: u64,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kube: KubeClaims,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Tokens whose signature was checked, kept so a client's every request does not verify
/// ECDSA again (about half an HTTP write's cost); expiry and audience are still checked
/// each time. Cleared when full.
const VERIFIED_MAX: usize = 1024;

/// The signing key of this server.
pub struct Signer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    verified: std::sync::Mutex<std::collections::HashMap<String, Claims>>,
}

impl Signer {
    /// The key under `dir` (created on first start, mode 0600); a fresh one in memory
    /// for a server without a data dir.
    pub fn load_or_create(dir: Option<&Path>) -> Result<Signer, SecurityError> {
        if let Some(d) = dir {
            crate::os::files::private_dir(d)?;
        }
        let path = dir.map(|d| d.join(KEY_FILE));
        let stored = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| {
                base64::engine::general_purpose::STANDARD
                    .decode(t.trim())
                    .ok()
            });
        let pkcs8 = match stored {
            Some(k) => k,
            None => {
                let k = EcdsaKeyPair::generate_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    &SystemRandom::new(),
                )
                .map_err(|_| SecurityError::Key("generating the ServiceAccount key".into()))?;
                let k = k.as_ref().to_vec();
                if let Some(p) = &path {
                    let text = base64::engine::general_purpose::STANDARD.encode(&k);
                    write_private(p, &text)?;
                }
                k
            }
        };
        Signer::from_pkcs8(&pkcs8)
    }

    fn from_pkcs8(pkcs8: &[u8]) -> Result<Signer, SecurityError> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|e| SecurityError::Key(format!("the ServiceAccount key: {e}")))?;
        Ok(Signer {
            encoding: EncodingKey::from_ec_der(pkcs8),
            decoding: DecodingKey::from_ec_der(pair.public_key().as_ref()),
            verified: Default::default(),
        })
    }

    pub fn issue(&self, claims: &Claims) -> Result<String, SecurityError> {
        jsonwebtoken::encode(&Header::new(Algorithm::ES256), claims, &self.encoding)
            .map_err(|e| SecurityError::Key(format!("signing a token: {e}")))
    }

    /// The claims of a token this server signed, unexpired, for one of `audiences`.
    pub fn verify(&self, token: &str, audiences: &[String]) -> Option<Claims> {
        let now = now_secs();
        let fits =
            |c: &Claims| c.nbf <= now && now < c.exp && c.aud.iter().any(|a| audiences.contains(a));
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = verified.get(token) {
            return fits(c).then(|| c.clone());
        }
        drop(verified);
        let mut v = Validation::new(Algorithm::ES256);
        v.set_issuer(&[ISSUER]);
        // Audience and time are checked by `fits`, for cached tokens alike.
        v.validate_aud = false;
        v.validate_exp = false;
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &v)
            .ok()?
            .claims;
        verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified.len() >= VERIFIED_MAX {
            verified.clear();
        }
        verified.insert(token.to_string(), claims.clone());
        fits(&claims).then_some(claims)
    }
}

/// The user name of a ServiceAccount.
pub fn sa_user(ns: &str, name: &str) -> String {
    format!("system:serviceaccount:{ns}:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: u64) -> Claims {
        Claims {
            iss: ISSUER.into(),
            sub: sa_user("ns", "sa"),
            aud: vec![ISSUER.into()],
            exp,
            iat: now_secs(),
            nbf: now_secs(),
            jti: "j".into(),
            kube: KubeClaims {
                namespace: "ns".into(),
                serviceaccount: Ref {
                    name: "sa".into(),
                    uid: "u".into(),
                },
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn tokens_verify_until_they_expire_and_only_with_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = Signer::load_or_create(Some(dir.path())).unwrap();
        let t = s.issue(&claims(now_secs() + 600)).unwrap();
        let aud = vec![ISSUER.to_string()];
        assert_eq!(
            s.verify(&t, &aud).unwrap().sub,
            "system:serviceaccount:ns:sa"
        );
        let again = Signer::load_or_create(Some(dir.path())).unwrap();
        assert!(
            again.verify(&t, &aud).is_some(),
            "the key survives a restart"
        );
        assert!(s.verify(&t, &["other".into()]).is_none(), "wrong audience");
        let old = s.issue(&claims(now_secs() - 10)).unwrap();
        assert!(s.verify(&old, &aud).is_none(), "expired");
        let other = Signer::load_or_create(None).unwrap();
        assert!(other.verify(&t, &aud).is_none(), "another server's key");
        let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
    }
}
