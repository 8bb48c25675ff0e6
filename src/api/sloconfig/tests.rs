use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::*;

fn data(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn node(labels: serde_json::Value, annotations: serde_json::Value) -> Node {
    serde_json::from_value(
        json!({"metadata": {"name": "n", "labels": labels, "annotations": annotations}}),
    )
    .unwrap()
}

#[test]
fn overlay_replaces_scalars_merges_objects_replaces_arrays() {
    let base = json!({"a": 1, "o": {"x": 1, "y": 2}, "arr": [1, 2, 3]});
    let over = json!({"a": 2, "o": {"y": 3, "z": 4}, "arr": [9]});
    let merged = overlay(&base, &over);
    assert_eq!(
        merged,
        json!({"a": 2, "o": {"x": 1, "y": 3, "z": 4}, "arr": [9]})
    );
}

#[test]
fn missing_configmap_means_defaults_and_colocation_off() {
    let (cfg, errors) = SloConfig::parse(None, &SloConfig::default());
    assert!(errors.is_empty());
    assert!(cfg.missing);
    assert!(!cfg.colocation.cluster.enabled());
    assert_eq!(
        cfg.colocation.cluster.cpu_reclaim_threshold_percent,
        Some(60)
    );
    assert_eq!(
        cfg.colocation.cluster.memory_reclaim_threshold_percent,
        Some(65)
    );
    assert_eq!(cfg.colocation.cluster.resource_diff_threshold, Some(0.1));
}

#[test]
fn user_values_overlay_defaults() {
    let d = data(&[(
        KEY_COLOCATION,
        json!({"enable": true, "cpuReclaimThresholdPercent": 80}),
    )]);
    let (cfg, errors) = SloConfig::parse(Some(&d), &SloConfig::default());
    assert!(errors.is_empty(), "{errors:?}");
    let c = &cfg.colocation.cluster;
    assert!(c.enabled());
    assert_eq!(c.cpu_reclaim_threshold_percent, Some(80));
    assert_eq!(c.memory_reclaim_threshold_percent, Some(65));
    assert_eq!(c.degrade_time_minutes, Some(15));
}

#[test]
fn broken_or_invalid_key_keeps_the_previous_value() {
    let good = data(&[(
        KEY_COLOCATION,
        json!({"enable": true, "cpuReclaimThresholdPercent": 70}),
    )]);
    let (prev, _) = SloConfig::parse(Some(&good), &SloConfig::default());
    let mut broken = good.clone();
    broken.insert(KEY_COLOCATION.into(), "{not json".into());
    let (cfg, errors) = SloConfig::parse(Some(&broken), &prev);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].reason, REASON_COLOCATION_FAILED);
    assert_eq!(cfg.colocation, prev.colocation);

    let invalid = data(&[(KEY_COLOCATION, json!({"degradeTimeMinutes": 0}))]);
    let (cfg, errors) = SloConfig::parse(Some(&invalid), &prev);
    assert!(
        errors[0].message.contains("degradeTimeMinutes"),
        "{errors:?}"
    );
    assert_eq!(cfg.colocation, prev.colocation);

    let bad_threshold = data(&[(KEY_THRESHOLD, "[1,2".into())]);
    let (_, errors) = SloConfig::parse(Some(&bad_threshold), &prev);
    assert_eq!(errors[0].key, KEY_THRESHOLD);
    assert_eq!(errors[0].reason, REASON_SLO_FAILED);
}

#[test]
fn node_strategy_layers_config_annotation_and_labels() {
    let d = data(&[(
        KEY_COLOCATION,
        json!({"enable": true, "cpuReclaimThresholdPercent": 60, "nodeConfigs": [
            {"name": "big", "nodeSelector": {"matchLabels": {"pool": "big"}}, "cpuReclaimThresholdPercent": 70, "memoryReclaimThresholdPercent": 50},
            {"name": "bad", "nodeSelector": {"matchLabels": {"pool": "bad"}}, "degradeTimeMinutes": -1},
            {"name": "nil-selector", "cpuReclaimThresholdPercent": 10}
        ]}),
    )]);
    let (cfg, _) = SloConfig::parse(Some(&d), &SloConfig::default());
    let plain = node(json!({}), json!({}));
    assert_eq!(
        cfg.colocation
            .for_node(&plain)
            .cpu_reclaim_threshold_percent,
        Some(60)
    );
    let big = node(json!({"pool": "big"}), json!({}));
    assert_eq!(
        cfg.colocation.for_node(&big).cpu_reclaim_threshold_percent,
        Some(70)
    );
    // An invalid node result falls back to the cluster strategy.
    let bad = node(json!({"pool": "bad"}), json!({}));
    assert_eq!(cfg.colocation.for_node(&bad).degrade_time_minutes, Some(15));
    let annotated = node(
        json!({"pool": "big", "node.koordinator.sh/memory-reclaim-ratio": "0.555"}),
        json!({"node.koordinator.sh/colocation-strategy": "{\"cpuReclaimThresholdPercent\": 90}"}),
    );
    let s = cfg.colocation.for_node(&annotated);
    assert_eq!(s.cpu_reclaim_threshold_percent, Some(90));
    assert_eq!(s.memory_reclaim_threshold_percent, Some(55));
}

#[test]
fn cluster_disable_wins_over_node_enable() {
    let d = data(&[(
        KEY_COLOCATION,
        json!({"enable": false, "nodeConfigs": [{"nodeSelector": {}, "enable": true}]}),
    )]);
    let (cfg, _) = SloConfig::parse(Some(&d), &SloConfig::default());
    assert!(!cfg.colocation.node_enabled(&node(json!({}), json!({}))));
}

#[test]
fn slo_strategies_merge_defaults_and_pick_first_matching_node() {
    let d = data(&[(
        KEY_THRESHOLD,
        json!({"clusterStrategy": {"enable": true}, "nodeStrategies": [
            {"name": "a", "nodeSelector": {"matchLabels": {"x": "1"}}, "cpuSuppressThresholdPercent": 50},
            {"name": "b", "nodeSelector": {"matchLabels": {"x": "1"}}, "cpuSuppressThresholdPercent": 40}
        ]}),
    )]);
    let (cfg, _) = SloConfig::parse(Some(&d), &SloConfig::default());
    let s = cfg
        .threshold
        .for_node(&node(json!({"x": "1"}), json!({})))
        .unwrap();
    assert_eq!(s.enable, Some(true));
    assert_eq!(s.cpu_suppress_threshold_percent, Some(50));
    assert_eq!(s.memory_evict_threshold_percent, Some(70));
    let c = cfg.threshold.for_node(&node(json!({}), json!({}))).unwrap();
    assert_eq!(c.cpu_suppress_threshold_percent, Some(65));
    assert_eq!(
        cfg.qos.for_node(&node(json!({}), json!({}))),
        Some(Default::default())
    );
}

#[test]
fn out_of_range_strategy_values_never_reach_the_config() {
    let good = data(&[(
        KEY_THRESHOLD,
        json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 65}}),
    )]);
    let (prev, errors) = SloConfig::parse(Some(&good), &SloConfig::default());
    assert!(errors.is_empty(), "{errors:?}");
    for bad in [-65, 1000] {
        let d = data(&[(
            KEY_THRESHOLD,
            json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": bad}}),
        )]);
        let (cfg, errors) = SloConfig::parse(Some(&d), &prev);
        assert_eq!(errors.len(), 1, "{bad}");
        assert!(
            errors[0].message.contains("cpuSuppressThresholdPercent"),
            "{errors:?}"
        );
        assert_eq!(cfg.threshold, prev.threshold, "the last good value stays");
    }
}
