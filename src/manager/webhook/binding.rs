//! `/validate-pod-binding` (`binding_admission.go`, gate `BindingAdmissionWebhook`): only
//! the schedulers named in `userName` (substrings of the binding request's user) may bind
//! pods in the namespaces in scope; excluded namespaces, bypass labels and annotations
//! pass; `dryRun` only logs and counts. An empty `userName` turns the check off, and an
//! empty `namespaces` leaves every namespace out of scope (`"*"`: all), as Koordinator's.

use serde::{Deserialize, Serialize};

use super::Handlers;
use super::review::{Operation, Request, Verdict};

/// `manager.webhook.bindingAdmission`; Koordinator's `--binding-admission-*` flags.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Comma-separated substrings of the users allowed to bind (empty: no check).
    pub user_name: String,
    pub dry_run: bool,
    /// Comma-separated namespaces checked; `*` for all; empty for none.
    pub namespaces: String,
    pub exclude_namespaces: String,
    /// Comma-separated pod label keys whose presence lets a binding through.
    pub bypass_labels: String,
    pub bypass_annotations: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            user_name: String::new(),
            dry_run: false,
            namespaces: String::new(),
            exclude_namespaces: "kube-system".into(),
            bypass_labels: "koordinator.sh/binding-admission-bypass".into(),
            bypass_annotations: String::new(),
        }
    }
}

fn list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// Koordinator's decision label for `koord_manager_binding_admission_decisions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    AllowedByUserName,
    Excluded,
    OutOfScope,
    BypassLabel,
    BypassAnnotation,
    DryRun,
    Denied,
}

impl Decision {
    pub fn label(self) -> &'static str {
        match self {
            Decision::AllowedByUserName => "allowed_username",
            Decision::Excluded => "excluded_ns",
            Decision::OutOfScope => "out_of_scope",
            Decision::BypassLabel => "bypass_label",
            Decision::BypassAnnotation => "bypass_annotation",
            Decision::DryRun => "dry_run",
            Decision::Denied => "denied",
        }
    }
}

