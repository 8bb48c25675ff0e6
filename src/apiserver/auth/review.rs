//! The review APIs, answered at once and never stored, from the same authenticator and
//! authorizer every request meets: TokenRequest (`serviceaccounts/<name>/token`, what
//! `kubectl create token` calls), TokenReview, SelfSubjectReview (`kubectl auth whoami`),
//! SelfSubjectAccessReview and SubjectAccessReview (`kubectl auth can-i`),
//! SelfSubjectRulesReview (`kubectl auth can-i --list`).

use serde_json::{Value, json};

use super::rbac::Authorizer;
use super::token::{self, Claims, KubeClaims, Ref};
use super::{Attributes, Authenticator, User};
use crate::apiserver::cause::Cause;
use crate::apiserver::error::{ApiError, invalid_causes};
use crate::apiserver::registry::ResourceInfo;
use crate::apiserver::store::Store;

const MIN_EXPIRY: u64 = 600;
const DEFAULT_EXPIRY: u64 = 3600;

fn rfc3339(secs: u64) -> String {
    crate::api::time::format_unix(secs as i64)
}

/// `status` of a review of `kind` created by `user`.
pub fn answer(
    store: &Store,
    authn: &Authenticator,
    authz: &Authorizer,
    user: &User,
    kind: &str,
    spec: &Value,
) -> Value {
    match kind {
        "TokenReview" => token_review(store, authn, spec),
        "SelfSubjectReview" => json!({"userInfo": user.to_json()}),
        "SelfSubjectAccessReview" => access(store, authz, user, spec),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let subject = User {
                name: spec
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                uid: spec.get("uid").and_then(Value::as_str).unwrap_or("").into(),
                groups: strings(spec.get("groups")),
                extra: spec
                    .get("extra")
                    .and_then(|e| serde_json::from_value(e.clone()).ok())
                    .unwrap_or_default(),
            };
            access(store, authz, &subject, spec)
        }
        _ => rules_review(store, authz, user, spec),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn token_review(store: &Store, authn: &Authenticator, spec: &Value) -> Value {
    let t = spec.get("token").and_then(Value::as_str).unwrap_or("");
    let mut audiences = strings(spec.get("audiences"));
    if audiences.is_empty() {
        audiences.push(token::ISSUER.into());
    }
    match authn.service_account(t, &audiences, store) {
        Some(u) => json!({"authenticated": true, "user": u.to_json(), "audiences": audiences}),
        None => {
            json!({"authenticated": false, "user": {}, "error": "[invalid bearer token, token lookup failed]"})
        }
    }
}

fn access(store: &Store, authz: &Authorizer, user: &User, spec: &Value) -> Value {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let a = if let Some(r) = spec.get("resourceAttributes") {
        let mut a = Attributes::resource(
            &s(r, "verb"),
            &s(r, "group"),
            &s(r, "resource"),
            &s(r, "namespace"),
            &s(r, "name"),
        );
        a.subresource = s(r, "subresource");
        a
    } else {
        let n = spec
            .get("nonResourceAttributes")
            .cloned()
            .unwrap_or_default();
        Attributes::non_resource(&s(&n, "verb"), &s(&n, "path"))
    };
    let (allowed, reason) = authz.authorize(store, user, &a);
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = reason.into();
    }
    status
}

fn rules_review(store: &Store, authz: &Authorizer, user: &User, spec: &Value) -> Value {
    let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
    let mut rules = authz.index(store).rules_for(user, ns);
    if user.is_master() {
        let all = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        rules.push(super::rbac::Rule {
            verbs: all(&["*"]),
            api_groups: all(&["*"]),
            resources: all(&["*"]),
            ..Default::default()
        });
        rules.push(super::rbac::Rule {
            verbs: all(&["*"]),
            non_resource_urls: all(&["*"]),
            ..Default::default()
        });
    }
    let (res, non): (Vec<_>, Vec<_>) = rules
        .into_iter()
        .partition(|r| r.non_resource_urls.is_empty());
    let show = |r: &super::rbac::Rule| serde_json::to_value(r).unwrap_or_default();
    json!({
        "resourceRules": res.iter().map(|r| {
            let mut v = show(r);
            for k in ["apiGroups", "resources"] { if v.get(k).is_none() { v[k] = json!([]); } }
            v
        }).collect::<Vec<_>>(),
        "nonResourceRules": non.iter().map(show).collect::<Vec<_>>(),
        "incomplete": false,
    })
}

