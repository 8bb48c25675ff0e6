//! AdmissionReview (`admission.k8s.io/v1` and `v1beta1`) in and out. Parsing never
//! panics: anything malformed is a [`ReviewError`] that the server answers with 400.

use base64::Engine;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// The parts of an AdmissionRequest the handlers read.
#[derive(Debug, Clone)]
pub struct Request {
    pub api_version: String,
    pub uid: String,
    pub kind: String,
    pub sub_resource: String,
    pub name: String,
    pub namespace: String,
    pub operation: Operation,
    pub username: String,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReviewError {
    #[error("request body is not JSON: {0}")]
    Json(String),
    #[error("AdmissionReview: {0}")]
    Field(String),
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `null`/absent objects become `None`; anything else must be a JSON object.
fn object_at(v: &Value, key: &str) -> Result<Option<Value>, ReviewError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(o @ Value::Object(_)) => Ok(Some(o.clone())),
        Some(_) => Err(ReviewError::Field(format!(
            "request.{key} must be an object"
        ))),
    }
}

impl Request {
    pub fn parse(body: &[u8]) -> Result<Request, ReviewError> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| ReviewError::Json(e.to_string()))?;
        if str_at(&v, "kind") != "AdmissionReview" {
            return Err(ReviewError::Field("kind must be AdmissionReview".into()));
        }
        let api_version = str_at(&v, "apiVersion");
        if !matches!(
            api_version,
            "admission.k8s.io/v1" | "admission.k8s.io/v1beta1"
        ) {
            return Err(ReviewError::Field(format!(
                "unsupported apiVersion {api_version:?}"
            )));
        }
        let r = v
            .get("request")
            .filter(|r| r.is_object())
            .ok_or_else(|| ReviewError::Field("request is missing".into()))?;
        let uid = str_at(r, "uid");
        if uid.is_empty() {
            return Err(ReviewError::Field("request.uid is missing".into()));
        }
        let operation = match str_at(r, "operation") {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            other => {
                return Err(ReviewError::Field(format!(
                    "request.operation {other:?} is not CREATE, UPDATE, DELETE or CONNECT"
                )));
            }
        };
        let kind = r.get("kind").map(|k| str_at(k, "kind")).unwrap_or("");
        Ok(Request {
            api_version: api_version.to_string(),
            uid: uid.to_string(),
            kind: kind.to_string(),
            sub_resource: str_at(r, "subResource").to_string(),
            name: str_at(r, "name").to_string(),
            namespace: str_at(r, "namespace").to_string(),
            operation,
            username: r
                .get("userInfo")
                .map(|u| str_at(u, "username"))
                .unwrap_or("")
                .to_string(),
            object: object_at(r, "object")?,
            old_object: object_at(r, "oldObject")?,
        })
    }

    /// The object under review: the new one, or the old one on DELETE.
    pub fn subject(&self) -> Option<&Value> {
        self.object.as_ref().or(self.old_object.as_ref())
    }
}

/// A handler's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    /// Allowed with a JSON patch (RFC 6902) turning the request object into the result.
    Patch(json_patch::Patch),
    /// Denied: HTTP-like code (400 for invalid, 403 forbidden, 500 internal) and reason.
    Deny {
        code: u16,
        message: String,
    },
}

impl Verdict {
    pub fn deny(message: impl std::fmt::Display) -> Verdict {
        Verdict::Deny {
            code: 400,
            message: message.to_string(),
        }
    }

    pub fn forbid(message: impl Into<String>) -> Verdict {
        Verdict::Deny {
            code: 403,
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Verdict {
        Verdict::Deny {
            code: 500,
            message: message.into(),
        }
    }

    /// Allow, with the patch from `before` to `after` if they differ.
    pub fn patched(before: &Value, after: &Value) -> Verdict {
        let patch = json_patch::diff(before, after);
        if patch.0.is_empty() {
            Verdict::Allow
        } else {
            Verdict::Patch(patch)
        }
    }

    pub fn is_allowed(&self) -> bool {
        !matches!(self, Verdict::Deny { .. })
    }
}

/// The AdmissionReview answering `req`.
pub fn response(req: &Request, verdict: &Verdict) -> Value {
    let mut resp = json!({"uid": req.uid, "allowed": verdict.is_allowed()});
    match verdict {
        Verdict::Allow => {}
        Verdict::Patch(p) => {
            let bytes = serde_json::to_vec(p).unwrap_or_default();
            resp["patchType"] = "JSONPatch".into();
            resp["patch"] = base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into();
        }
        Verdict::Deny { code, message } => {
            let reason = match code {
                403 => "Forbidden",
                500 => "InternalError",
                _ => "BadRequest",
            };
            resp["status"] =
                json!({"status": "Failure", "code": code, "reason": reason, "message": message});
        }
    }
    json!({"apiVersion": req.api_version, "kind": "AdmissionReview", "response": resp})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(op: &str, obj: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "kind": {"kind": "Pod"}, "operation": op, "namespace": "ns", "object": obj}}))
        .unwrap()
    }

    #[test]
    fn parses_and_answers() {
        let req = Request::parse(&review("CREATE", json!({"metadata": {}}))).unwrap();
        assert_eq!(
            (req.operation, req.kind.as_str()),
            (Operation::Create, "Pod")
        );
        let before = json!({"a": 1});
        let out = response(&req, &Verdict::patched(&before, &json!({"a": 2})));
        assert_eq!(out["response"]["uid"], "u1");
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let denied = response(&req, &Verdict::deny("field x is wrong"));
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(denied["response"]["status"]["message"], "field x is wrong");
    }

    #[test]
    fn malformed_reviews_are_errors() {
        for body in [
            &b"not json"[..],
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#,
            br#"{"kind":"Pod","apiVersion":"v1","request":{"uid":"x"}}"#,
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE"}}"#,
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x","operation":"EAT"}}"#,
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x","operation":"CREATE","object":5}}"#,
        ] {
            assert!(Request::parse(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }
}
