//! RBAC as kube's authorizer decides: a request is allowed when a rule of a role bound to
//! the user (ClusterRoleBindings anywhere, RoleBindings in the request's namespace)
//! matches its verb, API group, resource (with `/subresource`, `*/status`), name, or its
//! non-resource path. The bindings are indexed once per change of any RBAC object, by
//! subject, with their roles' rules (aggregated ClusterRoles included) resolved.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use serde_json::Value;

use super::{Attributes, User};
use crate::apiserver::store::Store;

/// `rbac.authorization.k8s.io/v1` PolicyRule.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    pub verbs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// kube's `ResourceMatches`: `*`, the exact `resource/sub`, or `*/sub`.
fn resource_matches(rule: &Rule, combined: &str, sub: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == "*"
            || r == combined
            || (!sub.is_empty()
                && r.len() == sub.len() + 2
                && r.starts_with("*/")
                && r.ends_with(sub))
    })
}

/// kube's `NonResourceURLMatches`: `*`, the path, or a `prefix*`.
fn url_matches(rule: &Rule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

/// kube's `RuleAllows`.
pub fn rule_allows(a: &Attributes, rule: &Rule) -> bool {
    if !has(&rule.verbs, &a.verb) {
        return false;
    }
    if !a.resource_request {
        return url_matches(rule, &a.path);
    }
    has(&rule.api_groups, &a.api_group)
        && resource_matches(rule, &a.combined_resource(), &a.subresource)
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&a.name))
}

/// The rules one binding grants and where: `None` is everywhere (a ClusterRoleBinding).
#[derive(Debug, Clone)]
pub struct Grant {
    pub namespace: Option<String>,
    pub rules: Arc<Vec<Rule>>,
    /// `ClusterRoleBinding "x" of ClusterRole "y"`, for the reasons reviews give.
    pub source: String,
}

/// Every grant by subject, users and groups apart (looked up by `&str`, no allocation
/// on the request path).
#[derive(Debug, Default)]
pub struct Index {
    by_user: HashMap<String, Vec<Grant>>,
    by_group: HashMap<String, Vec<Grant>>,
}

/// Whom a grant applied to, rendered only for a review's reason.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    User(&'a str),
    Group(&'a str),
}

impl std::fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::User(n) => write!(f, "User {n:?}"),
            Subject::Group(n) => write!(f, "Group {n:?}"),
        }
    }
}

impl Index {
    /// The grants that apply to `user` for a request in namespace `ns` (`""`: cluster).
    pub fn grants<'a>(
        &'a self,
        user: &'a User,
        ns: &'a str,
    ) -> impl Iterator<Item = (&'a Grant, Subject<'a>)> + 'a {
        let users = self
            .by_user
            .get(user.name.as_str())
            .map(|g| (g, Subject::User(&user.name)));
        let groups = user.groups.iter().filter_map(|n| {
            self.by_group
                .get(n.as_str())
                .map(|g| (g, Subject::Group(n)))
        });
        users.into_iter().chain(groups).flat_map(move |(gs, who)| {
            gs.iter()
                .filter(move |g| {
                    g.namespace
                        .as_deref()
                        .is_none_or(|n| !ns.is_empty() && n == ns)
                })
                .map(move |g| (g, who))
        })
    }

    /// Whether RBAC allows it, and kube's reason when it does.
    pub fn authorize(&self, user: &User, a: &Attributes) -> (bool, String) {
        for (g, who) in self.grants(user, &a.namespace) {
            if g.rules.iter().any(|r| rule_allows(a, r)) {
                return (true, format!("RBAC: allowed by {} to {who}", g.source));
            }
        }
        (false, String::new())
    }

    /// Every rule that applies to `user` in `ns`, for SelfSubjectRulesReview and the
    /// escalation check.
    pub fn rules_for(&self, user: &User, ns: &str) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        for (g, _) in self.grants(user, ns) {
            for r in g.rules.iter() {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
        }
        out
    }

    /// Builds the index from the stored RBAC objects.
    pub fn build(store: &Store) -> Index {
        let list = |r: &str| stored(store, r);
        let cluster_roles = resolve_cluster_roles(&list("clusterroles"));
        let roles: HashMap<(String, String), Arc<Vec<Rule>>> = list("roles")
            .iter()
            .map(|r| {
                (
                    (meta(r, "namespace"), meta(r, "name")),
                    Arc::new(rules_of(r)),
                )
            })
            .collect();
        let mut idx = Index::default();
        for b in list("clusterrolebindings") {
            let Some((kind, name)) = role_ref(&b) else {
                continue;
            };
            let Some(rules) = (kind == "ClusterRole")
                .then(|| cluster_roles.get(&name))
                .flatten()
            else {
                continue;
            };
            let source = format!(
                "ClusterRoleBinding {:?} of ClusterRole {name:?}",
                meta(&b, "name")
            );
            idx.add(&b, "", None, rules.clone(), source);
        }
        for b in list("rolebindings") {
            let ns = meta(&b, "namespace");
            let Some((kind, name)) = role_ref(&b) else {
                continue;
            };
            let rules = match kind.as_str() {
                "ClusterRole" => cluster_roles.get(&name).cloned(),
                "Role" => roles.get(&(ns.clone(), name.clone())).cloned(),
                _ => None,
            };
            let Some(rules) = rules else { continue };
            let source = format!(
                "RoleBinding {:?} of {kind} {name:?} in namespace {ns:?}",
                meta(&b, "name")
            );
            idx.add(&b, &ns, Some(ns.clone()), rules, source);
        }
        idx
    }

    fn add(
        &mut self,
        binding: &Value,
        ns: &str,
        scope: Option<String>,
        rules: Arc<Vec<Rule>>,
        source: String,
    ) {
        for s in binding
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = s.get("name").and_then(Value::as_str).unwrap_or("");
            let (map, key) = match s.get("kind").and_then(Value::as_str) {
                Some("User") => (&mut self.by_user, name.to_string()),
                Some("Group") => (&mut self.by_group, name.to_string()),
                Some("ServiceAccount") => {
                    let sns = s
                        .get("namespace")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .unwrap_or(ns);
                    (&mut self.by_user, super::token::sa_user(sns, name))
                }
                _ => continue,
            };
            map.entry(key).or_default().push(Grant {
                namespace: scope.clone(),
                rules: rules.clone(),
                source: source.clone(),
            });
        }
    }
}

