//! What a role may do against the API server, asked before it starts. Each role keeps one
//! list of the requests it makes ([`Need`]); koord's manifests grant exactly those lists,
//! and at start the role asks the API server (one SelfSubjectAccessReview each) whether
//! its ServiceAccount may make them. A required one missing keeps the role from starting
//! — not ready, and a line naming verb, group and resource — until RBAC grants it; an
//! optional one missing is said once, and the role does without it (as Koordinator's
//! components do under the chart's narrower RBAC).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::{ReadyHandle, Shutdown};

/// How often a role missing a required permission asks again.
const RECHECK: Duration = Duration::from_secs(30);

/// Requests a role makes: `verbs` on `resources` (`pods/binding` for a subresource) of one
/// API group, cluster-wide or in the role's own namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Need {
    pub group: &'static str,
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// Only in the role's own namespace (its Lease, its ConfigMaps): a Role there.
    pub own_namespace: bool,
    /// What the role does without it; `None`: it cannot work without it.
    pub without: Option<&'static str>,
}

impl Need {
    pub const fn cluster(
        group: &'static str,
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Need {
        Need {
            group,
            resources,
            verbs,
            own_namespace: false,
            without: None,
        }
    }

    pub const fn own_namespace(
        group: &'static str,
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Need {
        Need {
            own_namespace: true,
            ..Need::cluster(group, resources, verbs)
        }
    }

    /// The role works without it, doing `without` instead.
    pub const fn optional(self, without: &'static str) -> Need {
        Need {
            without: Some(without),
            ..self
        }
    }
}

pub const READ: &[&str] = &["get", "list", "watch"];

/// One request: (verb, group, resource with any `/subresource`).
pub type Request = (String, String, String);

/// Every (verb, group, resource) a list names, each once.
pub fn requests(needs: &[Need]) -> BTreeSet<Request> {
    needs
        .iter()
        .flat_map(|n| {
            n.resources.iter().flat_map(move |r| {
                n.verbs
                    .iter()
                    .map(move |v| (v.to_string(), n.group.to_string(), r.to_string()))
            })
        })
        .collect()
}

/// What a role found it may not do, of what it can do without.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Granted {
    denied: BTreeSet<Request>,
}

impl Granted {
    /// Everything allowed (a role that asks nothing, or tests).
    pub fn all() -> Granted {
        Granted::default()
    }

    pub fn allows(&self, verb: &str, group: &str, resource: &str) -> bool {
        !self
            .denied
            .contains(&(verb.into(), group.into(), resource.into()))
    }
}

/// Asks until every required request of `needs` is allowed (the role's `ready` child
/// `access` is not ready meanwhile); `None` when the process drains first.
pub async fn settle(
    client: &kube::Client,
    role: &str,
    needs: &[Need],
    namespace: &str,
    ready: &ReadyHandle,
    shutdown: &Shutdown,
) -> Option<Granted> {
    let gate = ready.child("access");
    let mut said: Option<Vec<Request>> = None;
    loop {
        let denied = check(client, needs, namespace).await;
        let (required, optional): (Vec<_>, Vec<_>) =
            denied.into_iter().partition(|(_, n)| n.without.is_none());
        if required.is_empty() {
            for (n, verbs) in by_need(&optional) {
                tracing::warn!(role, verbs = %verbs, group = %group_name(n.group),
                    resources = %n.resources.join(","), "RBAC does not allow this; {}",
                    n.without.unwrap_or_default());
            }
            gate.set(true);
            return Some(Granted {
                denied: optional.into_iter().map(|(r, _)| r).collect(),
            });
        }
        let now: Vec<Request> = required.iter().map(|(r, _)| r.clone()).collect();
        if said.as_ref() != Some(&now) {
            for (n, verbs) in by_need(&required) {
                let scope = if n.own_namespace { namespace } else { "" };
                tracing::error!(role, verbs = %verbs, group = %group_name(n.group),
                    resources = %n.resources.join(","), namespace = scope,
                    "RBAC does not allow a request this role needs; not ready until it does (asking again every 30 s)");
            }
            said = Some(now);
        }
        tokio::select! {
            _ = tokio::time::sleep(RECHECK) => {}
            _ = shutdown.draining() => return None,
        }
    }
}

/// Denied requests by need, each with its denied verbs (one log line per need).
fn by_need(denied: &[(Request, Need)]) -> Vec<(Need, String)> {
    let mut out: Vec<(Need, Vec<&str>)> = Vec::new();
    for ((verb, _, _), n) in denied {
        match out.iter_mut().find(|(m, _)| m == n) {
            Some((_, verbs)) if !verbs.contains(&verb.as_str()) => verbs.push(verb),
            Some(_) => {}
            None => out.push((*n, vec![verb])),
        }
    }
    out.into_iter().map(|(n, v)| (n, v.join(","))).collect()
}

fn group_name(g: &str) -> &str {
    if g.is_empty() { "core" } else { g }
}

/// The requests of `needs` RBAC denies, each with its need.
async fn check(client: &kube::Client, needs: &[Need], namespace: &str) -> Vec<(Request, Need)> {
    let mut denied = Vec::new();
    let mut asked = BTreeSet::new();
    for n in needs {
        for r in n.resources {
            for v in n.verbs {
                let key = (v.to_string(), n.group.to_string(), r.to_string());
                if !asked.insert(key.clone()) {
                    continue;
                }
                let ns = if n.own_namespace { namespace } else { "" };
                if !allowed(client, v, n.group, r, ns).await {
                    denied.push((key, *n));
                }
            }
        }
    }
    denied
}

/// One SelfSubjectAccessReview. An API server that cannot answer (no authorization API,
/// a network error) is taken as allowing it: the request itself will say.
async fn allowed(client: &kube::Client, verb: &str, group: &str, resource: &str, ns: &str) -> bool {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                namespace: (!ns.is_empty()).then(|| ns.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    match api.create(&PostParams::default(), &review).await {
        Ok(r) => r.status.is_none_or(|s| s.allowed),
        Err(e) => {
            tracing::debug!(error = %e, verb, group, resource, "access review not answered; assuming allowed");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_listed_once_each() {
        let needs = [
            Need::cluster("", &["pods", "nodes"], READ),
            Need::cluster("", &["pods"], &["get", "patch"]),
            Need::own_namespace("coordination.k8s.io", &["leases"], &["get"]).optional("x"),
        ];
        let r = requests(&needs);
        assert_eq!(r.len(), 8, "{r:?}");
        assert!(r.contains(&("patch".into(), "".into(), "pods".into())));
        assert!(r.contains(&("get".into(), "coordination.k8s.io".into(), "leases".into())));
    }

    #[test]
    fn granted_answers_for_denied_optional_requests() {
        let g = Granted {
            denied: [("list".into(), "batch".into(), "jobs".into())].into(),
        };
        assert!(!g.allows("list", "batch", "jobs"));
        assert!(g.allows("watch", "batch", "jobs"));
        assert!(Granted::all().allows("list", "batch", "jobs"));
    }
}
