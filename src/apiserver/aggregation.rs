//! kube-controller-manager's ClusterRole aggregation controller: a ClusterRole with an
//! `aggregationRule` has its `rules` replaced by those of every other ClusterRole its
//! selectors match (in name order, each rule once), so `kubectl get clusterrole admin -o
//! yaml` shows what `admin` grants. The authorizer resolves aggregation itself; this keeps
//! the stored objects true.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::auth::aggregate::aggregated;
use super::http::ServerState;
use super::store::{Change, Filter, Skippable, WatchItem};

fn key() -> (String, String) {
    (
        "rbac.authorization.k8s.io".to_string(),
        "clusterroles".to_string(),
    )
}

/// Writes every aggregated ClusterRole whose stored rules differ.
pub fn pass(state: &ServerState) {
    let (_, roles) = state.store.list(&key(), &Filter::default());
    let values: Vec<Value> = roles.iter().map(|r| r.value()).collect();
    for (name, want) in aggregated(&values) {
        let committed = state.store.commit(&key(), "", &name, |cur| {
            let Some(cur) = cur else {
                return Err(Skippable::Skip);
            };
            let mut v = cur.value();
            if v.get("rules").and_then(Value::as_array) == Some(&want) {
                return Err(Skippable::Skip);
            }
            v["rules"] = Value::Array(want.clone());
            Ok(Change::Put(v))
        });
        if let Ok(c) = committed {
            state.authz.invalidate(c.object.rev);
            tracing::debug!(clusterrole = %name, "aggregated rules written");
        }
    }
}

/// Runs [`pass`] at start and after every ClusterRole change, until `stop`.
pub async fn run(state: Arc<ServerState>, stop: CancellationToken) {
    loop {
        let Ok(mut watch) = state.store.watch(&key(), None, Filter::default(), false) else {
            return;
        };
        pass(&state);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                item = watch.rx.recv() => match item {
                    Some(WatchItem::Event(..)) => pass(&state),
                    Some(WatchItem::Bookmark(_)) => {}
                    // Closed for lagging: watch again.
                    None => break,
                },
            }
        }
    }
}
