//! What a profile's root quota looks like: selected nodes, ratio, resource keys, the
//! unschedulable part, tree id.

use std::sync::Arc;

use serde_json::json;

use super::*;

fn node(name: &str, pool: &str, cpu: &str, ready: bool, cordoned: bool) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": pool}},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "nvidia.com/gpu": "1"},
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
        .unwrap(),
    )
}

fn profile(extra: serde_json::Value) -> ElasticQuotaProfile {
    let mut v = json!({"apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
        "metadata": {"name": "gpu-pool", "namespace": "team"},
        "spec": {"quotaName": "gpu-root", "quotaLabels": {"team": "ml"},
            "nodeSelector": {"matchLabels": {"pool": "gpu"}}}});
    if let Some(m) = extra.as_object() {
        for (k, x) in m {
            v["spec"][k] = x.clone();
        }
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn min_is_what_the_selected_nodes_give() {
    let nodes = [
        node("a", "gpu", "8", true, false),
        node("b", "gpu", "8", false, false),
        node("c", "cpu", "64", true, false),
    ];
    let d = desired(&profile(json!({})), &nodes).unwrap();
    assert_eq!(
        (d.namespace.as_str(), d.name.as_str()),
        ("team", "gpu-root")
    );
    assert_eq!(d.min["cpu"], 16_000);
    assert_eq!(d.min["memory"], 16 << 30);
    assert!(
        !d.min.contains_key("nvidia.com/gpu"),
        "default keys: cpu, memory"
    );
    assert_eq!(
        d.max["cpu"],
        i64::MAX / 2000 * 1000,
        "4611686018427387 cores"
    );
    assert_eq!(d.max["memory"], i64::MAX / 2000);
    assert_eq!(d.labels["quota.scheduling.koordinator.sh/is-root"], "true");
    assert_eq!(
        d.labels["quota.scheduling.koordinator.sh/profile"],
        "gpu-pool"
    );
    assert_eq!(d.labels["team"], "ml");
    assert_eq!(
        d.labels["quota.scheduling.koordinator.sh/tree-id"],
        tree_id("team", "gpu-pool")
    );
    let unsched: serde_json::Value = serde_json::from_str(
        &d.annotations["quota.scheduling.koordinator.sh/unschedulable-resource"],
    )
    .unwrap();
    assert_eq!(unsched["cpu"], "8", "b is not Ready");
    let total: serde_json::Value =
        serde_json::from_str(&d.annotations["quota.scheduling.koordinator.sh/total-resource"])
            .unwrap();
    assert_eq!(total["nvidia.com/gpu"], "2");
}

#[test]
fn ratio_keys_and_errors() {
    let nodes = [node("a", "gpu", "10", true, true)];
    let mut p = profile(json!({"resourceRatio": "0.5"}));
    p.metadata.annotations = Some(BTreeMap::from([(
        "quota.scheduling.koordinator.sh/resource-keys".to_string(),
        "[\"cpu\",\"nvidia.com/gpu\"]".to_string(),
    )]));
    let d = desired(&p, &nodes).unwrap();
    assert_eq!(
        d.min,
        Amounts::from([("cpu".into(), 5000), ("nvidia.com/gpu".into(), 0)])
    );
    // Out of (0, 1]: the whole.
    let d = desired(&profile(json!({"resourceRatio": "7"})), &nodes).unwrap();
    assert_eq!(d.min["cpu"], 10_000);
    let e = desired(&profile(json!({"quotaName": ""})), &nodes).unwrap_err();
    assert!(e.contains("spec.quotaName"), "{e}");
    // Koordinator's FNV-64a of "team/gpu-pool" is a decimal string.
    assert!(tree_id("team", "gpu-pool").parse::<u64>().is_ok());
    assert_ne!(tree_id("a", "b"), tree_id("a", "c"));
}
