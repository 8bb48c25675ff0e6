//! Calls the Mutating/ValidatingWebhookConfigurations stored in the server, as
//! kube-apiserver does: AdmissionReview v1 over HTTPS (trusting the `caBundle`) or HTTP to
//! loopback, to a URL or to a Service's ready endpoints (the next one tried when one
//! refuses the connection, so a replica that died is skipped), JSONPatch responses applied
//! in order, `failurePolicy` and `timeoutSeconds` honoured.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use hyper::Method;
use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::ResourceInfo;
use super::store::{Filter, Store};
use crate::api::selector::Selector;
use crate::kernel::http_client::{self, Trust};

/// One admission decision's input.
pub struct Attributes<'a> {
    pub info: &'a ResourceInfo,
    pub version: &'a str,
    pub subresource: Option<&'a str>,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    pub name: &'a str,
    pub namespace: &'a str,
    pub old: Option<&'a Value>,
}

#[derive(Clone)]
pub struct Admission {
    store: Arc<Store>,
    /// Every write consults the webhook configurations and they rarely change: they are
    /// parsed once per change (mutating, validating), not on every write.
    parsed: Arc<Mutex<[Option<Parsed>; 2]>>,
}

/// The webhooks of one kind and what they were parsed from: the configurations' count
/// and newest revision (any create, update or delete changes one of them).
struct Parsed {
    from: (usize, u64),
    hooks: Arc<Vec<Arc<Webhook>>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Mutating,
    Validating,
}

impl Kind {
    fn resource(self) -> &'static str {
        match self {
            Kind::Mutating => "mutatingwebhookconfigurations",
            Kind::Validating => "validatingwebhookconfigurations",
        }
    }
}

impl Admission {
    pub fn new(store: Arc<Store>) -> Self {
        Self {
            store,
            parsed: Default::default(),
        }
    }

