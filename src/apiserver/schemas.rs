//! OpenAPI v3 schemas of the built-in kinds, from k8s-openapi's (generated from Kubernetes'
//! own OpenAPI document, descriptions included), as components named the way kube-apiserver
//! names them (`io.k8s.api.core.v1.Pod`), so `kubectl explain pod.spec.containers` works.
//! Built once, on the first OpenAPI request that needs them.

use std::collections::HashMap;
use std::sync::OnceLock;

use k8s_openapi::Resource;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

pub struct Builtins {
    /// Every schema the kinds reference, by component name.
    pub components: Map<String, Value>,
    /// (group, version, kind) → component name.
    pub kinds: HashMap<(String, String, String), String>,
}

fn add<T: JsonSchema + Resource>(
    g: &mut SchemaGenerator,
    kinds: &mut HashMap<(String, String, String), String>,
) {
    g.subschema_for::<T>();
    kinds.insert(
        (T::GROUP.into(), T::VERSION.into(), T::KIND.into()),
        T::schema_name().into_owned(),
    );
}

macro_rules! kinds {
    ($g:expr, $k:expr, $($t:path),* $(,)?) => { $( add::<$t>($g, $k); )* };
}

pub fn builtins() -> &'static Builtins {
    static ONCE: OnceLock<Builtins> = OnceLock::new();
    ONCE.get_or_init(|| {
        use k8s_openapi::api::{
            admissionregistration::v1 as adm, apps::v1 as apps, authorization::v1 as authz,
            batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
            discovery::v1 as discovery, events::v1 as events, policy::v1 as policy,
            rbac::v1 as rbac, scheduling::v1 as sched, storage::v1 as storage,
        };
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
        let mut g = SchemaSettings::openapi3().into_generator();
        let mut kinds = HashMap::new();
        kinds!(
            &mut g,
            &mut kinds,
            core::Namespace,
            core::Node,
            core::Pod,
            core::ConfigMap,
            core::Secret,
            core::Event,
            core::Service,
            core::ServiceAccount,
            core::Endpoints,
            discovery::EndpointSlice,
            core::PersistentVolumeClaim,
            core::PersistentVolume,
            core::ReplicationController,
            apps::Deployment,
            apps::ReplicaSet,
            apps::StatefulSet,
            apps::DaemonSet,
            batch::Job,
            coord::Lease,
            events::Event,
            sched::PriorityClass,
            policy::PodDisruptionBudget,
            storage::StorageClass,
            ext::CustomResourceDefinition,
            adm::MutatingWebhookConfiguration,
            adm::ValidatingWebhookConfiguration,
            authz::SelfSubjectAccessReview,
            authz::SelfSubjectRulesReview,
            rbac::ClusterRole,
            rbac::ClusterRoleBinding,
            rbac::Role,
            rbac::RoleBinding,
        );
        let mut components = g.take_definitions(true);
        for ((group, version, kind), name) in &kinds {
            if let Some(Value::Object(s)) = components.get_mut(name) {
                s.insert(
                    "x-kubernetes-group-version-kind".into(),
                    serde_json::json!([{"group": group, "version": version, "kind": kind}]),
                );
            }
        }
        Builtins { components, kinds }
    })
}

/// The component name of a built-in kind.
pub fn component(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    builtins()
        .kinds
        .get(&(group.to_string(), version.to_string(), kind.to_string()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_reference_their_parts_by_kubernetes_names() {
        let b = builtins();
        let name = component("", "v1", "Pod").unwrap();
        assert_eq!(name, "io.k8s.api.core.v1.Pod");
        let pod = &b.components[name];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        // As kube-apiserver writes it: the reference inside allOf, the description beside.
        let spec_ref = pod["properties"]["spec"]["allOf"][0]["$ref"]
            .as_str()
            .unwrap();
        assert_eq!(spec_ref, "#/components/schemas/io.k8s.api.core.v1.PodSpec");
        let spec = &b.components["io.k8s.api.core.v1.PodSpec"];
        assert!(spec["properties"]["containers"]["description"].is_string());
        assert!(component("apps", "v1", "Deployment").is_some());
    }
}
