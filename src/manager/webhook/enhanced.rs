//! PodEnhancedValidator (`pod_enhanced_validator.go`, gate `EnablePodEnhancedValidator`):
//! `/validate-pod` refuses pods missing the labels a rule requires. The rules live in the
//! ConfigMap `pod-enhanced-validator-config` of the manager's config namespace (`enable:
//! "true"`, `rules: [{"name", "requiredLabels", "namespaceWhitelist"}]`); koord watches it
//! (Koordinator polls every 5 minutes). No ConfigMap: everything passes; a ConfigMap that
//! does not parse keeps the rules in force, with a warning. A pod labelled
//! `koordinator.sh/skip-enhanced-validation: "true"` is not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::watcher;
use serde::Deserialize;

use crate::kernel::{Shutdown, Tasks};

pub const CONFIG_NAME: &str = "pod-enhanced-validator-config";
pub const LABEL_SKIP: &str = "koordinator.sh/skip-enhanced-validation";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub name: String,
    #[serde(default)]
    pub required_labels: Vec<String>,
    #[serde(default)]
    pub namespace_whitelist: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub enable: bool,
    pub rules: Vec<Rule>,
}

/// The shared, current rules.
pub type Shared = Arc<RwLock<Arc<Config>>>;

/// The ConfigMap's data as rules.
pub fn parse(data: &BTreeMap<String, String>) -> Result<Config, String> {
    let enable = data
        .get("enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let rules = match data.get("rules") {
        None => Vec::new(),
        Some(raw) => serde_json::from_str(raw)
            .map_err(|e| format!("failed to unmarshal validation rules: {e}"))?,
    };
    Ok(Config { enable, rules })
}

/// Why the pod (in namespace `ns`: a new pod may not carry it) is refused, worded as
/// Koordinator's reason; `None` when it passes.
pub fn validate(cfg: &Config, pod: &Pod, ns: &str) -> Option<String> {
    if !cfg.enable {
        return None;
    }
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k));
    if label(LABEL_SKIP).map(String::as_str) == Some("true") {
        return None;
    }
    for rule in &cfg.rules {
        if rule.namespace_whitelist.contains(ns) {
            continue;
        }
        let missing: Vec<&str> = rule
            .required_labels
            .iter()
            .filter(|k| label(k).is_none())
            .map(String::as_str)
            .collect();
        let why = match missing.as_slice() {
            [] => continue,
            [one] => format!("required label '{one}' is missing"),
            many => format!("required labels are missing: [{}]", many.join(" ")),
        };
        return Some(format!("validation rule '{}' failed: {why}", rule.name));
    }
    None
}

