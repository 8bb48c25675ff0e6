//! Keeps koord's Mutating/ValidatingWebhookConfigurations pointing at the webhook server:
//! created from `config/webhooks.yaml` when missing, the original entries kept in the
//! `template` annotation, each entry given the caBundle and the Service or URL, entries
//! whose handler is off dropped. Compare-then-write, so replicas converge without fights.

use base64::Engine;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::Config;

const TEMPLATE: &str = include_str!("../../../config/webhooks.yaml");
const TEMPLATE_ANNOTATION: &str = "template";

#[derive(Debug, thiserror::Error)]
pub enum ConfigsError {
    #[error("{kind} {name}: {err}")]
    Api {
        kind: &'static str,
        name: String,
        err: kube::Error,
    },
    #[error("built-in webhook template: {0}")]
    Template(String),
    #[error(
        "{kind} {name} does not exist and RBAC does not let the manager create it (the chart creates it)"
    )]
    Missing { kind: &'static str, name: String },
}

/// The built-in configuration of `kind` from `config/webhooks.yaml`.
pub fn template(kind: &str) -> Result<Value, ConfigsError> {
    use serde::Deserialize;
    for doc in serde_yaml::Deserializer::from_str(TEMPLATE) {
        let v = Value::deserialize(doc).map_err(|e| ConfigsError::Template(e.to_string()))?;
        if v.get("kind").and_then(Value::as_str) == Some(kind) {
            return Ok(v);
        }
    }
    Err(ConfigsError::Template(format!("no {kind}")))
}

fn path_of(hook: &Value) -> Option<String> {
    let cc = hook.get("clientConfig")?;
    if let Some(p) = cc.pointer("/service/path").and_then(Value::as_str) {
        return Some(p.to_string());
    }
    let url = cc.get("url").and_then(Value::as_str)?;
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.find('/').map(|i| rest[i..].to_string())
}

/// The entries to publish: template entries with an enabled path, pointed at us.
pub fn render(
    template: &[Value],
    cfg: &Config,
    ca_pem: Option<&str>,
    enabled: &[&str],
) -> Vec<Value> {
    let host = if cfg.host.contains(':') {
        format!("[{}]", cfg.host)
    } else {
        cfg.host.clone()
    };
    template
        .iter()
        .filter_map(|hook| {
            let path = path_of(hook)?;
            if !enabled.contains(&path.as_str()) {
                return None;
            }
            let mut hook = hook.clone();
            let old_ca = hook.pointer("/clientConfig/caBundle").cloned();
            let mut cc = if cfg.host.is_empty() {
                json!({"service": {"namespace": cfg.namespace, "name": cfg.service_name, "path": path, "port": 443}})
            } else {
                json!({"url": format!("https://{host}:{}{path}", cfg.port)})
            };
            match (ca_pem, old_ca) {
                (Some(ca), _) => cc["caBundle"] = base64::engine::general_purpose::STANDARD.encode(ca).into(),
                (None, Some(old)) => cc["caBundle"] = old,
                (None, None) => {}
            }
            hook["clientConfig"] = cc;
            Some(hook)
        })
        .collect()
}

/// Whether every entry calls this manager: by URL (`https://<host>:<port>/...`) when
/// `host` is set, else through its Service.
fn all_ours(webhooks: Option<&Value>, cfg: &Config) -> bool {
    let host = if cfg.host.contains(':') {
        format!("[{}]", cfg.host)
    } else {
        cfg.host.clone()
    };
    let prefix = format!("https://{host}:{}/", cfg.port);
    let ours = |w: &Value| {
        if cfg.host.is_empty() {
            let field = |f: &str| w.pointer(&format!("/clientConfig/service/{f}"));
            field("name").and_then(Value::as_str) == Some(cfg.service_name.as_str())
                && field("namespace").and_then(Value::as_str) == Some(cfg.namespace.as_str())
        } else {
            w.pointer("/clientConfig/url")
                .and_then(Value::as_str)
                .is_some_and(|u| u.starts_with(&prefix))
        }
    };
    webhooks
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().all(ours))
}

