use serde_json::{Value, json};

use super::super::args::{Args, RawArgs};
use super::*;

fn args(v: serde_json::Value) -> Result<Args, String> {
    Args::new(serde_json::from_value::<RawArgs>(v).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
}

fn metric(age_s: i64, now_ms: i64, sys_cpu: &str, pods: serde_json::Value) -> MetricView {
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(now_ms - age_s * 1000)
        .unwrap()
        .to_string();
    let m: crate::api::slo::NodeMetric = serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {}, "status": {"updateTime": t,
        "nodeMetric": {"nodeUsage": {"resources": {}}, "systemUsage": {"resources": {"cpu": sys_cpu, "memory": "1Gi"}}},
        "podsMetric": pods}}))
    .unwrap();
    MetricView::from(&m)
}

#[test]
fn args_defaults_pools_and_validation() {
    let a = args(json!({"highThresholds": {"cpu": 70, "memory": 80}, "lowThresholds": {"cpu": 30, "memory": 30},
        "nodePools": [{"name": "gpu", "nodeSelector": {"matchLabels": {"gpu": "true"}}, "highThresholds": {"cpu": 60}}]}))
    .unwrap();
    assert_eq!(a.node_metric_expiration.as_secs(), 180);
    assert!(a.node_fit && !a.dry_run);
    assert_eq!(a.pools.len(), 2);
    let (top, gpu) = (&a.pools[0], &a.pools[1]);
    assert_eq!(top.name, super::super::args::DEFAULT_POOL);
    assert_eq!(
        (
            top.consecutive_abnormalities,
            top.consecutive_normalities,
            top.anomaly_timeout.as_secs()
        ),
        (5, 3, 60)
    );
    assert_eq!(gpu.high["cpu"], 60.0);
    assert_eq!(gpu.low["cpu"], 30.0, "pools inherit what they leave unset");
    assert_eq!(
        top.weights,
        [("cpu".to_string(), 1), ("memory".to_string(), 1)].into()
    );
    for (bad, want) in [
        (
            json!({"highThresholds": {"cpu": 30}, "lowThresholds": {"cpu": 50}}),
            "lowThresholds exceed highThresholds",
        ),
        (
            json!({"highThresholds": {"cpu": 130}}),
            "not within [0, 100]",
        ),
        (
            json!({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}),
            "only one of include and exclude",
        ),
        // Koordinator's quirk: both counters 0 → normalities stays 0 and is rejected.
        (
            json!({"anomalyCondition": {"consecutiveAbnormalities": 0, "consecutiveNormalities": 0}}),
            "consecutive counters",
        ),
        (json!({"highThreshold": {"cpu": 1}}), "unknown field"),
    ] {
        let err = args(bad.clone()).unwrap_err().to_string();
        assert!(err.contains(want), "{bad}: {err}");
    }
}

