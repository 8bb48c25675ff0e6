//! The CRD cleanup controller, as kube's CRDFinalizer: every instance of a terminating CRD
//! is deleted the normal way (its own finalizers honoured); once none is left the
//! cleanup finalizer comes off and the CRD goes.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::crd_lifecycle::{FINALIZER, crd_key, set_terminating};
use super::http::ServerState;
use super::http::delete::{DeleteOptions, delete_one};
use super::store::{Change, Filter, Skippable};

fn held_by_cleanup(crd: &Value) -> bool {
    crd.pointer("/metadata/deletionTimestamp").is_some()
        && crd
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// Deletes every instance not yet being deleted; the number still stored.
async fn delete_instances(state: &Arc<ServerState>, group: &str, plural: &str) -> usize {
    let Some(info) = state.registry.get(group, plural) else {
        return 0;
    };
    let (_, items) = state.store.list(&info.key(), &Filter::default());
    let version = info.versions.first().cloned().unwrap_or_default();
    let opts = DeleteOptions::default();
    for item in &items {
        if item
            .value()
            .pointer("/metadata/deletionTimestamp")
            .is_some()
        {
            continue;
        }
        let deleted = delete_one(
            state,
            &info,
            &version,
            &item.namespace,
            &item.name,
            &opts,
            false,
        )
        .await;
        if let Err(e) = deleted
            && e.code != 404
        {
            tracing::warn!(resource = %info.qualified(), name = %item.name, error = %e.message, "deleting a custom resource of a deleted CRD");
        }
    }
    state.store.count(&info.key())
}

/// Writes the CRD's condition, or (`left == 0`) takes the finalizer off and, when nothing
/// else holds it, removes the CRD.
fn settle(state: &Arc<ServerState>, name: &str, left: usize) {
    let committed = state.store.commit(&crd_key(), "", name, |cur| {
        let Some(cur) = cur else {
            return Err(Skippable::Skip);
        };
        let mut v = cur.value();
        if left > 0 {
            let msg = "CustomResource deletion is in progress";
            set_terminating(&mut v, "True", "InstanceDeletionInProgress", msg);
        } else {
            set_terminating(
                &mut v,
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
            );
            if let Some(f) = v["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x != FINALIZER);
            }
            if v["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                return Ok(Change::Delete);
            }
        }
        if v == cur.value() {
            return Err(Skippable::Skip);
        }
        Ok(Change::Put(v))
    });
    if let Ok(c) = committed
        && super::http::write::after_controller_write(state, &crd_key(), &c)
    {
        tracing::info!(crd = name, "custom resource definition deleted");
    }
}

/// One pass over every CRD held by the cleanup finalizer; true while any remains.
pub async fn pass(state: &Arc<ServerState>) -> bool {
    let (_, all) = state.store.list(&crd_key(), &Filter::default());
    let mut any = false;
    for crd in all {
        let v = crd.value();
        if !held_by_cleanup(&v) {
            continue;
        }
        any = true;
        let group = v.pointer("/spec/group").and_then(Value::as_str);
        let plural = v.pointer("/spec/names/plural").and_then(Value::as_str);
        let left = match (group, plural) {
            (Some(g), Some(p)) => delete_instances(state, g, p).await,
            _ => 0,
        };
        settle(state, &crd.name, left);
    }
    any
}

/// Runs a pass whenever a CRD changes, and every second while one is terminating.
pub async fn run(state: Arc<ServerState>, stop: CancellationToken) {
    let store = state.store.clone();
    super::store::resync_loop(&store, &crd_key(), &stop, || pass(&state)).await
}
