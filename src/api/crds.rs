//! Every CRD koord serves, generated from the Rust types (`koord crds`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;

use super::schema::props_for;
use super::{config, quota, scheduling, slo, topology};

/// All CRDs, sorted by name.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        slo::NodeSLO::crd(),
        slo::NodeMetric::crd(),
        config::ClusterColocationProfile::crd(),
        scheduling::Reservation::crd(),
        scheduling::PodMigrationJob::crd(),
        device_crd(),
        quota::ElasticQuota::crd(),
        quota::PodGroup::crd(),
        quota::ElasticQuotaProfile::crd(),
        topology::NodeResourceTopology::crd(),
    ];
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for crd in &mut crds {
        spec_optional(crd);
    }
    crds
}

/// kube-derive requires `spec` at the root; Koordinator's CRDs do not (a NodeMetric or
/// NodeSLO may be created without one, and a real cluster would refuse such a create).
fn spec_optional(crd: &mut CustomResourceDefinition) {
    for v in &mut crd.spec.versions {
        let root = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(root) = root
            && let Some(req) = root.required.as_mut()
        {
            req.retain(|r| r != "spec");
            if req.is_empty() {
                root.required = None;
            }
        }
    }
}

fn device_crd() -> CustomResourceDefinition {
    let object = |props: Vec<(&str, JSONSchemaProps)>| JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(props.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ..Default::default()
    };
    let string = || JSONSchemaProps {
        type_: Some("string".into()),
        ..Default::default()
    };
    let mut status = props_for::<scheduling::DeviceStatus>();
    status.nullable = Some(true);
    let root = object(vec![
        ("apiVersion", string()),
        ("kind", string()),
        (
            "metadata",
            JSONSchemaProps {
                type_: Some("object".into()),
                ..Default::default()
            },
        ),
        ("spec", props_for::<scheduling::DeviceSpec>()),
        ("status", status),
    ]);
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some("devices.scheduling.koordinator.sh".into()),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: "scheduling.koordinator.sh".into(),
            names: CustomResourceDefinitionNames {
                kind: "Device".into(),
                plural: "devices".into(),
                singular: Some("device".into()),
                ..Default::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1alpha1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(root),
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// A CRD as a YAML document (with apiVersion and kind).
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let mut value = serde_json::to_value(crd).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("apiVersion".into(), "apiextensions.k8s.io/v1".into());
        obj.insert("kind".into(), "CustomResourceDefinition".into());
    }
    serde_yaml::to_string(&value).unwrap_or_default()
}

/// kubebuilder's file name for a CRD: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Every CRD as one multi-document YAML stream.
pub fn render_all() -> String {
    all()
        .iter()
        .map(|c| format!("---\n{}", to_yaml(c)))
        .collect::<Vec<_>>()
        .join("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scopes_match_koordinator() {
        let crds = all();
        let summary: Vec<(String, String, bool)> = crds
            .iter()
            .map(|c| {
                let status = c.spec.versions[0]
                    .subresources
                    .as_ref()
                    .is_some_and(|s| s.status.is_some());
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    c.spec.scope.clone(),
                    status,
                )
            })
            .collect();
        let expect = [
            (
                "clustercolocationprofiles.config.koordinator.sh",
                "Cluster",
                true,
            ),
            ("devices.scheduling.koordinator.sh", "Cluster", false),
            (
                "elasticquotaprofiles.quota.koordinator.sh",
                "Namespaced",
                false,
            ),
            ("elasticquotas.scheduling.sigs.k8s.io", "Namespaced", true),
            ("nodemetrics.slo.koordinator.sh", "Cluster", true),
            (
                "noderesourcetopologies.topology.node.k8s.io",
                "Cluster",
                false,
            ),
            ("nodeslos.slo.koordinator.sh", "Cluster", true),
            ("podgroups.scheduling.sigs.k8s.io", "Namespaced", true),
            (
                "podmigrationjobs.scheduling.koordinator.sh",
                "Cluster",
                true,
            ),
            ("reservations.scheduling.koordinator.sh", "Cluster", true),
        ];
        let expect: Vec<(String, String, bool)> = expect
            .iter()
            .map(|(n, s, st)| (n.to_string(), s.to_string(), *st))
            .collect();
        assert_eq!(summary, expect);
    }
}
