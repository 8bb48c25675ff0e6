//! sigs.k8s.io/descheduler's `TestLowNodeUtilization`, `TestLowNodeUtilizationWithTaints`,
//! `TestHighNodeUtilization` and `TestHighNodeUtilizationWithTaints`, case for case with their
//! names (the request-based ones: koord has no metrics-server or Prometheus source).

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

struct Low {
    name: &'static str,
    args: Value,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    want: usize,
    want_pods: &'static [&'static str],
}

fn low(name: &'static str, args: Value, nodes: Vec<Node>, pods: Vec<Pod>, want: usize) -> Low {
    Low {
        name,
        args,
        nodes,
        pods,
        want,
        want_pods: &[],
    }
}

fn static_args() -> Value {
    json!({"thresholds": cpu_pods(30.0, 30.0), "targetThresholds": cpu_pods(50.0, 50.0)})
}

fn deviation_args() -> Value {
    json!({"thresholds": cpu_pods(5.0, 5.0), "targetThresholds": cpu_pods(5.0, 5.0), "useDeviationThresholds": true})
}

fn low_cases() -> Vec<Low> {
    let rs = |_| rs_owner();
    let ns1 = |_| {
        with(&[
            pod_owner(),
            json!({"metadata": {"namespace": "namespace1"}}),
        ])
    };
    let selector_west = with(&[
        pod_owner(),
        json!({"spec": {"nodeSelector": {"datacenter": "west"}}}),
    ]);
    let ext_args =
        json!({"thresholds": {"pods": 30, EXT: 30}, "targetThresholds": {"pods": 50, EXT: 50}});
    let mut memory_heavy = standard(rs, true, 375);
    memory_heavy[8] = pod("p9", 400, 3000, "n2", rs_owner());
    vec![
        low(
            "no evictable pods",
            static_args(),
            three(9),
            no_evictable(),
            0,
        ),
        low(
            "without priorities",
            static_args(),
            three(9),
            standard(rs, false, 0),
            4,
        ),
        low(
            "without priorities, but excluding namespaces",
            with(&[
                static_args(),
                json!({"evictableNamespaces": {"exclude": ["namespace1"]}}),
            ]),
            three(9),
            standard(ns1, false, 0),
            0,
        ),
        // Upstream's validation refuses `include` (as koord's does): the case runs without it.
        low(
            "without priorities, but include only default namespace",
            static_args(),
            three(9),
            {
                let mut v = standard(rs, true, 0);
                for i in 3..=5 {
                    v[i - 1] = pod(
                        &format!("p{i}"),
                        400,
                        0,
                        "n1",
                        json!({"metadata": {"namespace": format!("namespace{i}")}}),
                    );
                }
                v
            },
            2,
        ),
        low(
            "without priorities stop when cpu capacity is depleted",
            static_args(),
            three(9),
            standard(rs, true, 0),
            4,
        ),
        low(
            "with priorities",
            static_args(),
            three(9),
            prioritized(true),
            4,
        ),
        Low {
            want_pods: &["p1", "p2", "p4", "p5"],
            ..low(
                "without priorities evicting best-effort pods only",
                static_args(),
                three(9),
                best_effort(standard(rs, true, 0)),
                4,
            )
        },
        low(
            "with extended resource",
            ext_args.clone(),
            ext_nodes(true),
            ext_pods(true),
            3,
        ),
        low(
            "with extended resource in some of nodes",
            ext_args,
            ext_nodes(false),
            vec![
                ext_pod("p1", 0, "n1", 1, rs_owner()),
                pod("p9", 0, 0, "n2", rs_owner()),
            ],
            0,
        ),
        low(
            "with extended resource in some of nodes with deviation",
            json!({"thresholds": {"pods": 5, EXT: 10}, "targetThresholds": {"pods": 5, EXT: 10}, "useDeviationThresholds": true}),
            vec![
                ext_node("n1", 4000, 10, 8),
                ext_node("n2", 4000, 10, 8),
                node("n3", 4000, 3000, 10, unschedulable()),
            ],
            vec![
                ext_pod("p1", 0, "n1", 1, rs_owner()),
                ext_pod("p2", 0, "n2", 7, rs_owner()),
                pod("p3", 0, 0, "n2", rs_owner()),
                pod("p8", 0, 0, "n3", rs_owner()),
                pod("p9", 0, 0, "n3", rs_owner()),
            ],
            1,
        ),
        low(
            "without priorities, but only other node is unschedulable",
            static_args(),
            vec![
                node("n1", 4000, 3000, 9, json!({})),
                node("n2", 4000, 3000, 10, unschedulable()),
            ],
            standard(rs, true, 0)[..8].to_vec(),
            0,
        ),
        low(
            "without priorities, but only other node doesn't match pod node selector for p4 and p5",
            static_args(),
            east_nodes(),
            selected(selector_west, false, true),
            3,
        ),
        low(
            "without priorities, but only other node doesn't match pod node affinity for p4 and p5",
            static_args(),
            east_nodes(),
            selected(west_affinity(), true, true),
            3,
        ),
        low(
            "deviation thresholds",
            deviation_args(),
            three(9),
            standard(rs, true, 0),
            2,
        ),
        low(
            "deviation thresholds and overevicting memory",
            deviation_args(),
            three(10),
            memory_heavy,
            0,
        ),
        low(
            "without priorities different evictions for requested and actual resources",
            static_args(),
            east_nodes(),
            selected(west_affinity(), true, true),
            3,
        ),
        low(
            "without priorities with node eviction limit",
            with(&[static_args(), json!({"evictionLimits": {"node": 2}})]),
            three(9),
            standard(rs, false, 0),
            2,
        ),
    ]
}

