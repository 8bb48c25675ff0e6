//! Which resources the server serves: the built-in kinds plus every CRD, and the
//! discovery documents built from them.

mod builtins;
pub use builtins::builtins;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// `(group, resource)`: storage is shared by all versions of a resource.
pub type ResourceKey = (String, String);

/// The aggregated resource-metrics group (served by `http::metrics`).
pub const METRICS_GROUP: &str = "metrics.k8s.io";

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceInfo {
    /// `""` for the core group.
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    pub resource: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// `status`, `binding`, `eviction`, `finalize`.
    pub subresources: Vec<String>,
    /// Built-in kinds accept strategic merge patches; custom resources do not.
    pub builtin: bool,
    /// The CRD's OpenAPI schema (per version), for the OpenAPI documents.
    pub schemas: BTreeMap<String, Value>,
    /// The same schemas compiled, for pruning, defaulting and validating writes.
    pub structural: BTreeMap<String, Arc<crate::apiserver::schema::Schema>>,
    /// The CRD's `additionalPrinterColumns` (per version), for `kubectl get`.
    pub printer_columns: BTreeMap<String, Vec<Value>>,
}

impl ResourceInfo {
    /// `authorization.k8s.io` and `authentication.k8s.io` reviews: answered at once,
    /// never stored.
    pub fn is_review(&self) -> bool {
        self.group == "authorization.k8s.io" || self.group == "authentication.k8s.io"
    }

    pub fn key(&self) -> ResourceKey {
        (self.group.clone(), self.resource.clone())
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn preferred_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }

    /// `pods "x"` style, as Kubernetes names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("spec.{0} is required")]
    Missing(&'static str),
    #[error("spec.scope must be Namespaced or Cluster, not {0:?}")]
    Scope(String),
    #[error("metadata.name must be {expected:?} (<plural>.<group>)")]
    Name { expected: String },
    #[error("{0} is already served by a built-in kind")]
    Builtin(String),
}

/// Reads a CRD object into a resource description.
pub fn from_crd(crd: &Value) -> Result<ResourceInfo, CrdError> {
    let spec = crd.get("spec").ok_or(CrdError::Missing("spec"))?;
    let s = |v: &Value, k: &'static str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let group = s(spec, "group").ok_or(CrdError::Missing("group"))?;
    let names = spec.get("names").ok_or(CrdError::Missing("names"))?;
    let plural = s(names, "plural").ok_or(CrdError::Missing("names.plural"))?;
    let kind = s(names, "kind").ok_or(CrdError::Missing("names.kind"))?;
    let expected = format!("{plural}.{group}");
    if crd.pointer("/metadata/name").and_then(Value::as_str) != Some(expected.as_str()) {
        return Err(CrdError::Name { expected });
    }
    let namespaced = match s(spec, "scope").as_deref() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        Some(other) => return Err(CrdError::Scope(other.into())),
        None => return Err(CrdError::Missing("scope")),
    };
    let list = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut versions = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut structural = BTreeMap::new();
    let mut printer_columns = BTreeMap::new();
    let mut subresources = Vec::new();
    let all = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or(CrdError::Missing("versions"))?;
    // Storage version first, then the other served versions in order.
    let mut ordered: Vec<&Value> = all.iter().filter(|v| v["storage"] == true).collect();
    ordered.extend(all.iter().filter(|v| v["storage"] != true));
    for v in ordered {
        let Some(name) = s(v, "name") else { continue };
        if v["served"] == false {
            continue;
        }
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            schemas.insert(name.clone(), schema.clone());
            match crate::apiserver::schema::compile(schema) {
                Ok(c) => {
                    structural.insert(name.clone(), Arc::new(c));
                }
                Err(e) => tracing::warn!(crd = %expected, version = %name, error = %e,
                    "the CRD's schema does not compile; its objects are not validated"),
            }
        }
        if let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) {
            printer_columns.insert(name.clone(), cols.clone());
        }
        if v.pointer("/subresources/status").is_some()
            && !subresources.contains(&"status".to_string())
        {
            subresources.push("status".to_string());
        }
        versions.push(name);
    }
    if versions.is_empty() {
        return Err(CrdError::Missing("versions (none served)"));
    }
    Ok(ResourceInfo {
        group,
        versions,
        singular: s(names, "singular").unwrap_or_else(|| kind.to_ascii_lowercase()),
        resource: plural,
        kind,
        namespaced,
        short_names: list(names.get("shortNames")),
        categories: list(names.get("categories")),
        subresources,
        builtin: false,
        schemas,
        structural,
        printer_columns,
    })
}