/// Removes the configurations this manager wrote when nothing else can answer them once
/// it stops: they call it by URL, or `last` (the last endpoint of the Service is going).
/// A Service-based configuration with other endpoints stays, as Koordinator leaves it:
/// the Service routes to the other replicas.
pub async fn remove_own(
    client: &kube::Client,
    cfg: &Config,
    last: bool,
) -> Result<(), ConfigsError> {
    if cfg.host.is_empty() && !last {
        return Ok(());
    }
    for (kind, name) in [
        (
            "MutatingWebhookConfiguration",
            &cfg.mutating_configuration_name,
        ),
        (
            "ValidatingWebhookConfiguration",
            &cfg.validating_configuration_name,
        ),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
        let err = |e| ConfigsError::Api {
            kind,
            name: name.to_string(),
            err: e,
        };
        let Some(current) = api.get_opt(name).await.map_err(err)? else {
            continue;
        };
        if !all_ours(current.data.get("webhooks"), cfg) {
            continue;
        }
        let dp = kube::api::DeleteParams {
            preconditions: current.metadata.resource_version.clone().map(|rv| {
                kube::api::Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => tracing::info!(
                kind,
                name,
                "webhook configuration removed (its server stops)"
            ),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(err(e)),
        }
    }
    Ok(())
}

fn resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let plural = format!("{}s", kind.to_ascii_lowercase());
    ApiResource::from_gvk_with_plural(&gvk, &plural)
}

/// Brings both configurations up to date; a missing one is created only with `create`
/// (RBAC's leave; under Koordinator's chart the chart creates them).
pub async fn ensure(
    client: &kube::Client,
    cfg: &Config,
    ca_pem: Option<&str>,
    enabled: &[&str],
    create: bool,
) -> Result<(), ConfigsError> {
    for (kind, name) in [
        (
            "MutatingWebhookConfiguration",
            &cfg.mutating_configuration_name,
        ),
        (
            "ValidatingWebhookConfiguration",
            &cfg.validating_configuration_name,
        ),
    ] {
        ensure_one(client, cfg, (kind, name), ca_pem, enabled, create).await?;
    }
    Ok(())
}

async fn ensure_one(
    client: &kube::Client,
    cfg: &Config,
    (kind, name): (&'static str, &str),
    ca_pem: Option<&str>,
    enabled: &[&str],
    create: bool,
) -> Result<(), ConfigsError> {
    let ar = resource(kind);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let err = |e| ConfigsError::Api {
        kind,
        name: name.to_string(),
        err: e,
    };
    let current = api.get_opt(name).await.map_err(err)?;
    if current.is_none() && !create {
        return Err(ConfigsError::Missing {
            kind,
            name: name.to_string(),
        });
    }
    let mut obj = match &current {
        Some(o) => o.clone(),
        None => {
            let mut v = template(kind)?;
            v["metadata"] = json!({"name": name});
            serde_json::from_value(v).map_err(|e| ConfigsError::Template(e.to_string()))?
        }
    };
    let annotations = obj
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    let saved: Option<Vec<Value>> = annotations
        .get(TEMPLATE_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok());
    let entries = match saved {
        Some(t) => t,
        None => {
            let t: Vec<Value> = obj
                .data
                .get("webhooks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let annotations = obj
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            annotations.insert(
                TEMPLATE_ANNOTATION.into(),
                Value::Array(t.clone()).to_string(),
            );
            t
        }
    };
    let wanted = Value::Array(render(&entries, cfg, ca_pem, enabled));
    if current.is_some()
        && obj.data.get("webhooks") == Some(&wanted)
        && current.as_ref().map(|c| &c.metadata.annotations) == Some(&obj.metadata.annotations)
    {
        return Ok(());
    }
    obj.data["webhooks"] = wanted;
    let pp = PostParams::default();
    match current {
        None => api.create(&pp, &obj).await.map(|_| ()),
        Some(_) => api.replace(name, &pp, &obj).await.map(|_| ()),
    }
    .or_else(|e| match e {
        // Another replica wrote first; the next resync compares again.
        kube::Error::Api(s) if s.code == 409 => Ok(()),
        e => Err(err(e)),
    })?;
    tracing::info!(kind, name, "webhook configuration updated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_renders_for_service_and_url() {
        let t = template("MutatingWebhookConfiguration").unwrap();
        let entries = t["webhooks"].as_array().unwrap().clone();
        let cfg = Config::default();
        let svc = render(&entries, &cfg, Some("CA"), &["/mutate-pod"]);
        assert_eq!(svc.len(), 2, "create and update pod entries");
        assert_eq!(svc[0]["clientConfig"]["service"]["path"], "/mutate-pod");
        assert_eq!(svc[0]["clientConfig"]["caBundle"], "Q0E=");
        let url_cfg = Config {
            host: "127.0.0.1".into(),
            port: 19876,
            ..Config::default()
        };
        let url = render(
            &entries,
            &url_cfg,
            None,
            &["/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"],
        );
        assert_eq!(url.len(), 1);
        assert_eq!(
            url[0]["clientConfig"]["url"],
            "https://127.0.0.1:19876/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
        );
        assert_eq!(url[0]["failurePolicy"], "Ignore", "the chart's default");
        assert!(all_ours(Some(&Value::Array(url.clone())), &url_cfg));
        let other = Config {
            port: 1,
            ..url_cfg.clone()
        };
        assert!(!all_ours(Some(&Value::Array(url)), &other));
        assert!(!all_ours(Some(&Value::Array(svc)), &url_cfg));
        let v = template("ValidatingWebhookConfiguration").unwrap();
        let paths: Vec<_> = v["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(path_of)
            .collect();
        assert!(
            paths.contains(&"/validate-pod".to_string())
                && paths.contains(&"/validate-configmap".to_string())
        );
    }
}
