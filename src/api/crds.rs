//! Every CRD koord serves, generated from the Rust types (`koord crds`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;

use super::schema::crd_schema;
use super::{analysis, config, quota, scheduling, slo, topology};

/// All CRDs, sorted by name.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        derived::<slo::NodeSLO>(),
        derived::<slo::NodeMetric>(),
        derived::<config::ClusterColocationProfile>(),
        derived::<scheduling::Reservation>(),
        derived::<scheduling::PodMigrationJob>(),
        derived::<scheduling::explanation::ScheduleExplanation>(),
        derived::<scheduling::network_topology::ClusterNetworkTopology>(),
        derived::<analysis::Recommendation>(),
        device_crd(),
        derived::<quota::ElasticQuota>(),
        derived::<quota::PodGroup>(),
        derived::<quota::ElasticQuotaProfile>(),
        node_resource_topology(),
    ];
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for crd in &mut crds {
        spec_optional(crd);
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
        if WITHOUT_STATUS_SUBRESOURCE.contains(&crd.spec.names.plural.as_str()) {
            for v in &mut crd.spec.versions {
                v.subresources = None;
            }
        }
    }
    crds
}

/// Kinds Koordinator's chart serves with a `status` but no status subresource (kube-derive
/// adds one with every status): their status is written with the object.
const WITHOUT_STATUS_SUBRESOURCE: &[&str] = &["elasticquotaprofiles", "elasticquotas", "podgroups"];

/// kube-derive's CRD of `K` with the schema as controller-gen writes Koordinator's.
fn derived<K: CustomResourceExt + schemars::JsonSchema>() -> CustomResourceDefinition {
    let mut crd = K::crd();
    for v in &mut crd.spec.versions {
        v.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(crd_schema::<K>()),
        });
    }
    crd
}

/// NodeResourceTopology as the chart installs it: `v1alpha1` served and `v1alpha2` stored
/// (the same fields plus root `attributes`; no conversion, as between the two upstream).
/// koord reads and writes `v1alpha1`, so a cluster that stored `v1alpha2` keeps working.
fn node_resource_topology() -> CustomResourceDefinition {
    let mut crd = derived::<topology::NodeResourceTopology>();
    let mut v2 = crd.spec.versions[0].clone();
    v2.name = "v1alpha2".into();
    v2.storage = true;
    if let Some(root) = schema_root(&mut v2) {
        root.required = Some(vec!["zones".into()]);
    }
    let v1 = &mut crd.spec.versions[0];
    v1.storage = false;
    if let Some(root) = schema_root(v1) {
        root.required = Some(vec!["topologyPolicies".into(), "zones".into()]);
        if let Some(p) = root.properties.as_mut() {
            p.remove("attributes");
        }
    }
    crd.spec.versions.push(v2);
    crd
}

fn schema_root(
    v: &mut CustomResourceDefinitionVersion,
) -> Option<&mut k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps>
{
    v.schema.as_mut()?.open_api_v3_schema.as_mut()
}

/// The shape of a Device object, for its schema only.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct DeviceObject {
    spec: Option<scheduling::DeviceSpec>,
    status: Option<scheduling::DeviceStatus>,
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
    let root = crd_schema::<DeviceObject>();
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