/// The live set of served resources.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<RwLock<BTreeMap<ResourceKey, Arc<ResourceInfo>>>>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let r = Registry::default();
        for info in builtins() {
            r.insert(info);
        }
        r
    }

    fn insert(&self, info: ResourceInfo) {
        self.inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(info.key(), Arc::new(info));
    }

    /// Serves (or re-serves) a CRD's resource.
    pub fn apply_crd(&self, crd: &Value) -> Result<Arc<ResourceInfo>, CrdError> {
        let info = from_crd(crd)?;
        if let Some(existing) = self.get(&info.group, &info.resource)
            && existing.builtin
        {
            return Err(CrdError::Builtin(existing.qualified()));
        }
        self.insert(info.clone());
        Ok(Arc::new(info))
    }

    /// Stops serving a CRD's resource (never a built-in).
    pub fn remove_crd(&self, group: &str, resource: &str) {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let key = (group.to_string(), resource.to_string());
        if inner.get(&key).is_some_and(|i| !i.builtin) {
            inner.remove(&key);
        }
    }

    pub fn get(&self, group: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        inner
            .get(&(group.to_string(), resource.to_string()))
            .cloned()
    }

    /// The resource if it serves `version`.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.get(group, resource)
            .filter(|i| i.versions.iter().any(|v| v == version))
    }

    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// `/api`: the legacy core group versions.
    pub fn api_versions(&self, server: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}]
        })
    }

    /// `/apis`: every named group with its versions.
    pub fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .into_iter()
            .map(|(g, vs)| group_doc(&g, &vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/{group}`.
    pub fn group(&self, group: &str) -> Option<Value> {
        self.groups()
            .into_iter()
            .find(|(g, _)| g == group)
            .map(|(g, vs)| {
                let mut doc = group_doc(&g, &vs);
                doc["kind"] = "APIGroup".into();
                doc["apiVersion"] = "v1".into();
                doc
            })
    }

    /// Named groups in kube-apiserver's discovery order: built-in groups, then CRD groups
    /// (group priority 1000), then the aggregated `metrics.k8s.io` (100) — so kubectl
    /// resolves `nodemetrics` to Koordinator's NodeMetric, not metrics.k8s.io's NodeMetrics.
    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<(u8, String), Vec<String>> = BTreeMap::new();
        for info in self.all().iter().filter(|i| !i.group.is_empty()) {
            let rank = match (info.group.as_str(), info.builtin) {
                (METRICS_GROUP, _) => 2,
                (_, true) => 0,
                (_, false) => 1,
            };
            let versions = groups.entry((rank, info.group.clone())).or_default();
            for v in &info.versions {
                if !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
        }
        groups.into_iter().map(|((_, g), vs)| (g, vs)).collect()
    }

    /// `/api/v1` or `/apis/{group}/{version}`.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let infos: Vec<Arc<ResourceInfo>> = self
            .all()
            .into_iter()
            .filter(|i| i.group == group && i.versions.iter().any(|v| v == version))
            .collect();
        if infos.is_empty() && !(group.is_empty() && version == "v1") {
            return None;
        }
        let mut resources = Vec::new();
        for i in &infos {
            resources.push(json!({
                "name": i.resource,
                "singularName": i.singular,
                "namespaced": i.namespaced,
                "kind": i.kind,
                "verbs": if i.is_review() {
                    json!(["create"])
                } else if i.group == METRICS_GROUP {
                    json!(["get", "list"])
                } else {
                    json!(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
                },
                "shortNames": i.short_names,
                "categories": i.categories,
            }));
            for sub in &i.subresources {
                let (kind, verbs) = match sub.as_str() {
                    "binding" => ("Binding", json!(["create"])),
                    "eviction" => ("Eviction", json!(["create"])),
                    "token" => ("TokenRequest", json!(["create"])),
                    "log" => ("Pod", json!(["get"])),
                    "exec" => ("PodExecOptions", json!(["create", "get"])),
                    "scale" => ("Scale", json!(["get", "patch", "update"])),
                    "finalize" => (i.kind.as_str(), json!(["update"])),
                    _ => (i.kind.as_str(), json!(["get", "patch", "update"])),
                };
                let mut entry = json!({
                    "name": format!("{}/{sub}", i.resource),
                    "singularName": "",
                    "namespaced": i.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                });
                if sub == "scale" {
                    entry["group"] = "autoscaling".into();
                    entry["version"] = "v1".into();
                }
                if sub == "eviction" {
                    entry["group"] = "policy".into();
                    entry["version"] = "v1".into();
                }
                if sub == "token" {
                    entry["group"] = "authentication.k8s.io".into();
                    entry["version"] = "v1".into();
                }
                resources.push(entry);
            }
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        )
    }
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_becomes_resource() {
        let crd = serde_json::to_value(
            crate::api::crds::all()
                .into_iter()
                .find(|c| c.spec.names.kind == "NodeMetric")
                .unwrap(),
        )
        .unwrap();
        let info = from_crd(&crd).unwrap();
        assert_eq!(info.group, "slo.koordinator.sh");
        assert_eq!(info.resource, "nodemetrics");
        assert!(!info.namespaced && info.has_status() && !info.builtin);
        let r = Registry::with_builtins();
        r.apply_crd(&crd).unwrap();
        let list = r.resource_list("slo.koordinator.sh", "v1alpha1").unwrap();
        assert_eq!(list["resources"][0]["name"], "nodemetrics");
        assert_eq!(list["resources"][1]["name"], "nodemetrics/status");
        let groups: Vec<String> = r.group_list()["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect();
        let at = |name: &str| groups.iter().position(|g| g == name).unwrap();
        // kube-apiserver's order: built-in groups, CRD groups (priority 1000), then the
        // aggregated metrics.k8s.io (100).
        assert!(at("apps") < at("slo.koordinator.sh"), "{groups:?}");
        assert!(
            at("slo.koordinator.sh") < at("metrics.k8s.io"),
            "{groups:?}"
        );
    }

    #[test]
    fn core_discovery_has_short_names() {
        let r = Registry::with_builtins();
        let list = r.resource_list("", "v1").unwrap();
        let pods = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["namespaced"], true);
        let nodes = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "nodes")
            .unwrap();
        assert_eq!(nodes["namespaced"], false);
        assert!(r.resource_list("nope", "v1").is_none());
    }

    #[test]
    fn bad_crds_are_named() {
        let bad = json!({"metadata": {"name": "x"}, "spec": {"group": "g", "names": {"plural": "ps", "kind": "P"}, "scope": "Cluster", "versions": []}});
        assert!(matches!(from_crd(&bad), Err(CrdError::Name { .. })));
        let shadow = json!({"metadata": {"name": "pods."}, "spec": {"group": "", "names": {"plural": "pods", "kind": "Pod"}, "scope": "Namespaced", "versions": [{"name": "v1", "served": true, "storage": true}]}});
        assert!(Registry::with_builtins().apply_crd(&shadow).is_err());
    }
}
