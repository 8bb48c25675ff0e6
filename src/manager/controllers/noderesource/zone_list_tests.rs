//! Koordinator's `UpdateNRTZoneListIfNeeded` rules (`noderesource/plugins/util/util.go`, the
//! NUMA-level cases of `batchresource/plugin_test.go`'s `TestPreUpdate`).

use serde_json::json;

use super::*;
use crate::manager::controllers::noderesource::calc::{BatchTerms, Res};

fn zone(name: &str, extra: serde_json::Value) -> Zone {
    let r = |n: &str, q: &str| json!({"name": n, "capacity": q, "allocatable": q, "available": q});
    let mut resources = vec![r("cpu", "50"), r("memory", "62G")];
    if let Some(list) = extra.as_array() {
        resources.extend(list.iter().cloned());
    }
    serde_json::from_value(json!({"name": name, "type": "Node", "resources": resources})).unwrap()
}

fn batch(zone: &str, cpu: i64, memory: i64) -> ZoneBatch {
    ZoneBatch {
        zone: zone.to_string(),
        terms: BatchTerms {
            result: Res { cpu, memory },
            ..Default::default()
        },
    }
}

fn get<'a>(z: &'a Zone, name: &str) -> Option<&'a ResourceInfo> {
    z.resources.iter().flatten().find(|r| r.name == name)
}

#[test]
fn add_numa_level_batch_resources() {
    let zones = [zone("node-0", json!([])), zone("node-1", json!([]))];
    let b = [
        batch("node-0", 10_000, 15_300_000_000),
        batch("node-1", 15_000, 17_700_000_000),
    ];
    let got = updated(&zones, &b, -1.0, 0.1).expect("added");
    let cpu = get(&got[0], "kubernetes.io/batch-cpu").unwrap();
    assert_eq!(cpu.allocatable.0, "10000");
    assert_eq!(cpu.capacity, cpu.available);
    assert_eq!(
        get(&got[1], "kubernetes.io/batch-memory")
            .unwrap()
            .allocatable
            .0,
        "17700000000"
    );
    let names: Vec<&str> = got[0]
        .resources
        .iter()
        .flatten()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "cpu",
            "kubernetes.io/batch-cpu",
            "kubernetes.io/batch-memory",
            "memory"
        ]
    );
}

#[test]
fn update_numa_level_batch_resources_beyond_the_threshold_only() {
    let had = json!([
        {"name": "kubernetes.io/batch-cpu", "capacity": "10000", "allocatable": "10000", "available": "10000"},
        {"name": "kubernetes.io/batch-memory", "capacity": "15G", "allocatable": "15G", "available": "15G"}]);
    let zones = [zone("node-0", had)];
    // 5 % off: under the 10 % threshold, nothing to write.
    assert_eq!(
        updated(
            &zones,
            &[batch("node-0", 10_500, 15_000_000_000)],
            -1.0,
            0.1
        ),
        None
    );
    let got = updated(
        &zones,
        &[batch("node-0", 20_000, 15_000_000_000)],
        -1.0,
        0.1,
    )
    .unwrap();
    assert_eq!(
        get(&got[0], "kubernetes.io/batch-cpu")
            .unwrap()
            .allocatable
            .0,
        "20000"
    );
    assert_eq!(
        get(&got[0], "kubernetes.io/batch-memory")
            .unwrap()
            .allocatable
            .0,
        "15G"
    );
}

#[test]
fn update_numa_level_batch_resources_with_cpu_normalization_ratio() {
    let zones = [zone("node-0", json!([]))];
    let got = updated(&zones, &[batch("node-0", 10_000, 1)], 1.2, 0.1).unwrap();
    assert_eq!(
        get(&got[0], "kubernetes.io/batch-cpu")
            .unwrap()
            .allocatable
            .0,
        "12000"
    );
}

#[test]
fn a_zone_without_a_result_is_reset_to_zero() {
    let had = json!([
        {"name": "kubernetes.io/batch-cpu", "capacity": "10000", "allocatable": "10000", "available": "10000"}]);
    let zones = [zone("node-0", had)];
    let got = updated(&zones, &[], -1.0, 0.1).unwrap();
    let cpu = get(&got[0], "kubernetes.io/batch-cpu").unwrap();
    assert_eq!(
        (cpu.capacity.0.as_str(), cpu.available.0.as_str()),
        ("0", "0")
    );
    assert_eq!(
        get(&got[0], "cpu").unwrap().allocatable.0,
        "50",
        "other resources kept"
    );
    assert_eq!(updated(&got, &[], -1.0, 0.1), None, "already reset");
}