#[test]
fn low_node_utilization() {
    for c in low_cases() {
        let r = pass(
            "LowNodeUtilization",
            "balance",
            c.args,
            json!({"nodeFit": true}),
            c.nodes,
            c.pods,
        );
        let got = evicted(&r);
        assert_eq!(got.len(), c.want, "{}: {got:?} {:?}", c.name, r.skipped);
        for p in c.want_pods {
            assert!(
                got.iter().any(|g| g == p),
                "{}: {p} not evicted ({got:?})",
                c.name
            );
        }
    }
}

fn taint_nodes(n1_cpu: i64, n23_cpu: i64, tainted: bool) -> Vec<Node> {
    let t = json!({"spec": {"taints": [{"key": "key", "value": "value", "effect": "NoSchedule"}]}});
    let mut v = vec![node("n1", n1_cpu, 3000, 10, json!({}))];
    if tainted {
        v.push(node("n3", n23_cpu, 3000, 10, t));
    } else {
        v.push(node("n2", n23_cpu, 3000, 10, json!({})));
        v.push(node("n3", n23_cpu, 3000, 10, json!({})));
    }
    v
}

fn tolerating(cpu: i64) -> Pod {
    pod(
        "tolerate_pod",
        cpu,
        0,
        "n1",
        with(&[
            rs_owner(),
            json!({"spec": {"tolerations": [{"key": "key", "value": "value"}]}}),
        ]),
    )
}

fn on_n1(n: usize) -> Vec<Pod> {
    (1..=n)
        .map(|i| pod(&format!("pod_{i}_n1"), 200, 0, "n1", rs_owner()))
        .collect()
}

#[test]
fn low_node_utilization_with_taints() {
    let args = json!({"thresholds": {"pods": 20}, "targetThresholds": {"pods": 70}});
    let cases: Vec<(&str, Vec<Node>, Vec<Pod>, Option<u32>, usize)> = vec![
        (
            "No taints",
            taint_nodes(2000, 1000, false),
            [on_n1(8), vec![pod("pod_9_n2", 200, 0, "n2", rs_owner())]].concat(),
            None,
            1,
        ),
        (
            "No pod tolerates node taint",
            taint_nodes(2000, 1000, true),
            [on_n1(8), vec![pod("pod_9_n3", 200, 0, "n3", rs_owner())]].concat(),
            None,
            0,
        ),
        (
            "Pod which tolerates node taint",
            taint_nodes(2000, 1000, true),
            [
                on_n1(7),
                vec![tolerating(200), pod("pod_9_n3", 200, 0, "n3", rs_owner())],
            ]
            .concat(),
            None,
            1,
        ),
        (
            "Pod which tolerates node taint, set maxPodsToEvictTotal(0), should not be expelled",
            taint_nodes(2000, 1000, true),
            [
                on_n1(7),
                vec![tolerating(200), pod("pod_9_n3", 200, 0, "n3", rs_owner())],
            ]
            .concat(),
            Some(0),
            0,
        ),
    ];
    for (name, nodes, pods, total, want) in cases {
        // Upstream caps the evictions per node at the expected count.
        let top = json!({"maxNoOfPodsToEvictPerNode": want, "maxNoOfPodsToEvictTotal": total});
        let r = pass_with(
            "LowNodeUtilization",
            "balance",
            args.clone(),
            json!({"nodeFit": true}),
            top,
            nodes,
            pods,
        );
        assert_eq!(r.evictions.len(), want, "{name}: {:?}", evicted(&r));
    }
}

#[test]
fn low_node_utilization_args_are_validated_as_upstream() {
    let bad = [
        (
            json!({"thresholds": {}, "targetThresholds": {"cpu": 50}}),
            "no resource threshold is configured",
        ),
        (
            json!({"thresholds": {"cpu": 30}, "targetThresholds": {"memory": 50}}),
            "configured different resources",
        ),
        (
            json!({"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}}),
            "percentage is greater than targetThresholds'",
        ),
        (
            json!({"thresholds": {"cpu": 130}, "targetThresholds": {"cpu": 150}}),
            "threshold not in [0, 100] range",
        ),
        (
            json!({"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}, "evictableNamespaces": {"include": ["a"]}}),
            "only Exclude namespaces can be set",
        ),
        (
            json!({"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}, "metricsUtilization": {"source": "KubernetesMetrics"}}),
            "requests only",
        ),
    ];
    for (args, want) in bad {
        let e = super::super::Upstream::new("LowNodeUtilization", &args)
            .err()
            .expect("refused");
        assert!(e.to_string().contains(want), "{args}: {e}");
    }
}

mod high;
