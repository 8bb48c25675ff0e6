//! Objects a fresh server starts with: namespaces, priority classes, kube's bootstrap RBAC
//! policy, koord's CRDs; and
//! serving every stored CRD on start.

use std::sync::Arc;

use serde_json::{Value, json};

use super::registry::Registry;
use super::semantics::prepare_create;
use super::store::{Change, Skippable, Store, StoreError};
use crate::api::extension::priority::PriorityClass;

pub const NAMESPACES: &[&str] = &[
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "koordinator-system",
];

/// The two classes kube-apiserver creates itself (Koordinator's four come from
/// [`PriorityClass::ALL`]).
const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster.",
    ),
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
];

fn koord_class_description(c: PriorityClass) -> &'static str {
    match c {
        PriorityClass::Prod => "Koordinator production (latency-sensitive) workloads.",
        PriorityClass::Mid => "Koordinator mid-tier workloads.",
        PriorityClass::Batch => "Koordinator batch workloads running on reclaimed resources.",
        PriorityClass::Free | PriorityClass::None => "Koordinator free (lowest) workloads.",
    }
}

/// Koordinator's four classes, then the system ones.
fn priority_classes() -> impl Iterator<Item = (&'static str, i64, &'static str)> {
    PriorityClass::ALL
        .into_iter()
        .map(|c| {
            (
                c.name(),
                i64::from(c.object_value()),
                koord_class_description(c),
            )
        })
        .chain(SYSTEM_PRIORITY_CLASSES.iter().copied())
}

fn create_if_missing(
    store: &Store,
    registry: &Registry,
    group: &str,
    resource: &str,
    name: &str,
    mut obj: Value,
) -> Result<(), StoreError> {
    let key = (group.to_string(), resource.to_string());
    if store.get(&key, "", name).is_some() {
        return Ok(());
    }
    if let Some(info) = registry.get(group, resource) {
        let _ = prepare_create(&info, &mut obj, store);
    }
    match store.commit(&key, "", name, |cur| {
        if cur.is_some() {
            Err(Skippable::Skip)
        } else {
            Ok(Change::Put(obj))
        }
    }) {
        Ok(_) | Err(Skippable::Skip) => Ok(()),
        Err(Skippable::Store(e)) => Err(e),
    }
}

/// Creates what is missing and serves every stored CRD. Koord's own CRDs are updated to
/// the schema of this build.
pub fn run(store: &Arc<Store>, registry: &Registry) -> Result<(), StoreError> {
    for ns in NAMESPACES {
        let mut labels = json!({"kubernetes.io/metadata.name": ns});
        // Koordinator's pod webhooks skip namespaces labelled `control-plane`.
        if *ns == "koordinator-system" {
            labels["control-plane"] = "koordinator".into();
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}, "spec": {}});
        create_if_missing(store, registry, "", "namespaces", ns, obj)?;
    }
    for (name, value, description) in priority_classes() {
        let obj = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "description": description, "preemptionPolicy": "PreemptLowerPriority"});
        create_if_missing(
            store,
            registry,
            "scheduling.k8s.io",
            "priorityclasses",
            name,
            obj,
        )?;
    }
    super::auth::policy::ensure(store, |resource, obj| {
        if let Some(info) = registry.get("rbac.authorization.k8s.io", resource) {
            let _ = prepare_create(&info, obj, store);
        }
    })?;
    let crd_key = (
        "apiextensions.k8s.io".to_string(),
        "customresourcedefinitions".to_string(),
    );
    for crd in crate::api::crds::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut obj = serde_json::to_value(&crd).unwrap_or_default();
        obj["apiVersion"] = "apiextensions.k8s.io/v1".into();
        obj["kind"] = "CustomResourceDefinition".into();
        match store.get(&crd_key, "", &name) {
            None => create_if_missing(store, registry, &crd_key.0, &crd_key.1, &name, obj)?,
            Some(existing) if existing.value().get("spec") != obj.get("spec") => {
                let mut updated = existing.value();
                updated["spec"] = obj["spec"].clone();
                store.commit::<StoreError>(&crd_key, "", &name, |_| Ok(Change::Put(updated)))?;
            }
            Some(_) => {}
        }
    }
    // What was just written is read back: it must be on disk (visible) first.
    store.settle()?;
    let (_, crds) = store.list(&crd_key, &Default::default());
    for crd in crds {
        if let Err(e) = registry.apply_crd(&crd.value()) {
            tracing::warn!(crd = %crd.name, error = %e, "stored CRD cannot be served");
        }
    }
    Ok(())
}
