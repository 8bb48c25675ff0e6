//! Koordinator's `TestLowNodeLoad` (pkg/descheduler/framework/plugins/loadaware), case for
//! case with its names: LowNodeLoad in one pool (anomaly condition 1/1, nodeFit), behind
//! DefaultEvictor, NodeMetrics built as its `setupNodeMetrics` builds them.

// The tables are Koordinator's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

struct Case {
    name: &'static str,
    pool: Value,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    namespaces: Option<Value>,
    want: usize,
}

fn case(name: &'static str, pool: Value, nodes: Vec<Node>, pods: Vec<Pod>, want: usize) -> Case {
    Case {
        name,
        pool,
        nodes,
        pods,
        namespaces: None,
        want,
    }
}

/// low/high (and prodLow/prodHigh when given) thresholds over cpu and pods.
fn pool(
    low: (f64, f64),
    high: (f64, f64),
    prod: Option<((f64, f64), (f64, f64))>,
    deviation: bool,
) -> Value {
    let mut p = json!({"lowThresholds": cpu_pods(low.0, low.1), "highThresholds": cpu_pods(high.0, high.1),
        "useDeviationThresholds": deviation});
    if let Some((pl, ph)) = prod {
        p["prodLowThresholds"] = cpu_pods(pl.0, pl.1);
        p["prodHighThresholds"] = cpu_pods(ph.0, ph.1);
    }
    p
}

