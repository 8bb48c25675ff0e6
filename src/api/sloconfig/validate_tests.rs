use std::sync::Arc;

use serde_json::json;

use super::*;

fn data(key: &str, v: serde_json::Value) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_string(), v.to_string())])
}

fn node(name: &str, labels: serde_json::Value) -> Arc<Node> {
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap())
}

#[test]
fn ranges_and_relations() {
    // (key, value, error containing)
    let cases = vec![
        (
            KEY_COLOCATION,
            json!({"enable": true, "resourceDiffThreshold": 0.1}),
            None,
        ),
        (
            KEY_COLOCATION,
            json!({"resourceDiffThreshold": 1.5}),
            Some("resourceDiffThreshold"),
        ),
        (
            KEY_COLOCATION,
            json!({"resourceDiffThreshold": 0}),
            Some("resourceDiffThreshold"),
        ),
        (
            KEY_COLOCATION,
            json!({"midCPUThresholdPercent": 101}),
            Some("midCPUThresholdPercent"),
        ),
        (
            KEY_COLOCATION,
            json!({"degradeTimeMinutes": 0}),
            Some("degradeTimeMinutes"),
        ),
        (
            KEY_THRESHOLD,
            json!({"clusterStrategy": {"memoryEvictThresholdPercent": 60, "memoryEvictLowerPercent": 70}}),
            Some("greater than memoryEvictLowerPercent"),
        ),
        (
            KEY_THRESHOLD,
            json!({"clusterStrategy": {"cpuSuppressThresholdPercent": 65}}),
            None,
        ),
        (
            KEY_THRESHOLD,
            json!({"clusterStrategy": {"cpuSuppressThresholdPercent": 165}}),
            Some("cpuSuppressThresholdPercent"),
        ),
        (
            KEY_QOS,
            json!({"clusterStrategy": {"beClass": {"memoryQOS": {"wmarkMinAdj": 60}}}}),
            Some("wmarkMinAdj"),
        ),
        (
            KEY_QOS,
            json!({"clusterStrategy": {"lsClass": {"memoryQOS": {"wmarkMinAdj": -25}}}}),
            None,
        ),
        (
            KEY_CPU_BURST,
            json!({"clusterStrategy": {"cpuBurstPercent": 0}}),
            Some("cpuBurstPercent"),
        ),
        (
            KEY_CPU_BURST,
            json!({"clusterStrategy": {"cfsQuotaBurstPercent": 99}}),
            Some("cfsQuotaBurstPercent"),
        ),
        (
            KEY_SYSTEM,
            json!({"clusterStrategy": {"watermarkScaleFactor": 401}}),
            Some("watermarkScaleFactor"),
        ),
        (
            KEY_SYSTEM,
            json!({"clusterStrategy": {"watermarkScaleFactor": 150}}),
            None,
        ),
        (
            KEY_THRESHOLD,
            json!({"clusterStrategy": {"cpuSuppressThresholdPercent": "high"}}),
            Some("resource-threshold-config"),
        ),
    ];
    for (key, v, want) in cases {
        let got = validate_configmap(&data(key, v.clone()), None, &[]);
        match want {
            None => assert!(got.is_ok(), "{key} {v}: {got:?}"),
            Some(w) => assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(w)),
                "{key} {v}: {got:?}"
            ),
        }
    }
    assert!(validate_configmap(&data(KEY_COLOCATION, json!({})), None, &[]).is_ok());
    let bad = BTreeMap::from([(KEY_COLOCATION.to_string(), "{not json".to_string())]);
    assert!(
        validate_configmap(&bad, None, &[])
            .unwrap_err()
            .to_string()
            .contains(KEY_COLOCATION)
    );
    assert!(
        validate_configmap(&bad, Some(&bad), &[]).is_ok(),
        "unchanged keys are not re-checked"
    );
}

#[test]
fn node_entries_rules() {
    let sel = |k: &str, v: &str| json!({"matchLabels": {k: v}});
    let cases = vec![
        (
            json!({"nodeConfigs": [{"name": "a", "nodeSelector": sel("pool", "a")}, {"name": "b", "nodeSelector": sel("pool", "b")}]}),
            None,
        ),
        (
            json!({"nodeConfigs": [{"name": "a"}]}),
            Some("must not be empty"),
        ),
        (
            json!({"nodeConfigs": [{"name": "a", "nodeSelector": sel("pool", "a")}, {"name": "a", "nodeSelector": sel("pool", "b")}]}),
            Some("duplicate name"),
        ),
        (
            json!({"nodeConfigs": [{"nodeSelector": sel("pool", "a")}, {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "c"]}]}}]}),
            Some("overlap"),
        ),
        (
            json!({"nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Bogus"}]}}]}),
            Some("nodeSelector"),
        ),
    ];
    for (v, want) in cases {
        let got = validate_configmap(&data(KEY_COLOCATION, v.clone()), None, &[]);
        match want {
            None => assert!(got.is_ok(), "{v}: {got:?}"),
            Some(w) => assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(w)),
                "{v}: {got:?}"
            ),
        }
    }
    // Two entries that only overlap on a real node's labels.
    let v = json!({"nodeConfigs": [{"name": "x", "nodeSelector": sel("pool", "a")}, {"name": "y", "nodeSelector": sel("zone", "z1")}]});
    let nodes = vec![
        node("n1", json!({"pool": "a"})),
        node("n2", json!({"pool": "a", "zone": "z1"})),
    ];
    let e = validate_configmap(&data(KEY_COLOCATION, v.clone()), None, &nodes)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node n2") && e.contains("\"x\""), "{e}");
    assert!(validate_configmap(&data(KEY_COLOCATION, v), None, &nodes[..1]).is_ok());
}

#[test]
fn parsed_config_entries_find_multiple_matches() {
    let raw = data(
        KEY_THRESHOLD,
        json!({"nodeStrategies": [
        {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}},
        {"name": "b", "nodeSelector": {"matchLabels": {"zone": "z"}}}]}),
    );
    let (cfg, errs) = SloConfig::parse(Some(&raw), &SloConfig::default());
    assert!(errs.is_empty());
    let entries = node_entries_of(&cfg);
    let both = BTreeMap::from([
        ("pool".to_string(), "a".to_string()),
        ("zone".to_string(), "z".to_string()),
    ]);
    assert!(multiple_matches(&entries, "n", &both).is_some_and(|e| e.contains(KEY_THRESHOLD)));
    let one = BTreeMap::from([("pool".to_string(), "a".to_string())]);
    assert!(multiple_matches(&entries, "n", &one).is_none());
}