/// The decision for one binding request; `None` where the check does not apply.
pub fn decide(s: &Settings, h: &Handlers, req: &Request) -> Option<Decision> {
    let allowed: Vec<&str> = list(&s.user_name).collect();
    if allowed.is_empty() || req.sub_resource != "binding" || req.operation != Operation::Create {
        return None;
    }
    if allowed.iter().any(|a| req.username.contains(a)) {
        return Some(Decision::AllowedByUserName);
    }
    let ns = req.namespace.as_str();
    if list(&s.exclude_namespaces).any(|n| n == ns) {
        return Some(Decision::Excluded);
    }
    if s.namespaces.trim() != "*" && !list(&s.namespaces).any(|n| n == ns) {
        // An empty list checks nothing (and is not counted), as Koordinator's.
        return list(&s.namespaces).next().map(|_| Decision::OutOfScope);
    }
    // The pod, from the manager's cache; unknown pods pass (Koordinator's failed GET).
    let pods = h.lookup.pods();
    let pod = pods.iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(&req.name)
    })?;
    let has = |m: Option<&std::collections::BTreeMap<String, String>>, keys: &str| {
        list(keys).any(|k| m.is_some_and(|m| m.contains_key(k)))
    };
    if has(pod.metadata.labels.as_ref(), &s.bypass_labels) {
        return Some(Decision::BypassLabel);
    }
    if has(pod.metadata.annotations.as_ref(), &s.bypass_annotations) {
        return Some(Decision::BypassAnnotation);
    }
    Some(if s.dry_run {
        Decision::DryRun
    } else {
        Decision::Denied
    })
}

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    let Some(d) = decide(&h.binding, h, req) else {
        return Verdict::Allow;
    };
    h.count_binding(d);
    match d {
        Decision::Denied => {
            tracing::info!(pod = %format!("{}/{}", req.namespace, req.name), user = %req.username, "binding denied: username is not in the allowed list");
            Verdict::Deny {
                code: 403,
                message: "binding denied: username is not in the allowed list".into(),
            }
        }
        Decision::DryRun => {
            tracing::info!(pod = %format!("{}/{}", req.namespace, req.name), user = %req.username, "binding admission (dry run): would deny");
            Verdict::Allow
        }
        _ => Verdict::Allow,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::manager::webhook::lookup::Fixed;
    use crate::manager::webhook::test_util::handlers;

    fn binding(ns: &str, name: &str, user: &str) -> Request {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "t", "kind": {"kind": "Binding"}, "subResource": "binding",
                "operation": "CREATE", "namespace": ns, "name": name,
                "userInfo": {"username": user},
                "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"kind": "Node", "name": "n1"}}}});
        Request::parse(&serde_json::to_vec(&body).unwrap()).unwrap()
    }

    fn with_pods() -> Handlers {
        let pod = |ns: &str, name: &str, labels: serde_json::Value, ann: serde_json::Value| {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name,
                    "labels": labels, "annotations": ann}, "spec": {"containers": []}}))
                .unwrap(),
            )
        };
        handlers(Fixed {
            pods: vec![
                pod("team", "plain", json!({}), json!({})),
                pod(
                    "team",
                    "bypassed",
                    json!({"koordinator.sh/binding-admission-bypass": ""}),
                    json!({}),
                ),
                pod("team", "noted", json!({}), json!({"bind-ok": "1"})),
            ],
            ..Fixed::default()
        })
    }

    #[test]
    fn koordinators_binding_admission_decisions() {
        let h = with_pods();
        let on = Settings {
            user_name: "koord-scheduler, custom-scheduler".into(),
            namespaces: "team,other".into(),
            bypass_annotations: "bind-ok".into(),
            ..Settings::default()
        };
        let cases = [
            (
                "no allowed users: off",
                Settings::default(),
                binding("team", "plain", "someone"),
                None,
            ),
            (
                "allowed scheduler",
                on.clone(),
                binding(
                    "team",
                    "plain",
                    "system:serviceaccount:koordinator-system:koord-scheduler",
                ),
                Some(Decision::AllowedByUserName),
            ),
            (
                "excluded namespace",
                on.clone(),
                binding("kube-system", "plain", "someone"),
                Some(Decision::Excluded),
            ),
            (
                "out of scope",
                on.clone(),
                binding("elsewhere", "plain", "someone"),
                Some(Decision::OutOfScope),
            ),
            (
                "bypass label",
                on.clone(),
                binding("team", "bypassed", "someone"),
                Some(Decision::BypassLabel),
            ),
            (
                "bypass annotation",
                on.clone(),
                binding("team", "noted", "someone"),
                Some(Decision::BypassAnnotation),
            ),
            (
                "unknown pod passes",
                on.clone(),
                binding("team", "ghost", "someone"),
                None,
            ),
            (
                "denied",
                on.clone(),
                binding("team", "plain", "someone"),
                Some(Decision::Denied),
            ),
            (
                "dry run",
                Settings {
                    dry_run: true,
                    ..on.clone()
                },
                binding("team", "plain", "someone"),
                Some(Decision::DryRun),
            ),
            (
                "all namespaces",
                Settings {
                    namespaces: "*".into(),
                    ..on.clone()
                },
                binding("team", "plain", "someone"),
                Some(Decision::Denied),
            ),
            (
                "no namespaces: nothing in scope",
                Settings {
                    namespaces: String::new(),
                    ..on.clone()
                },
                binding("team", "plain", "someone"),
                None,
            ),
        ];
        for (name, s, req, want) in cases {
            assert_eq!(decide(&s, &h, &req), want, "{name}");
        }
    }

    #[test]
    fn a_denied_binding_is_refused_with_koordinators_message() {
        let mut h = with_pods();
        h.binding = Settings {
            user_name: "koord-scheduler".into(),
            namespaces: "*".into(),
            ..Settings::default()
        };
        let counts = crate::manager::webhook::BindingDecisions::default();
        h.binding_decisions = Some(counts.clone());
        match handle(&h, &binding("team", "plain", "kube-scheduler")) {
            Verdict::Deny { code, message } => {
                assert_eq!(code, 403);
                assert_eq!(
                    message,
                    "binding denied: username is not in the allowed list"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            handle(&h, &binding("team", "plain", "koord-scheduler")),
            Verdict::Allow
        ));
    }
}
