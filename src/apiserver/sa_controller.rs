//! Two controllers of kube-controller-manager that every namespace relies on: the
//! ServiceAccount controller (a `default` ServiceAccount in every namespace, made again
//! when deleted) and the root CA publisher (the `kube-root-ca.crt` ConfigMap holding the
//! API server's CA, which the pods' projected token volumes read `ca.crt` from).
//! Without TLS there is no CA: the ConfigMap holds an empty `ca.crt`.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::http::ServerState;
use super::sa_admission::{DEFAULT_SERVICE_ACCOUNT, ROOT_CA_CONFIGMAP};
use super::semantics::prepare_create;
use super::store::{Change, Filter, Skippable, WatchItem, WatchStart};

const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

fn key(resource: &str) -> (String, String) {
    (String::new(), resource.to_string())
}

fn root_ca(ns: &str, ca: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns,
            "annotations": {"kubernetes.io/description": DESCRIPTION}},
        "data": {"ca.crt": ca}})
}

/// Creates `obj` as the API server would when `ns/name` is missing; with `same`, replaces
/// a stored one that differs (keeping its metadata).
fn ensure(state: &ServerState, resource: &str, ns: &str, name: &str, obj: Value, same: bool) {
    let Some(info) = state.registry.get("", resource) else {
        return;
    };
    let mut fresh = obj.clone();
    if prepare_create(&info, &mut fresh, &state.store).is_err() {
        return;
    }
    let committed = state.store.commit(&info.key(), ns, name, |cur| match cur {
        None => Ok(Change::Put(fresh)),
        Some(c) if same && c.value().get("data") != obj.get("data") => {
            let mut v = c.value();
            v["data"] = obj["data"].clone();
            Ok(Change::Put(v))
        }
        Some(_) => Err(Skippable::Skip),
    });
    if committed.is_ok() {
        tracing::debug!(namespace = ns, resource, name, "created or updated");
    }
}

/// One pass over every namespace that is not being deleted.
pub fn pass(state: &ServerState, ca_pem: &str) {
    let (_, namespaces) = state.store.list(&key("namespaces"), &Filter::default());
    for n in namespaces {
        let v = n.value();
        if v.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let ns = n.name.as_str();
        if state
            .store
            .latest(&key("serviceaccounts"), ns, DEFAULT_SERVICE_ACCOUNT)
            .is_none()
        {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": ns}});
            ensure(
                state,
                "serviceaccounts",
                ns,
                DEFAULT_SERVICE_ACCOUNT,
                sa,
                false,
            );
        }
        let stored = state
            .store
            .latest(&key("configmaps"), ns, ROOT_CA_CONFIGMAP)
            .map(|c| c.value());
        if stored.and_then(|c| c.pointer("/data/ca.crt").cloned()) != Some(ca_pem.into()) {
            let cm = root_ca(ns, ca_pem);
            ensure(state, "configmaps", ns, ROOT_CA_CONFIGMAP, cm, true);
        }
    }
}

/// A watch of `resource`, of only the object named `name` when given (so writes of
/// other ConfigMaps and ServiceAccounts wake nothing).
fn watch(state: &ServerState, resource: &str, name: Option<&str>) -> Option<WatchStart> {
    let fields = name.map(|n| format!("metadata.name={n}"));
    let filter = Filter::parse(None, None, fields.as_deref()).ok()?;
    state.store.watch(&key(resource), None, filter, false).ok()
}

/// Runs [`pass`] at start and after every change to namespaces, ServiceAccounts or
/// ConfigMaps, until `stop`.
pub async fn run(state: Arc<ServerState>, ca_pem: Option<String>, stop: CancellationToken) {
    let ca = ca_pem.unwrap_or_default();
    let kinds = [
        ("namespaces", None),
        ("serviceaccounts", Some(DEFAULT_SERVICE_ACCOUNT)),
        ("configmaps", Some(ROOT_CA_CONFIGMAP)),
    ];
    let mut watches: Vec<Option<WatchStart>> =
        kinds.iter().map(|(k, n)| watch(&state, k, *n)).collect();
    loop {
        pass(&state, &ca);
        let mut changed = false;
        while !changed {
            let next = async {
                let waits = watches.iter_mut().enumerate().map(|(i, w)| {
                    Box::pin(async move {
                        match w {
                            Some(w) => (i, w.rx.recv().await),
                            None => std::future::pending().await,
                        }
                    })
                });
                futures::future::select_all(waits).await.0
            };
            let (i, item) = tokio::select! {
                _ = stop.cancelled() => return,
                got = next => got,
            };
            match item {
                Some(WatchItem::Event(..)) => changed = true,
                Some(WatchItem::Bookmark(_)) => {}
                // Closed for lagging: watch again, and look at everything.
                None => {
                    watches[i] = watch(&state, kinds[i].0, kinds[i].1);
                    changed = true;
                }
            }
        }
    }
}
