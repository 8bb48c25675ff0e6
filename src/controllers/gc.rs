//! The garbage collector (kube-controller-manager's `garbagecollector`) for the kinds these
//! controllers watch. Three jobs, as kube's:
//! - an owner deleted with `Orphan` propagation holds the `orphan` finalizer until every
//!   dependent's reference to it is removed;
//! - an owner deleted with `Foreground` propagation holds `foregroundDeletion` while its
//!   dependents are deleted, until none with `blockOwnerDeletion` is left;
//! - a dependent whose owners are all gone is deleted (background); one with some owners
//!   left loses only the references to the gone ones.
//!
//! Owners of kinds not watched here count as present: nothing is deleted on a guess. An
//! owner missing from the caches is confirmed gone by the API before anything is done.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::{Api, Client};
use serde_json::json;

/// kube's finalizer names (also what the API server adds on DELETE).
pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// A kind the collector watches.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
) -> Kind {
    Kind {
        group,
        version,
        kind,
        plural,
    }
}

pub const DEPLOYMENT: Kind = kind("apps", "v1", "Deployment", "deployments");
pub const REPLICA_SET: Kind = kind("apps", "v1", "ReplicaSet", "replicasets");
pub const DAEMON_SET: Kind = kind("apps", "v1", "DaemonSet", "daemonsets");
pub const STATEFUL_SET: Kind = kind("apps", "v1", "StatefulSet", "statefulsets");
pub const JOB: Kind = kind("batch", "v1", "Job", "jobs");
pub const POD: Kind = kind("", "v1", "Pod", "pods");
pub const CONTROLLER_REVISION: Kind =
    kind("apps", "v1", "ControllerRevision", "controllerrevisions");

pub const PERSISTENT_VOLUME_CLAIM: Kind =
    kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");

const KINDS: [&Kind; 8] = [
    &CONTROLLER_REVISION,
    &PERSISTENT_VOLUME_CLAIM,
    &DEPLOYMENT,
    &REPLICA_SET,
    &DAEMON_SET,
    &STATEFUL_SET,
    &JOB,
    &POD,
];

/// The `(group, resource)`s whose deletion this collector finishes: the API server holds
/// them with `orphan` / `foregroundDeletion` only when asked to and only for these.
pub const OWNERS: [(&str, &str); 5] = [
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "daemonsets"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
];

/// The watched kind an owner reference names, if it is one.
pub fn kind_of(r: &OwnerReference) -> Option<&'static Kind> {
    let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    KINDS
        .into_iter()
        .find(|k| k.group == group && k.kind == r.kind)
}

/// One object of a watched kind.
pub struct Obj<'a> {
    pub kind: &'static Kind,
    pub meta: &'a ObjectMeta,
}

/// Which object an action is about.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Target {
    pub kind: &'static Kind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