/// `serviceaccounts/<name>/token`: a token bound to the ServiceAccount (and to a pod or
/// secret when `boundObjectRef` names one), expiring after `expirationSeconds`.
pub fn token_request(
    store: &Store,
    authn: &Authenticator,
    info: &ResourceInfo,
    ns: &str,
    sa: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let sa_key = (String::new(), "serviceaccounts".to_string());
    let account = store
        .get(&sa_key, ns, sa)
        .ok_or_else(|| ApiError::not_found(info, sa))?;
    let uid = account
        .value()
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let spec = body.get("spec").cloned().unwrap_or_default();
    let expiry = spec
        .get("expirationSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_EXPIRY);
    // kube names the TokenRequest in its 422, not the ServiceAccount.
    let tr = ResourceInfo {
        group: "authentication.k8s.io".into(),
        kind: "TokenRequest".into(),
        ..info.clone()
    };
    if expiry < MIN_EXPIRY {
        let c = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiry),
            "may not specify a duration less than 10 minutes",
        );
        return Err(invalid_causes(&tr, sa, &[c]));
    }
    if expiry > 1 << 32 {
        let c = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiry),
            "may not specify a duration larger than 2^32 seconds",
        );
        return Err(invalid_causes(&tr, sa, &[c]));
    }
    let mut audiences = strings(spec.get("audiences"));
    if audiences.is_empty() {
        audiences.push(token::ISSUER.into());
    }
    let (pod, secret) = bound_object(store, info, ns, spec.get("boundObjectRef"))?;
    let now = token::now_secs();
    let claims = Claims {
        iss: token::ISSUER.into(),
        sub: token::sa_user(ns, sa),
        aud: audiences.clone(),
        exp: now + expiry,
        iat: now,
        nbf: now,
        jti: uuid::Uuid::new_v4().to_string(),
        kube: KubeClaims {
            namespace: ns.into(),
            serviceaccount: Ref {
                name: sa.into(),
                uid,
            },
            pod,
            secret,
        },
    };
    let t = authn
        .signer
        .issue(&claims)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut out = body.clone();
    out["apiVersion"] = "authentication.k8s.io/v1".into();
    out["kind"] = "TokenRequest".into();
    out["metadata"] = json!({"name": sa, "namespace": ns, "creationTimestamp": Value::Null});
    out["spec"]["audiences"] = json!(audiences);
    out["spec"]["expirationSeconds"] = json!(expiry);
    out["status"] = json!({"token": t, "expirationTimestamp": rfc3339(now + expiry)});
    Ok(out)
}

type Bound = (Option<Ref>, Option<Ref>);

fn bound_object(
    store: &Store,
    info: &ResourceInfo,
    ns: &str,
    r: Option<&Value>,
) -> Result<Bound, ApiError> {
    let Some(r) = r else { return Ok((None, None)) };
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let resource = match kind {
        "Pod" => "pods",
        "Secret" => "secrets",
        other => {
            let c = Cause::not_supported(
                "spec.boundObjectRef.kind",
                &json!(other),
                &["Pod".into(), "Secret".into()],
            );
            return Err(invalid_causes(info, name, &[c]));
        }
    };
    let key = (String::new(), resource.to_string());
    let obj = store
        .get(&key, ns, name)
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("{resource} {name:?} not found")))?;
    let uid = obj
        .value()
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(want) = r
        .get("uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        && want != uid
    {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let r = Ref {
        name: name.into(),
        uid,
    };
    Ok(if kind == "Pod" {
        (Some(r), None)
    } else {
        (None, Some(r))
    })
}
