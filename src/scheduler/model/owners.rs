//! What kube-scheduler's default topology spreading spreads a pod against: the label
//! selectors of the Services that select it and of its controller (a ReplicaSet,
//! StatefulSet or ReplicationController), merged into one (`helper.DefaultSelector`).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The controllers whose selectors default spreading reads, as (apiVersion, kind).
const CONTROLLERS: [(&str, &str); 3] = [
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
];

#[derive(Default)]
pub struct Owners {
    /// (kind, namespace, name) → the controller's selector.
    controllers: HashMap<(String, String, String), LabelSelector>,
    /// namespace → service name → `spec.selector`.
    services: HashMap<String, BTreeMap<String, BTreeMap<String, String>>>,
}

fn ns_name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

impl Owners {
    pub fn is_empty(&self) -> bool {
        self.controllers.is_empty() && self.services.is_empty()
    }

    /// A controller's selector (a ReplicationController's `spec.selector` map as matchLabels).
    pub fn upsert_controller(
        &mut self,
        kind: &str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        selector: LabelSelector,
    ) {
        let (ns, name) = ns_name(meta);
        self.controllers
            .insert((kind.to_string(), ns, name), selector);
    }

    pub fn remove_controller(
        &mut self,
        kind: &str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        let (ns, name) = ns_name(meta);
        self.controllers.remove(&(kind.to_string(), ns, name));
    }

    pub fn upsert_service(&mut self, s: &k8s_openapi::api::core::v1::Service) {
        let (ns, name) = ns_name(&s.metadata);
        let selector = s
            .spec
            .as_ref()
            .and_then(|sp| sp.selector.clone())
            .unwrap_or_default();
        self.services.entry(ns).or_default().insert(name, selector);
    }

    pub fn remove_service(&mut self, s: &k8s_openapi::api::core::v1::Service) {
        let (ns, name) = ns_name(&s.metadata);
        if let Some(m) = self.services.get_mut(&ns) {
            m.remove(&name);
        }
    }

    /// `DefaultSelector`: the pod's Services' selectors merged, with its controller's
    /// selector added; None when that is empty (the pod is not spread by default).
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let labels = pod.metadata.labels.as_ref();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let mut match_labels = BTreeMap::new();
        for sel in self.services.get(&ns).into_iter().flat_map(|m| m.values()) {
            let selects = !sel.is_empty()
                && sel
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if selects {
                match_labels.extend(sel.clone());
            }
        }
        let mut expressions = Vec::new();
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        if let Some(o) =
            owner.filter(|o| CONTROLLERS.contains(&(o.api_version.as_str(), o.kind.as_str())))
            && let Some(sel) = self.controllers.get(&(o.kind.clone(), ns, o.name.clone()))
        {
            match_labels.extend(sel.match_labels.clone().unwrap_or_default());
            expressions.extend(sel.match_expressions.clone().unwrap_or_default());
        }
        if match_labels.is_empty() && expressions.is_empty() {
            return None;
        }
        Some(LabelSelector {
            match_labels: Some(match_labels).filter(|m| !m.is_empty()),
            match_expressions: Some(expressions).filter(|e| !e.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn services_and_the_controller_make_the_default_selector() {
        let mut o = Owners::default();
        let rs_meta = serde_json::from_value(json!({"name": "web-7d", "namespace": "d"})).unwrap();
        let rs_sel: LabelSelector = serde_json::from_value(
            json!({"matchLabels": {"app": "web", "pod-template-hash": "7d"},
            "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
        )
        .unwrap();
        o.upsert_controller("ReplicaSet", &rs_meta, rs_sel);
        let svc = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d"},
            "spec": {"selector": {"app": "web", "tier": "fe"}}}))
        .unwrap();
        o.upsert_service(&svc);
        let other = serde_json::from_value(json!({"metadata": {"name": "db", "namespace": "d"},
            "spec": {"selector": {"app": "db"}}}))
        .unwrap();
        o.upsert_service(&other);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-7d-x", "namespace": "d",
            "labels": {"app": "web", "tier": "fe", "pod-template-hash": "7d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d", "uid": "u", "controller": true}]}})).unwrap();
        let sel = o.default_selector(&pod).unwrap();
        assert_eq!(
            serde_json::to_value(&sel).unwrap(),
            json!({"matchLabels": {"app": "web", "pod-template-hash": "7d", "tier": "fe"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}]})
        );
        let lone: Pod = serde_json::from_value(
            json!({"metadata": {"name": "x", "namespace": "d", "labels": {"app": "cache"}}}),
        )
        .unwrap();
        assert!(
            o.default_selector(&lone).is_none(),
            "nothing selects it: not spread"
        );
        let job: Pod = serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "d", "labels": {"app": "cache"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]}})).unwrap();
        assert!(
            o.default_selector(&job).is_none(),
            "a Job is not a controller default spreading reads"
        );
    }
}