/// Keeps `shared` in step with the ConfigMap until the process drains.
pub fn spawn_watch(
    client: kube::Client,
    namespace: String,
    shared: Shared,
    tasks: &Tasks,
    shutdown: &Shutdown,
) {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={CONFIG_NAME}"));
    let name = format!("{namespace}/{CONFIG_NAME}");
    let index = crate::kernel::pump::forward(move |ev: watcher::Event<ConfigMap>| {
        let next = match ev {
            watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => {
                match parse(&cm.data.unwrap_or_default()) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(configmap = %name, error = %e, "PodEnhancedValidator: keeping the rules in force");
                        return true;
                    }
                }
            }
            watcher::Event::Delete(_) => Config::default(),
            _ => return true,
        };
        let mut cur = shared.write().unwrap_or_else(|p| p.into_inner());
        if **cur != next {
            tracing::info!(
                enable = next.enable,
                rules = next.rules.len(),
                "PodEnhancedValidator: rules updated"
            );
            *cur = Arc::new(next);
        }
        true
    });
    let task = "manager/webhook/pod-enhanced-validator";
    crate::kernel::pump::spawn::<ConfigMap, _>(
        tasks,
        task,
        client,
        Some(namespace),
        cfg,
        index,
        shutdown,
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(rules: &str) -> Config {
        let data =
            [("enable", "true"), ("rules", rules)].map(|(k, v)| (k.to_string(), v.to_string()));
        parse(&BTreeMap::from(data)).unwrap()
    }

    fn pod(ns: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c"}]}}),
        )
        .unwrap()
    }

    /// Koordinator's `TestPodEnhancedValidate`, with its names and reasons.
    #[test]
    fn koordinators_enhanced_validation_cases() {
        let quota = config(
            r#"[{"name": "quota-label-required", "requiredLabels": ["quota.scheduling.koordinator.sh/name"],
                "namespaceWhitelist": ["kube-system", "koordinator-system"]}]"#,
        );
        let multiple = config(
            r#"[{"name": "multiple-labels-required", "requiredLabels": ["product", "app"]}]"#,
        );
        let two_rules = config(
            r#"[{"name": "quota-label-required", "requiredLabels": ["quota.scheduling.koordinator.sh/name"]},
                {"name": "app-label-required", "requiredLabels": ["app"]}]"#,
        );
        let disabled = Config {
            enable: false,
            ..quota.clone()
        };
        let (none, empty) = (Config::default(), config("[]"));
        let q = "quota.scheduling.koordinator.sh/name";
        let cases: Vec<(&str, &Config, Pod, Option<&str>)> = vec![
            (
                "no config map: should allow all pods",
                &none,
                pod("default", json!({})),
                None,
            ),
            (
                "validation disabled: should allow all pods",
                &disabled,
                pod("default", json!({})),
                None,
            ),
            (
                "empty rules: should allow all pods",
                &empty,
                pod("default", json!({})),
                None,
            ),
            (
                "quota-label-required: create pod with quota label",
                &quota,
                pod("default", json!({q: "quota1"})),
                None,
            ),
            (
                "quota-label-required: pod without quota label",
                &quota,
                pod("default", json!({})),
                Some(
                    "validation rule 'quota-label-required' failed: required label 'quota.scheduling.koordinator.sh/name' is missing",
                ),
            ),
            (
                "quota-label-required: pod in whitelisted namespace",
                &quota,
                pod("kube-system", json!({})),
                None,
            ),
            (
                "quota-label-required: pod with skip-enhanced-validation label",
                &quota,
                pod("default", json!({LABEL_SKIP: "true"})),
                None,
            ),
            (
                "quota-label-required: pod in another whitelisted namespace",
                &quota,
                pod("koordinator-system", json!({})),
                None,
            ),
            (
                "multiple-labels-required: pod with required labels",
                &multiple,
                pod("default", json!({"product": "p", "app": "a"})),
                None,
            ),
            (
                "multiple-labels-required: pod missing app label",
                &multiple,
                pod("default", json!({"product": "p"})),
                Some(
                    "validation rule 'multiple-labels-required' failed: required label 'app' is missing",
                ),
            ),
            (
                "multiple-labels-required: pod missing product label",
                &multiple,
                pod("default", json!({"app": "a"})),
                Some(
                    "validation rule 'multiple-labels-required' failed: required label 'product' is missing",
                ),
            ),
            (
                "multiple-labels-required: pod without required labels",
                &multiple,
                pod("default", json!({})),
                Some(
                    "validation rule 'multiple-labels-required' failed: required labels are missing: [product app]",
                ),
            ),
            (
                "multiple rules: all rules pass",
                &two_rules,
                pod("default", json!({q: "quota1", "app": "a"})),
                None,
            ),
            (
                "multiple rules: first rule fails",
                &two_rules,
                pod("default", json!({"app": "a"})),
                Some(
                    "validation rule 'quota-label-required' failed: required label 'quota.scheduling.koordinator.sh/name' is missing",
                ),
            ),
        ];
        for (name, cfg, pod, want) in cases {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            assert_eq!(validate(cfg, &pod, &ns).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn bad_rules_are_an_error_naming_the_key() {
        let data = BTreeMap::from([
            ("enable".to_string(), "true".to_string()),
            ("rules".to_string(), "{".to_string()),
        ]);
        assert!(
            parse(&data)
                .unwrap_err()
                .contains("failed to unmarshal validation rules")
        );
    }
}