    /// Runs every matching mutating webhook in order, applying their patches to `obj`.
    pub async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        for hook in self.webhooks(Kind::Mutating, attrs, Some(obj)) {
            if let Some(patch) = self.call(&hook, attrs, Some(obj)).await? {
                let p: json_patch::Patch = serde_json::from_slice(&patch).map_err(|e| {
                    ApiError::internal(format!(
                        "webhook {:?} returned an invalid patch: {e}",
                        hook.name
                    ))
                })?;
                crate::api::patch::apply_json(obj, &p).map_err(|e| {
                    ApiError::internal(format!(
                        "applying the patch of webhook {:?}: {e}",
                        hook.name
                    ))
                })?;
            }
        }
        Ok(())
    }

    /// Runs every matching validating webhook; the first denial wins.
    pub async fn validate(
        &self,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Result<(), ApiError> {
        for hook in self.webhooks(Kind::Validating, attrs, obj) {
            self.call(&hook, attrs, obj).await?;
        }
        Ok(())
    }

    fn webhooks(
        &self,
        kind: Kind,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Vec<Arc<Webhook>> {
        self.all_webhooks(kind)
            .iter()
            .filter(|h| h.matches(attrs, obj, &self.store))
            .cloned()
            .collect()
    }

    /// Every webhook of the stored configurations of `kind`, parsed again only when they
    /// changed.
    fn all_webhooks(&self, kind: Kind) -> Arc<Vec<Arc<Webhook>>> {
        let key = (
            "admissionregistration.k8s.io".to_string(),
            kind.resource().to_string(),
        );
        let (_, configs) = self.store.list(&key, &Filter::default());
        let from = (
            configs.len(),
            configs.iter().map(|c| c.rev).max().unwrap_or(0),
        );
        let slot = kind as usize;
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &parsed[slot]
            && p.from == from
        {
            return p.hooks.clone();
        }
        let mut hooks = Vec::new();
        for config in configs {
            let v = config.value();
            for w in v
                .get("webhooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                hooks.push(Arc::new(Webhook::from_value(w)));
            }
        }
        let hooks = Arc::new(hooks);
        parsed[slot] = Some(Parsed {
            from,
            hooks: hooks.clone(),
        });
        hooks
    }

    /// Calls one webhook; returns its JSONPatch, if any. Errors follow `failurePolicy`.
    async fn call(
        &self,
        hook: &Webhook,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Result<Option<Vec<u8>>, ApiError> {
        match hook.review(&self.store, attrs, obj).await {
            Ok(Outcome::Allowed(patch)) => Ok(patch),
            Ok(Outcome::Denied(err)) => Err(err),
            Err(msg) if hook.fail_open => {
                tracing::warn!(webhook = %hook.name, error = %msg, "webhook failed; failurePolicy Ignore lets the request through");
                Ok(None)
            }
            Err(msg) => Err(ApiError::internal(format!(
                "Internal error occurred: failed calling webhook \"{}\": {msg}",
                hook.name
            ))),
        }
    }
}

enum Outcome {
    Allowed(Option<Vec<u8>>),
    Denied(ApiError),
}

struct Webhook {
    name: String,
    raw: Value,
    fail_open: bool,
    timeout: Duration,
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn any_matches(list: &[&str], want: &str) -> bool {
    list.iter().any(|x| *x == "*" || *x == want)
}

fn resource_matches(patterns: &[&str], resource: &str, sub: Option<&str>) -> bool {
    patterns.iter().any(|p| {
        let (pr, ps) = p
            .split_once('/')
            .map(|(a, b)| (a, Some(b)))
            .unwrap_or((p, None));
        let res_ok = pr == "*" || pr == resource;
        let sub_ok = match (ps, sub) {
            (None, None) => true,
            (Some("*"), Some(_)) => true,
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
        res_ok && sub_ok
    })
}

impl Webhook {
    fn from_value(w: &Value) -> Self {
        Webhook {
            name: w
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            fail_open: w.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
            timeout: Duration::from_secs(
                w.get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(10)
                    .clamp(1, 30),
            ),
            raw: w.clone(),
        }
    }

    fn matches(&self, a: &Attributes<'_>, obj: Option<&Value>, store: &Store) -> bool {
        let rule_ok = self
            .raw
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|r| {
                let scope = r.get("scope").and_then(Value::as_str).unwrap_or("*");
                any_matches(&strs(r.get("operations")), a.operation)
                    && any_matches(&strs(r.get("apiGroups")), &a.info.group)
                    && any_matches(&strs(r.get("apiVersions")), a.version)
                    && resource_matches(&strs(r.get("resources")), &a.info.resource, a.subresource)
                    && (scope == "*" || (scope == "Namespaced") == a.info.namespaced)
            });
        rule_ok && self.namespace_matches(a, store) && self.object_matches(a, obj)
    }

    fn selector(&self, key: &str) -> Option<Selector> {
        let ls = self.raw.get(key)?;
        let ls: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
            serde_json::from_value(ls.clone()).ok()?;
        Selector::from_label_selector(&ls).ok()
    }

    fn namespace_matches(&self, a: &Attributes<'_>, store: &Store) -> bool {
        let Some(sel) = self.selector("namespaceSelector") else {
            return true;
        };
        if !a.info.namespaced && a.info.resource != "namespaces" {
            return true;
        }
        let ns = if a.info.resource == "namespaces" {
            a.name
        } else {
            a.namespace
        };
        let labels = store
            .get(&(String::new(), "namespaces".into()), "", ns)
            .map(|n| n.labels.clone())
            .unwrap_or_default();
        sel.matches(&labels)
    }

    fn object_matches(&self, a: &Attributes<'_>, obj: Option<&Value>) -> bool {
        let Some(sel) = self.selector("objectSelector") else {
            return true;
        };
        let labels_of = |v: Option<&Value>| -> std::collections::BTreeMap<String, String> {
            v.and_then(|v| v.pointer("/metadata/labels"))
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default()
        };
        sel.matches(&labels_of(obj)) || (a.old.is_some() && sel.matches(&labels_of(a.old)))
    }

    async fn review(
        &self,
        store: &Store,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Result<Outcome, String> {
        let cc = self.raw.get("clientConfig").cloned().unwrap_or_default();
        let (url, endpoints) = target(store, &cc)?;
        let url = url.as_str();
        let uid = super::semantics::new_uid();
        let gvk = json!({"group": a.info.group, "version": a.version, "kind": a.info.kind});
        let gvr = json!({"group": a.info.group, "version": a.version, "resource": a.info.resource});
        let mut request = json!({
            "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": a.name, "namespace": a.namespace, "operation": a.operation,
            "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj.cloned().unwrap_or(Value::Null), "oldObject": a.old.cloned().unwrap_or(Value::Null),
            "dryRun": false, "options": null,
        });
        if let Some(sub) = a.subresource {
            request["subResource"] = sub.into();
        }
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let trust = trust_for(url, &cc)?;
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let resp = self.post(url, &endpoints, body, trust.as_ref()).await?;
        if !resp.status.is_success() {
            return Err(format!(
                "webhook answered HTTP {}: {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            ));
        }
        let parsed: Value = serde_json::from_slice(&resp.body)
            .map_err(|e| format!("invalid AdmissionReview response: {e}"))?;
        let response = parsed
            .get("response")
            .ok_or("AdmissionReview response has no `response`")?;
        if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
            return Err("AdmissionReview response uid does not match the request".into());
        }
        if response.get("allowed") != Some(&Value::Bool(true)) {
            return Ok(Outcome::Denied(self.denial(response)));
        }
        match response.get("patch").and_then(Value::as_str) {
            Some(p)
                if response
                    .get("patchType")
                    .and_then(Value::as_str)
                    .unwrap_or("JSONPatch")
                    == "JSONPatch" =>
            {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(p)
                    .map_err(|e| format!("patch is not base64: {e}"))?;
                Ok(Outcome::Allowed(Some(bytes)))
            }
            Some(_) => Err("unsupported patchType".into()),
            None => Ok(Outcome::Allowed(None)),
        }
    }

    /// Posts to the first endpoint that takes the connection, within the webhook's timeout.
    async fn post(
        &self,
        url: &str,
        endpoints: &[Option<SocketAddr>],
        body: Vec<u8>,
        trust: Option<&Trust>,
    ) -> Result<http_client::Response, String> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let headers = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ];
        let mut last = String::new();
        for via in endpoints {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let sent = http_client::send_via(
                *via,
                Method::POST,
                url,
                &headers,
                Some(body.clone()),
                trust,
                left,
            )
            .await;
            match sent {
                Err(e @ http_client::ClientError::Connect(..)) => last = e.to_string(),
                other => return other.map_err(|e| e.to_string()),
            }
        }
        Err(last)
    }

    fn denial(&self, response: &Value) -> ApiError {
        let status = response.get("status").cloned().unwrap_or_default();
        let msg = status
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("without explanation");
        let code = status
            .get("code")
            .and_then(Value::as_u64)
            .filter(|c| *c >= 400 && *c < 600)
            .unwrap_or(400) as u16;
        let reason = match code {
            403 => "Forbidden",
            422 => "Invalid",
            409 => "Conflict",
            _ => "BadRequest",
        };
        ApiError::new(
            code,
            reason,
            format!(
                "admission webhook \"{}\" denied the request: {msg}",
                self.name
            ),
        )
    }
}

/// The URL to call and where to connect: the URL's own host, or a Service's ready
/// endpoints (starting at a different one each call, to spread the load).
fn target(store: &Store, cc: &Value) -> Result<(String, Vec<Option<SocketAddr>>), String> {
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        return Ok((url.to_string(), vec![None]));
    }
    let svc = cc
        .get("service")
        .ok_or("clientConfig has neither url nor service")?;
    let field = |f: &str| svc.get(f).and_then(Value::as_str).unwrap_or("");
    let (ns, name, path) = (field("namespace"), field("name"), field("path"));
    let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443);
    let port = u16::try_from(port).map_err(|_| format!("service port {port} is out of range"))?;
    let mut ready = super::endpoints::resolve(store, ns, name, port)?;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let start = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % ready.len();
    ready.rotate_left(start);
    let path = if path.is_empty() { "/" } else { path };
    let url = format!("https://{name}.{ns}.svc:{port}{path}");
    Ok((url, ready.into_iter().map(Some).collect()))
}

/// HTTPS trusts the `caBundle`; plain HTTP is allowed only to loopback.
fn trust_for(url: &str, cc: &Value) -> Result<Option<Trust>, String> {
    if url.starts_with("https://") {
        let ca = cc.get("caBundle").and_then(Value::as_str).unwrap_or("");
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .map_err(|e| format!("caBundle is not base64: {e}"))?;
        return Ok(Some(Trust::CaBundle(pem)));
    }
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| url.starts_with(p));
    if loopback {
        Ok(None)
    } else {
        Err(format!(
            "webhook URL {url} must be https (plain http only to loopback)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_patterns() {
        assert!(resource_matches(&["pods"], "pods", None));
        assert!(!resource_matches(&["pods"], "pods", Some("status")));
        assert!(resource_matches(&["pods/*"], "pods", Some("binding")));
        assert!(resource_matches(&["*"], "nodes", None));
        assert!(resource_matches(&["*/status"], "nodes", Some("status")));
        assert!(resource_matches(&["pods/binding"], "pods", Some("binding")));
        assert!(!resource_matches(
            &["pods/binding"],
            "pods",
            Some("eviction")
        ));
    }

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(
            trust_for("http://127.0.0.1:9876/x", &json!({}))
                .unwrap()
                .is_none()
        );
        assert!(trust_for("http://10.0.0.1:9876/x", &json!({})).is_err());
        assert!(trust_for("https://10.0.0.1/x", &json!({"caBundle": "!!"})).is_err());
    }
}