impl Target {
    fn of(o: &Obj) -> Self {
        Self {
            kind: o.kind,
            namespace: o.meta.namespace.clone().unwrap_or_default(),
            name: o.meta.name.clone().unwrap_or_default(),
            uid: o.meta.uid.clone().unwrap_or_default(),
            resource_version: o.meta.resource_version.clone().unwrap_or_default(),
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Action {
    /// Delete the object; `foreground` when an owner waits for it and it has dependents of
    /// its own. `unless_owners` lists owners missing from the caches: skip if one exists.
    Delete {
        target: Target,
        foreground: bool,
        unless_owners: Vec<OwnerReference>,
    },
    /// Keep only `keep` of the object's owner references (`gone` are the removed ones; those
    /// missing from the caches are confirmed first).
    Unown {
        target: Target,
        keep: Vec<OwnerReference>,
        gone: Vec<OwnerReference>,
        confirm: bool,
    },
    /// Remove `finalizer`, keeping `keep`.
    Release {
        target: Target,
        keep: Vec<String>,
        finalizer: &'static str,
    },
}

fn refs(m: &ObjectMeta) -> impl Iterator<Item = &OwnerReference> {
    m.owner_references.iter().flatten()
}

fn has_finalizer(m: &ObjectMeta, f: &str) -> bool {
    m.finalizers.iter().flatten().any(|x| x == f)
}

fn release(o: &Obj, finalizer: &'static str) -> Action {
    let keep = o.meta.finalizers.iter().flatten();
    Action::Release {
        target: Target::of(o),
        keep: keep.filter(|f| *f != finalizer).cloned().collect(),
        finalizer,
    }
}

/// One pass over everything the caches hold.
pub fn plan(objs: &[Obj]) -> Vec<Action> {
    let mut present: HashMap<&str, &Obj> = HashMap::new();
    let mut dependents: HashMap<&str, Vec<&Obj>> = HashMap::new();
    for o in objs {
        present.insert(o.meta.uid.as_deref().unwrap_or_default(), o);
        for r in refs(o.meta) {
            dependents.entry(r.uid.as_str()).or_default().push(o);
        }
    }
    let mut out = Vec::new();
    for o in objs.iter().filter(|o| o.meta.deletion_timestamp.is_some()) {
        let uid = o.meta.uid.as_deref().unwrap_or_default();
        let deps = dependents.get(uid).map_or(&[][..], Vec::as_slice);
        if has_finalizer(o.meta, ORPHAN) {
            out.extend(deps.iter().map(|d| {
                let (gone, keep) = refs(d.meta).cloned().partition(|r| r.uid == uid);
                Action::Unown {
                    target: Target::of(d),
                    keep,
                    gone,
                    confirm: false,
                }
            }));
            if deps.is_empty() {
                out.push(release(o, ORPHAN));
            }
        } else if has_finalizer(o.meta, FOREGROUND) {
            let live = deps.iter().filter(|d| d.meta.deletion_timestamp.is_none());
            out.extend(live.map(|d| Action::Delete {
                target: Target::of(d),
                foreground: dependents.contains_key(d.meta.uid.as_deref().unwrap_or_default()),
                unless_owners: Vec::new(),
            }));
            let blocking = deps.iter().any(|d| {
                refs(d.meta).any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
            });
            if !blocking {
                out.push(release(o, FOREGROUND));
            }
        }
    }
    for o in objs.iter().filter(|o| o.meta.deletion_timestamp.is_none()) {
        let (gone, keep): (Vec<OwnerReference>, Vec<OwnerReference>) = refs(o.meta)
            .cloned()
            .partition(|r| kind_of(r).is_some() && !present.contains_key(r.uid.as_str()));
        if gone.is_empty() {
            continue;
        }
        out.push(if keep.is_empty() {
            Action::Delete {
                target: Target::of(o),
                foreground: false,
                unless_owners: gone,
            }
        } else {
            Action::Unown {
                target: Target::of(o),
                keep,
                gone,
                confirm: true,
            }
        });
    }
    out
}

fn api(client: &Client, k: &Kind, ns: &str) -> Api<DynamicObject> {
    let api_version = match k.group {
        "" => k.version.to_string(),
        g => format!("{g}/{}", k.version),
    };
    let ar = ApiResource {
        group: k.group.into(),
        version: k.version.into(),
        api_version,
        kind: k.kind.into(),
        plural: k.plural.into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Whether the owner `r` (namespace `ns`) exists; when the API cannot tell, it does.
async fn exists(client: &Client, ns: &str, r: &OwnerReference) -> bool {
    let Some(k) = kind_of(r) else { return true };
    match api(client, k, ns).get_opt(&r.name).await {
        Ok(Some(o)) => o.metadata.uid.as_deref() == Some(r.uid.as_str()),
        Ok(None) => false,
        Err(_) => true,
    }
}

async fn any_exists(client: &Client, ns: &str, owners: &[OwnerReference]) -> bool {
    for r in owners {
        if exists(client, ns, r).await {
            return true;
        }
    }
    false
}

/// Carries the plan out through the API; each write is conditional on what was planned
/// on (uid, resourceVersion), so a race only costs a pass.
pub async fn apply(client: &Client, actions: Vec<Action>) {
    let pp = PatchParams::default();
    for a in actions {
        match a {
            Action::Delete {
                target: t,
                foreground,
                unless_owners,
            } => {
                if any_exists(client, &t.namespace, &unless_owners).await {
                    continue;
                }
                let dp = DeleteParams {
                    propagation_policy: Some(if foreground {
                        PropagationPolicy::Foreground
                    } else {
                        PropagationPolicy::Background
                    }),
                    preconditions: Some(Preconditions {
                        uid: Some(t.uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                let r = api(client, t.kind, &t.namespace).delete(&t.name, &dp).await;
                super::report(t.kind.plural, &t.name, r);
            }
            Action::Unown {
                target: t,
                keep,
                gone,
                confirm,
            } => {
                if confirm && any_exists(client, &t.namespace, &gone).await {
                    continue;
                }
                let refs = if keep.is_empty() {
                    json!(null)
                } else {
                    json!(keep)
                };
                let p = json!({"metadata": {"ownerReferences": refs, "resourceVersion": t.resource_version}});
                let r = api(client, t.kind, &t.namespace)
                    .patch(&t.name, &pp, &Patch::Merge(p))
                    .await;
                super::report(t.kind.plural, &t.name, r);
            }
            Action::Release {
                target: t, keep, ..
            } => {
                let f = if keep.is_empty() {
                    json!(null)
                } else {
                    json!(keep)
                };
                let p =
                    json!({"metadata": {"finalizers": f, "resourceVersion": t.resource_version}});
                let r = api(client, t.kind, &t.namespace)
                    .patch(&t.name, &pp, &Patch::Merge(p))
                    .await;
                super::report(t.kind.plural, &t.name, r);
            }
        }
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
