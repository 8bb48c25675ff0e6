//! Koordinator's YAML applies unchanged: every kind round-trips through the Rust types
//! (deserialize → serialize → deserialize equal), loses no field the fixture sets, and
//! keeps unknown fields where Koordinator's API preserves them.

use koord::api::{config, quota, scheduling, slo, topology};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn docs() -> Vec<serde_json::Value> {
    let text = include_str!("../fixtures/koordinator-objects.yaml");
    serde_yaml::Deserializer::from_str(text)
        .map(|d| {
            let y: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            serde_json::to_value(y).unwrap()
        })
        .collect()
}

fn doc(kind: &str) -> serde_json::Value {
    docs()
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} fixture"))
}

/// Every leaf of `expected` must appear with an equal value in `actual` (quantities and
/// numbers compared as written).
fn assert_contains(path: &str, expected: &serde_json::Value, actual: &serde_json::Value) {
    match (expected, actual) {
        (serde_json::Value::Object(e), serde_json::Value::Object(a)) => {
            for (k, v) in e {
                let sub = a
                    .get(k)
                    .unwrap_or_else(|| panic!("field {path}.{k} lost in round trip"));
                assert_contains(&format!("{path}.{k}"), v, sub);
            }
        }
        (serde_json::Value::Array(e), serde_json::Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "array length at {path}");
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                assert_contains(&format!("{path}[{i}]"), x, y);
            }
        }
        (e, a) => assert_eq!(e, a, "value at {path}"),
    }
}

fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(kind: &str) -> T {
    let original = doc(kind);
    let typed: T =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let written = serde_json::to_value(&typed).unwrap();
    let again: T = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(typed, again, "{kind} changed in a round trip");
    assert_contains(kind, &original, &written);
    typed
}

#[test]
fn nodeslo() {
    let slo: slo::NodeSLO = round_trip("NodeSLO");
    let t = slo.spec.resource_used_threshold_with_be.unwrap();
    assert_eq!(t.cpu_suppress_threshold_percent, Some(65));
    assert_eq!(t.cpu_evict_be_satisfaction_lower_percent, Some(40));
    let ext = slo.spec.extensions.unwrap();
    assert_eq!(
        ext["vendor.example.com/feature"]["nested"]["a"][1], 2,
        "extensions keep unknown fields"
    );
}

#[test]
fn nodemetric() {
    let nm: slo::NodeMetric = round_trip("NodeMetric");
    let status = nm.status.unwrap();
    assert_eq!(
        status.node_metric.unwrap().node_usage.get("cpu").unwrap().0,
        "7800m"
    );
    assert_eq!(
        status.pods_metric.unwrap()[0].priority.as_deref(),
        Some("koord-prod")
    );
}

#[test]
fn cluster_colocation_profile_keeps_patch() {
    let p: config::ClusterColocationProfile = round_trip("ClusterColocationProfile");
    let patch = p.spec.patch.unwrap();
    assert_eq!(
        patch["spec"]["futureField"]["anything"][1], "two",
        "patch keeps unknown fields"
    );
}

#[test]
fn reservation() {
    let r: scheduling::Reservation = round_trip("Reservation");
    assert_eq!(r.spec.owners.len(), 2);
    assert_eq!(r.status.unwrap().phase.as_deref(), Some("Available"));
}

#[test]
fn pod_migration_job() {
    let j: scheduling::PodMigrationJob = round_trip("PodMigrationJob");
    assert_eq!(j.spec.mode.as_deref(), Some("ReservationFirst"));
}

#[test]
fn device() {
    let d: scheduling::Device = round_trip("Device");
    let dev = &d.spec.devices.unwrap()[0];
    assert_eq!(
        dev.uuid.as_deref(),
        Some("GPU-0d8ba2a7-5a8a-4e7c-b7ba-000000000000")
    );
    assert_eq!(dev.topology.as_ref().unwrap().pcie_id, "pci0000:3a");
}

#[test]
fn elastic_quota_pod_group_profile() {
    let q: quota::ElasticQuota = round_trip("ElasticQuota");
    assert_eq!(q.spec.max.unwrap()["cpu"].0, "40");
    let g: quota::PodGroup = round_trip("PodGroup");
    assert_eq!(g.spec.min_member, Some(2));
    let p: quota::ElasticQuotaProfile = round_trip("ElasticQuotaProfile");
    assert_eq!(p.spec.quota_name, "quota-example");
}

#[test]
fn node_resource_topology_has_no_spec() {
    let t: topology::NodeResourceTopology = round_trip("NodeResourceTopology");
    assert_eq!(t.spec.zones[0].name, "node-0");
    let written = serde_json::to_value(&t).unwrap();
    assert!(
        written.get("spec").is_none() && written.get("zones").is_some(),
        "{written}"
    );
}

#[test]
fn api_resources_match_koordinator() {
    use kube::Resource;
    assert_eq!(
        slo::NodeSLO::api_version(&()),
        "slo.koordinator.sh/v1alpha1"
    );
    assert_eq!(slo::NodeMetric::plural(&()), "nodemetrics");
    assert_eq!(
        config::ClusterColocationProfile::plural(&()),
        "clustercolocationprofiles"
    );
    assert_eq!(scheduling::Device::plural(&()), "devices");
    assert_eq!(
        quota::ElasticQuota::api_version(&()),
        "scheduling.sigs.k8s.io/v1alpha1"
    );
    assert_eq!(
        topology::NodeResourceTopology::plural(&()),
        "noderesourcetopologies"
    );
}