/// Every stored object of an RBAC resource (`roles`, `clusterrolebindings`, …).
pub fn stored(store: &Store, resource: &str) -> Vec<Value> {
    let key = (
        "rbac.authorization.k8s.io".to_string(),
        resource.to_string(),
    );
    store
        .list(&key, &Default::default())
        .1
        .iter()
        .map(|o| o.value())
        .collect()
}

fn meta(v: &Value, k: &str) -> String {
    v.pointer(&format!("/metadata/{k}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn role_ref(b: &Value) -> Option<(String, String)> {
    let r = b.get("roleRef")?;
    Some((
        r.get("kind")?.as_str()?.to_string(),
        r.get("name")?.as_str()?.to_string(),
    ))
}

pub fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules")
        .and_then(|r| serde_json::from_value::<Vec<Rule>>(r.clone()).ok())
        .unwrap_or_default()
}

/// ClusterRoles by name, an aggregated one with the rules of every ClusterRole its
/// `aggregationRule` selects (as kube's aggregation controller fills them in, whether or
/// not the stored object shows them yet).
pub fn resolve_cluster_roles(all: &[Value]) -> HashMap<String, Arc<Vec<Rule>>> {
    let mut out: HashMap<String, Arc<Vec<Rule>>> = all
        .iter()
        .map(|r| (meta(r, "name"), Arc::new(rules_of(r))))
        .collect();
    for (name, rules) in super::aggregate::aggregated(all) {
        let typed = rules
            .into_iter()
            .filter_map(|r| serde_json::from_value::<Rule>(r).ok())
            .collect();
        out.insert(name, Arc::new(typed));
    }
    out
}

/// The index, rebuilt at the first request after an RBAC object changed — from a store
/// that shows that change: a write is committed before the store makes it visible, so an
/// index built in between would miss it (it is built again until it does not).
#[derive(Default)]
pub struct Authorizer {
    index: RwLock<Arc<Index>>,
    /// The newest revision that changed RBAC, and the visible revision the index was built
    /// from.
    wanted: AtomicU64,
    built: AtomicU64,
}

impl Authorizer {
    pub fn new(store: &Store) -> Authorizer {
        let a = Authorizer::default();
        a.built.store(store.visible_rev(), Ordering::Release);
        *a.index.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Index::build(store));
        a
    }

    /// An RBAC object (or a namespace holding some) changed at `rev`.
    pub fn invalidate(&self, rev: u64) {
        self.wanted.fetch_max(rev, Ordering::AcqRel);
    }

    pub fn index(&self, store: &Store) -> Arc<Index> {
        if self.built.load(Ordering::Acquire) < self.wanted.load(Ordering::Acquire) {
            let visible = store.visible_rev();
            let fresh = Arc::new(Index::build(store));
            *self.index.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
            self.built.fetch_max(visible, Ordering::AcqRel);
            return fresh;
        }
        self.index.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// kube's authorizer chain: `system:masters` always, then RBAC.
    pub fn authorize(&self, store: &Store, user: &User, a: &Attributes) -> (bool, String) {
        if user.is_master() {
            return (true, String::new());
        }
        self.index(store).authorize(user, a)
    }
}

#[cfg(test)]
mod tests;