/// One LowNodeLoad pass over the case, as Koordinator's test runs it.
pub fn lnl_pass(
    pool: Value,
    namespaces: Option<Value>,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
) -> crate::descheduler::framework::Report {
    let mut pool = pool;
    pool["anomalyCondition"] = json!({"consecutiveAbnormalities": 1, "consecutiveNormalities": 1});
    let mut args = json!({"nodeFit": true, "nodePools": [pool], "detectorCacheTimeout": "5m"});
    if let Some(ns) = namespaces {
        args["evictableNamespaces"] = ns;
    }
    let cfg = json!({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
        "profiles": [{"name": "p", "plugins": {
            "balance": {"enabled": [{"name": "LowNodeLoad"}]},
            "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
            "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}},
        "pluginConfig": [{"name": "LowNodeLoad", "args": args}, {"name": "DefaultEvictor", "args": {}}]}]});
    let metrics = node_metrics(&nodes, &pods, &[]);
    run(cfg, nodes, pods, metrics)
}

fn batch() -> Value {
    json!({"metadata": {"labels": {"koordinator.sh/priority-class": "koord-batch"}}})
}

/// Koordinator's pod set: p1..p5 on n1 (each `p(i)`), the three it never evicts, p9 on n2;
/// the critical pod has no owner.
fn koord_standard(p: impl Fn(usize) -> Value, mem: i64, p9_mem: i64) -> Vec<Pod> {
    let mut v = standard(p, false, mem);
    v[8] = pod("p9", 400, p9_mem, "n2", rs_owner());
    v
}

fn node_cases() -> Vec<Case> {
    let rs = |_| rs_owner();
    let static_pool = pool((30.0, 30.0), (50.0, 50.0), None, false);
    let ns1 = |_| {
        with(&[
            pod_owner(),
            json!({"metadata": {"namespace": "namespace1"}}),
        ])
    };
    let mut include_default = koord_standard(rs, 0, 0);
    for i in 3..=5 {
        include_default[i - 1] = pod(
            &format!("p{i}"),
            400,
            0,
            "n1",
            json!({"metadata": {"namespace": format!("namespace{i}")}}),
        );
    }
    let ext_pool =
        json!({"lowThresholds": {"pods": 30, EXT: 30}, "highThresholds": {"pods": 50, EXT: 50}});
    let west_selector = with(&[
        pod_owner(),
        json!({"spec": {"nodeSelector": {"datacenter": "west"}}}),
    ]);
    vec![
        case(
            "no evictable pods",
            static_pool.clone(),
            three(9),
            no_evictable(),
            0,
        ),
        case(
            "without priorities",
            static_pool.clone(),
            three(9),
            koord_standard(rs, 0, 0),
            4,
        ),
        Case {
            namespaces: Some(json!({"exclude": ["namespace1"]})),
            ..case(
                "without priorities, but excluding namespaces",
                static_pool.clone(),
                three(9),
                koord_standard(ns1, 0, 0),
                0,
            )
        },
        Case {
            namespaces: Some(json!({"include": ["default"]})),
            ..case(
                "without priorities, but include only default namespace",
                static_pool.clone(),
                three(9),
                include_default,
                2,
            )
        },
        case(
            "without priorities stop when memory capacity is depleted",
            static_pool.clone(),
            three(9),
            koord_standard(rs, 300, 2100),
            3,
        ),
        case(
            "with priorities",
            static_pool.clone(),
            three(9),
            prioritized(false),
            4,
        ),
        case(
            "without priorities evicting best-effort pods only",
            static_pool.clone(),
            three(9),
            best_effort(koord_standard(rs, 0, 0)),
            4,
        ),
        case(
            "with extended resource",
            ext_pool.clone(),
            ext_nodes(true),
            ext_pods(false),
            3,
        ),
        case(
            "with extended resource in some of nodes",
            ext_pool,
            ext_nodes(false),
            vec![
                ext_pod("p1", 0, "n1", 1, rs_owner()),
                pod("p9", 0, 0, "n2", rs_owner()),
            ],
            0,
        ),
        case(
            "without priorities, but only other node is unschedulable",
            static_pool.clone(),
            vec![
                node("n1", 4000, 3000, 9, json!({})),
                node("n2", 4000, 3000, 10, unschedulable()),
            ],
            koord_standard(rs, 0, 0)[..8].to_vec(),
            0,
        ),
        case(
            "without priorities, but only other node doesn't match pod node selector for p4 and p5",
            static_pool.clone(),
            east_nodes(),
            selected(west_selector, false, false),
            3,
        ),
        case(
            "without priorities, but only other node doesn't match pod node affinity for p4 and p5",
            static_pool,
            east_nodes(),
            selected(west_affinity(), true, false),
            3,
        ),
        case(
            "deviation thresholds",
            pool((5.0, 5.0), (5.0, 5.0), None, true),
            three(9),
            koord_standard(rs, 0, 0),
            2,
        ),
    ]
}

fn prod_cases() -> Vec<Case> {
    let n20 = |n: &str| node(n, 4000, 3000, 20, json!({}));
    let batch_from = |from: usize| {
        move |i: usize| {
            if i >= from {
                with(&[rs_owner(), batch()])
            } else {
                rs_owner()
            }
        }
    };
    let mut both_low = koord_standard(|_| rs_owner(), 0, 0);
    both_low.insert(5, pod("p16", 400, 0, "n1", rs_owner()));
    both_low.insert(6, pod("p17", 400, 0, "n1", rs_owner()));
    both_low.extend((10..=15).map(|i| pod(&format!("p{i}"), 400, 0, "n3", rs_owner())));
    let mut balanced = koord_standard(|_| rs_owner(), 0, 0);
    balanced.extend((10..=11).map(|i| pod(&format!("p{i}"), 400, 0, "n3", rs_owner())));
    vec![
        case(
            "node && prod thresholds, node under thresholds, but prod over thresholds",
            pool(
                (30.0, 30.0),
                (90.0, 90.0),
                Some(((20.0, 20.0), (40.0, 40.0))),
                false,
            ),
            three(9),
            koord_standard(batch_from(3), 0, 0),
            2,
        ),
        case(
            "both node and prod usage is higher than thresholds, only node usage will be evicted",
            json!({"lowThresholds": cpu_pods(30.0, 30.0), "highThresholds": cpu_pods(70.0, 80.0),
                "prodLowThresholds": cpu_pods(20.0, 20.0), "prodHighThresholds": cpu_pods(40.0, 40.0)}),
            three(9),
            koord_standard(batch_from(4), 0, 0),
            1,
        ),
        case(
            "support reschedule prod pod only",
            pool(
                (0.0, 0.0),
                (100.0, 100.0),
                Some(((30.0, 30.0), (50.0, 50.0))),
                false,
            ),
            three(9),
            koord_standard(|_| rs_owner(), 0, 0),
            4,
        ),
        case(
            "both low resource used by high node, prod pods don`t have enough resource to rebalance",
            json!({"lowThresholds": cpu_pods(30.0, 50.0), "highThresholds": cpu_pods(60.0, 80.0),
                "prodLowThresholds": cpu_pods(20.0, 30.0), "prodHighThresholds": cpu_pods(30.0, 50.0)}),
            vec![n20("n1"), n20("n2"), n20("n3")],
            both_low,
            5,
        ),
        case(
            "node is always appropriately for node usage, prod pod rebalance successful",
            pool(
                (0.0, 0.0),
                (100.0, 100.0),
                Some(((10.0, 10.0), (10.0, 10.0))),
                true,
            ),
            vec![n20("n1"), n20("n2"), n20("n3")],
            balanced,
            3,
        ),
        case(
            "stop prod pod eviction when the node recovers to normal.",
            pool(
                (0.0, 0.0),
                (100.0, 100.0),
                Some(((60.0, 60.0), (70.0, 70.0))),
                false,
            ),
            vec![n20("n1"), n20("n2")],
            koord_standard(|_| rs_owner(), 0, 0),
            1,
        ),
    ]
}

#[test]
fn low_node_load() {
    let mut failed = Vec::new();
    for c in node_cases().into_iter().chain(prod_cases()) {
        let r = lnl_pass(c.pool, c.namespaces, c.nodes, c.pods);
        let got = evicted(&r);
        if got.len() != c.want {
            failed.push(format!(
                "{}: want {}, got {got:?}\n  nodes {:?}\n  skipped {:?}",
                c.name, c.want, r.nodes, r.skipped
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn max_eviction_total() {
    // `maxPodsToEvictTotal`: the descheduler's maxNoOfPodsToEvictTotal caps the pass at 1.
    let mut pool = pool((30.0, 30.0), (50.0, 50.0), None, false);
    pool["anomalyCondition"] = json!({"consecutiveAbnormalities": 1, "consecutiveNormalities": 1});
    let pods = koord_standard(|_| rs_owner(), 0, 0);
    let metrics = node_metrics(&three(9), &pods, &[]);
    let cfg = json!({"maxNoOfPodsToEvictTotal": 1, "profiles": [{"name": "p", "plugins": {
            "balance": {"enabled": [{"name": "LowNodeLoad"}]},
            "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
            "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}},
        "pluginConfig": [{"name": "LowNodeLoad", "args": {"nodeFit": true, "nodePools": [pool]}}]}]});
    assert_eq!(run(cfg, three(9), pods, metrics).evictions.len(), 1);
}

#[test]
fn over_utilized_eviction_reason() {
    use super::args::{Args, RawArgs};
    use super::balance::reason;
    use super::classify::{NodeLoad, allocatable_of, thresholds};
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "test-node",
        "annotations": {"node.koordinator.sh/raw-allocatable": r#"{"cpu":96,"memory":"512Gi"}"#}},
        "status": {"allocatable": {"cpu": "96", "memory": "512Gi"}}}))
    .unwrap();
    const GI: i64 = 1 << 30;
    let cases: Vec<(&str, Value, bool, (i64, i64), (i64, i64), &str)> = vec![
        (
            "cpu overutilized",
            json!({}),
            false,
            (64_000, 32 * GI),
            (0, 0),
            "node is overutilized, node cpu usage(66.67%)>threshold(50.00%)",
        ),
        (
            "both cpu and memory overutilized",
            json!({}),
            false,
            (64_000, 400 * GI),
            (0, 0),
            "node is overutilized, node cpu usage(66.67%)>threshold(50.00%), node memory usage(78.12%)>threshold(50.00%)",
        ),
        (
            "prod cpu overutilized",
            json!({"cpu": 40, "memory": 40}),
            true,
            (46_000, 250 * GI),
            (45_000, 200 * GI),
            "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%)",
        ),
        (
            "prod cpu && memory overutilized",
            json!({"cpu": 40, "memory": 40}),
            true,
            (46_000, 250 * GI),
            (45_000, 250 * GI),
            "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%), prod memory usage(48.83%)>threshold(40.00%)",
        ),
    ];
    for (name, prod_high, prod, usage, prod_usage, want) in cases {
        let mut raw = json!({"highThresholds": {"cpu": 50, "memory": 50}, "lowThresholds": {"cpu": 0, "memory": 0}});
        if prod {
            raw["prodHighThresholds"] = prod_high;
            raw["prodLowThresholds"] = json!({"cpu": 0, "memory": 0});
        }
        let a = Args::new(serde_json::from_value::<RawArgs>(raw).unwrap()).unwrap();
        let amounts =
            |(c, m): (i64, i64)| [("cpu".to_string(), c), ("memory".to_string(), m)].into();
        let mut n = vec![NodeLoad {
            name: "test-node".into(),
            allocatable: allocatable_of(&node),
            usage: amounts(usage),
            prod_usage: amounts(prod_usage),
            low: Default::default(),
            high: Default::default(),
            prod_low: Default::default(),
            prod_high: Default::default(),
            schedulable: true,
            prod: false,
            high_pct: Default::default(),
            prod_high_pct: Default::default(),
        }];
        thresholds(&a.pools[0], &mut n);
        let view = if prod {
            NodeLoad {
                usage: n[0].prod_usage.clone(),
                high: n[0].prod_high.clone(),
                high_pct: n[0].prod_high_pct.clone(),
                prod: true,
                ..n[0].clone()
            }
        } else {
            n[0].clone()
        };
        assert_eq!(reason(&view), want, "{name}");
    }
}

mod anomaly {
    //! `Test_filterRealAbnormalNodes`, `Test_resetNodesAsNormal`, `Test_tryMarkNodesAsNormal`.
    use super::super::anomaly::{Condition, Detectors};
    use std::time::Duration;

    fn cond(abnormalities: u32, normalities: u32) -> Condition {
        Condition {
            timeout: Duration::from_secs(60),
            consecutive_abnormalities: abnormalities,
            consecutive_normalities: normalities,
        }
    }

    /// `filterRealAbnormalNodes`: the sources in the Anomaly state after this pass's mark.
    fn filter(d: &mut Detectors, nodes: &[&str], c: &Condition) -> Vec<String> {
        nodes
            .iter()
            .filter(|n| d.abnormal(n, 0, c))
            .map(|n| n.to_string())
            .collect()
    }

    #[test]
    fn filter_real_abnormal_nodes() {
        let both = ["test-node-1", "test-node-2"];
        let cases: Vec<(&str, &[&str], Condition, usize, Vec<&str>)> = vec![
            (
                "ConsecutiveAbnormalities 1 times and detected abnormality",
                &[],
                cond(1, 1),
                0,
                both.to_vec(),
            ),
            (
                "ConsecutiveAbnormalities 2 times and did not detect abnormality",
                &[],
                cond(2, 1),
                0,
                vec![],
            ),
            (
                "ConsecutiveAbnormalities 2 times and detect 2 times",
                &[],
                cond(2, 1),
                2,
                both.to_vec(),
            ),
            (
                "mix abnormal nodes and normal nodes",
                &["test-node-2"],
                cond(2, 1),
                0,
                vec!["test-node-2"],
            ),
        ];
        for (name, already, c, detect, want) in cases {
            let mut d = Detectors::new(Duration::from_secs(300));
            for _ in 0..c.consecutive_abnormalities {
                filter(&mut d, already, &c);
            }
            for _ in 0..detect {
                filter(&mut d, &both, &c);
            }
            assert_eq!(filter(&mut d, &both, &c), want, "{name}");
        }
    }

    #[test]
    fn reset_nodes_as_normal() {
        let (c, n) = (cond(2, 0), ["test-node-"]);
        let mut d = Detectors::new(Duration::from_secs(300));
        for _ in 0..2 {
            filter(&mut d, &n, &c);
        }
        assert_eq!(filter(&mut d, &n, &c), ["test-node-"]);
        d.reset("test-node-");
        assert!(filter(&mut d, &n, &c).is_empty());
    }

    #[test]
    fn try_mark_nodes_as_normal() {
        let (c, n) = (cond(2, 2), ["test-node-"]);
        let mut d = Detectors::new(Duration::from_secs(300));
        for _ in 0..3 {
            filter(&mut d, &n, &c);
        }
        d.normal("test-node-", 0, &c);
        d.normal("test-node-", 0, &c);
        assert!(
            d.anomalous("test-node-"),
            "still StateAnomaly after 2 normal marks"
        );
        d.normal("test-node-", 0, &c);
        assert!(!d.anomalous("test-node-"), "StateOK after the third");
    }
}