#[test]
fn usage_adds_pods_to_system_and_expired_metrics_are_skipped() {
    let now = 1_800_000_000_000;
    let pods = json!([{"namespace": "d", "name": "a", "podUsage": {"resources": {"cpu": "2", "memory": "1Gi"}}},
        {"namespace": "d", "name": "b", "podUsage": {"resources": {"cpu": "1"}}}]);
    // Prod by the pod's own class (a: no class, Burstable → LS → prod), not the NodeMetric's.
    let view = |name: &str, labels: Value| {
        Arc::new(PodView::json(
            json!({"metadata": {"name": name, "namespace": "d", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        ))
    };
    let bound = [
        view("a", json!({})),
        view("b", json!({"koordinator.sh/priority-class": "koord-batch"})),
        view("c", json!({})),
    ];
    let (u, prod) = usage_of(
        Some(&metric(10, now, "500m", pods.clone())),
        &bound,
        now,
        180_000,
    )
    .unwrap();
    assert_eq!(
        (u["cpu"], u["memory"], u["pods"]),
        (3500, 2 << 30, 3),
        "pods: those bound"
    );
    assert_eq!((prod["cpu"], prod["pods"]), (2000, 2));
    // Koordinator's isNodeMetricExpired: age ≥ expiration; 0 never expires.
    for (age, exp, expired) in [
        (600, 180_000, true),
        (180, 180_000, true),
        (179, 180_000, false),
        (600, 0, false),
    ] {
        let r = usage_of(
            Some(&metric(age, now, "500m", pods.clone())),
            &bound,
            now,
            exp,
        );
        assert_eq!(r.is_err(), expired, "age {age}s, expiration {exp}ms");
        if let Err(e) = r {
            assert!(e.to_string().contains("expired"), "{e}");
        }
    }
    assert_eq!(
        usage_of(None, &bound, now, 180_000)
            .unwrap_err()
            .to_string(),
        "no NodeMetric"
    );
}

fn load(name: &str, cpu_used: i64, prod_used: i64) -> NodeLoad {
    NodeLoad {
        name: name.into(),
        allocatable: [("cpu".to_string(), 10_000), ("memory".to_string(), 100)].into(),
        usage: [("cpu".to_string(), cpu_used), ("memory".to_string(), 10)].into(),
        prod_usage: [("cpu".to_string(), prod_used)].into(),
        low: Amounts::new(),
        high: Amounts::new(),
        prod_low: Amounts::new(),
        prod_high: Amounts::new(),
        schedulable: true,
        prod: false,
        high_pct: Default::default(),
        prod_high_pct: Default::default(),
    }
}

#[test]
fn classification_and_source_order() {
    let a = args(
        json!({"highThresholds": {"cpu": 70}, "lowThresholds": {"cpu": 30},
        "prodHighThresholds": {"cpu": 50}, "prodLowThresholds": {"cpu": 20}}),
    )
    .unwrap();
    let pool = &a.pools[0];
    let mut nodes = vec![
        load("hot", 8000, 1000),
        load("cold", 2000, 500),
        load("prod-hot", 6000, 5500),
        load("mid", 5000, 3000),
        load("idle", 1000, 3000),
    ];
    thresholds(pool, &mut nodes);
    assert_eq!(
        (
            nodes[0].high["cpu"],
            nodes[0].low["cpu"],
            nodes[0].high["memory"]
        ),
        (7000, 3000, 100)
    );
    let classes: Vec<Class> = nodes.iter().map(classify).collect();
    assert_eq!(
        classes,
        [
            Class::High,
            Class::BothLow,
            Class::ProdHigh,
            Class::Ignore,
            Class::Low
        ]
    );
    let mut unschedulable = load("cordoned", 2000, 500);
    unschedulable.schedulable = false;
    let mut one = vec![unschedulable];
    thresholds(pool, &mut one);
    assert_eq!(
        classify(&one[0]),
        Class::ProdLow,
        "a cordoned node is no low target"
    );
    assert!(source_score(&nodes[0], &pool.weights) > source_score(&nodes[2], &pool.weights));
}

#[test]
fn deviation_thresholds_centre_on_the_pool_average() {
    let a = args(json!({"useDeviationThresholds": true, "highThresholds": {"cpu": 10}, "lowThresholds": {"cpu": 10}})).unwrap();
    let mut nodes = vec![load("a", 2000, 0), load("b", 4000, 0), load("c", 6000, 0)];
    thresholds(&a.pools[0], &mut nodes);
    // Average 40 %: low 30 %, high 50 %; memory's 0 low deviation means full capacity.
    assert_eq!((nodes[0].low["cpu"], nodes[0].high["cpu"]), (3000, 5000));
    assert_eq!(nodes[0].low["memory"], 100);
    let classes: Vec<Class> = nodes.iter().map(classify).collect();
    assert_eq!(classes[0], Class::BothLow);
    assert_eq!(classes[2], Class::High);
}
