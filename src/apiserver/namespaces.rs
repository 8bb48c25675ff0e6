//! Namespace deletion as kube-controller-manager's namespace controller does it: a deleted
//! namespace turns `Terminating`; every object in it is deleted the normal way (its
//! finalizers honoured, pods given their grace period); once nothing is left, the
//! `kubernetes` finalizer is removed and the namespace goes. Until then the namespace's
//! conditions say what remains, and nothing new may be created in it.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::http::ServerState;
use super::http::delete::{DeleteOptions, delete_one};
use super::store::{Change, Filter, Skippable};
use crate::apiserver::semantics::now;

pub use super::semantics::NAMESPACE_FINALIZER as FINALIZER;

fn ns_key() -> (String, String) {
    (String::new(), "namespaces".to_string())
}

/// What one namespace still holds: objects, and those of them held by finalizers.
#[derive(Default, Debug, PartialEq)]
struct Remaining {
    objects: usize,
    /// `resource` -> instances with finalizers.
    finalized: std::collections::BTreeMap<String, usize>,
}

/// Deletes what is left in `ns` (each object once) and counts what remains.
async fn sweep(state: &Arc<ServerState>, ns: &str) -> Remaining {
    let mut left = Remaining::default();
    let filter = Filter {
        namespace: Some(ns.to_string()),
        ..Default::default()
    };
    for info in state.registry.all().into_iter().filter(|i| i.namespaced) {
        let (_, items) = state.store.list(&info.key(), &filter);
        let version = info.versions.first().cloned().unwrap_or_default();
        for item in items {
            let value = item.value();
            if value.pointer("/metadata/deletionTimestamp").is_none() {
                let opts = DeleteOptions::default();
                let deleted =
                    delete_one(state, &info, &version, ns, &item.name, &opts, false).await;
                if let Err(e) = deleted
                    && e.code != 404
                {
                    tracing::warn!(namespace = ns, resource = %info.resource, name = %item.name, error = %e.message, "deleting namespace content");
                }
            }
            let Some(now) = state.store.latest(&info.key(), ns, &item.name) else {
                continue;
            };
            left.objects += 1;
            let held = now
                .value()
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if held {
                *left.finalized.entry(info.resource.clone()).or_default() += 1;
            }
        }
    }
    left
}

/// The conditions kube's namespace controller sets while content remains.
fn conditions(left: &Remaining) -> Value {
    let mut out = Vec::new();
    let at = now();
    if left.objects > 0 {
        out.push(json!({"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": at,
            "reason": "SomeResourcesRemain", "message": format!("Some resources are remaining: {} objects", left.objects)}));
    }
    if !left.finalized.is_empty() {
        let parts: Vec<String> = left
            .finalized
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        out.push(json!({"type": "NamespaceFinalizersRemaining", "status": "True", "lastTransitionTime": at,
            "reason": "SomeFinalizersRemain", "message": format!("Some content in the namespace has finalizers remaining: {}", parts.join(", "))}));
    }
    Value::Array(out)
}

/// Writes the conditions, or (nothing left) takes the finalizer off and removes the
/// namespace when no other finalizer holds it.
fn settle(state: &Arc<ServerState>, ns: &str, left: &Remaining) {
    let key = ns_key();
    let done = left.objects == 0;
    let committed = state.store.commit(&key, "", ns, |cur| {
        let Some(cur) = cur else {
            return Err(Skippable::Skip);
        };
        let mut v = cur.value();
        if done {
            if let Some(f) = v
                .pointer_mut("/spec/finalizers")
                .and_then(Value::as_array_mut)
            {
                f.retain(|x| x.as_str() != Some(FINALIZER));
            }
            let held = |p: &str| {
                v.pointer(p)
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty())
            };
            if !held("/metadata/finalizers") && !held("/spec/finalizers") {
                return Ok(Change::Delete);
            }
        } else {
            let wanted = conditions(left);
            let same = |a: &Value, b: &Value| {
                let strip = |c: &Value| {
                    c.as_array()
                        .map(|l| {
                            l.iter()
                                .map(|x| (x["type"].clone(), x["message"].clone()))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                };
                strip(a) == strip(b)
            };
            if same(&v["status"]["conditions"], &wanted) {
                return Err(Skippable::Skip);
            }
            v["status"]["conditions"] = wanted;
        }
        if v == cur.value() {
            return Err(Skippable::Skip);
        }
        Ok(Change::Put(v))
    });
    if let Ok(c) = committed
        && super::http::write::after_controller_write(state, &ns_key(), &c)
    {
        tracing::info!(namespace = ns, "namespace deleted");
    }
}

/// One pass over every terminating namespace; true while any remains.
pub async fn pass(state: &Arc<ServerState>) -> bool {
    let (_, all) = state.store.list(&ns_key(), &Filter::default());
    let mut any = false;
    for ns in all {
        if ns.value().pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        any = true;
        let left = sweep(state, &ns.name).await;
        settle(state, &ns.name, &left);
    }
    any
}

/// Runs a pass whenever a namespace changes, and every second while one is terminating
/// (its pods finish their grace periods, finalizers are removed); idle otherwise.
pub async fn run(state: Arc<ServerState>, stop: CancellationToken) {
    let store = state.store.clone();
    super::store::resync_loop(&store, &ns_key(), &stop, || pass(&state)).await
}
