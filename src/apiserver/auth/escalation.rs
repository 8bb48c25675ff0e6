//! RBAC's escalation check (kube's `pkg/registry/rbac`): a Role or ClusterRole may be
//! written only with rules the writer already holds (or with `escalate` on it), and a
//! binding only to a role whose rules the writer holds (or with `bind` on it).

use serde_json::Value;

use super::rbac::{Index, Rule, resolve_cluster_roles, rules_of, stored};
use super::{Attributes, User};
use crate::apiserver::store::Store;

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// kube's `ruleCovers` for one owner rule over one atom of a servant rule.
fn covers_atom(owner: &Rule, verb: &str, group: &str, resource: &str, name: &str) -> bool {
    has(&owner.verbs, verb)
        && has(&owner.api_groups, group)
        && (owner.resources.iter().any(|r| r == "*" || r == resource)
            || resource
                .split_once('/')
                .is_some_and(|(_, sub)| owner.resources.iter().any(|r| *r == format!("*/{sub}"))))
        && (owner.resource_names.is_empty()
            || (!name.is_empty() && owner.resource_names.iter().any(|n| n == name)))
}

fn covers_url(owner: &Rule, verb: &str, url: &str) -> bool {
    has(&owner.verbs, verb)
        && owner.non_resource_urls.iter().any(|u| {
            u == "*" || u == url || (u.ends_with('*') && url.starts_with(u.trim_end_matches('*')))
        })
}

/// The servant rules' atoms no owner rule covers (empty: all covered), as kube's
/// `Covers` breaks rules down: one verb, group, resource and name at a time.
pub fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    let mut missing = Vec::new();
    for s in servant {
        for verb in &s.verbs {
            for url in &s.non_resource_urls {
                if !owner.iter().any(|o| covers_url(o, verb, url)) {
                    missing.push(Rule {
                        verbs: vec![verb.clone()],
                        non_resource_urls: vec![url.clone()],
                        ..Rule::default()
                    });
                }
            }
            for group in &s.api_groups {
                for res in &s.resources {
                    let names: Vec<&str> = if s.resource_names.is_empty() {
                        vec![""]
                    } else {
                        s.resource_names.iter().map(String::as_str).collect()
                    };
                    for name in names {
                        if !owner.iter().any(|o| covers_atom(o, verb, group, res, name)) {
                            missing.push(Rule {
                                verbs: vec![verb.clone()],
                                api_groups: vec![group.clone()],
                                resources: vec![res.clone()],
                                resource_names: if name.is_empty() {
                                    Vec::new()
                                } else {
                                    vec![name.to_string()]
                                },
                                non_resource_urls: vec![],
                            });
                        }
                    }
                }
            }
        }
    }
    missing
}

/// kube's rendering of rules a writer does not hold.
fn show(rules: &[Rule]) -> String {
    let list = |name: &str, v: &[String]| {
        if v.is_empty() {
            String::new()
        } else {
            let q: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
            format!("{name}:[{}]", q.join(" "))
        }
    };
    rules
        .iter()
        .map(|r| {
            let parts: Vec<String> = [
                list("APIGroups", &r.api_groups),
                list("Resources", &r.resources),
                list("ResourceNames", &r.resource_names),
                list("NonResourceURLs", &r.non_resource_urls),
                list("Verbs", &r.verbs),
            ]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
            format!("{{{}}}", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Err(message)` when writing `obj` (a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding) would grant `user` more than it holds.
pub fn check(
    store: &Store,
    idx: &Index,
    user: &User,
    resource: &str,
    ns: &str,
    obj: &Value,
) -> Result<(), String> {
    if user.is_master() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (granted, verb, target_res, target_name) = match resource {
        "roles" | "clusterroles" => {
            let rules = if resource == "clusterroles" && obj.get("aggregationRule").is_some() {
                let mut with_self = stored(store, "clusterroles");
                with_self
                    .retain(|o| o.pointer("/metadata/name").and_then(Value::as_str) != Some(name));
                with_self.push(obj.clone());
                resolve_cluster_roles(&with_self)
                    .get(name)
                    .map(|r| r.to_vec())
                    .unwrap_or_default()
            } else {
                rules_of(obj)
            };
            (rules, "escalate", resource.to_string(), name.to_string())
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let rules = match kind {
                "ClusterRole" => resolve_cluster_roles(&stored(store, "clusterroles"))
                    .get(role)
                    .map(|r| r.to_vec())
                    .unwrap_or_default(),
                _ => stored(store, "roles")
                    .iter()
                    .find(|r| {
                        r.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                            && r.pointer("/metadata/name").and_then(Value::as_str) == Some(role)
                    })
                    .map(rules_of)
                    .unwrap_or_default(),
            };
            let res = if kind == "ClusterRole" {
                "clusterroles"
            } else {
                "roles"
            };
            (rules, "bind", res.to_string(), role.to_string())
        }
        _ => return Ok(()),
    };
    let special = Attributes::resource(
        verb,
        "rbac.authorization.k8s.io",
        &target_res,
        ns,
        &target_name,
    );
    if idx.authorize(user, &special).0 {
        return Ok(());
    }
    let missing = uncovered(&idx.rules_for(user, ns), &granted);
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        user.groups,
        show(&missing)
    ))
}
