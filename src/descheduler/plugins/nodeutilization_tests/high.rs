//! `TestHighNodeUtilization` and `TestHighNodeUtilizationWithTaints`.

use super::*;

#[test]
fn high_node_utilization() {
    let rs = rs_owner;
    let p = |n: &str, cpu: i64, node: &str| pod(n, cpu, 0, node, rs());
    let plain = |n: &str, cpu: i64, pods: i64| node(n, cpu, 3000, pods, json!({}));
    let off = |n: &str, cpu: i64| node(n, cpu, 3000, 10, unschedulable());
    let west = json!({"metadata": {"labels": {"datacenter": "west"}}});
    let select_west = with(&[
        rs_owner(),
        json!({"spec": {"nodeSelector": {"datacenter": "west"}}}),
    ]);
    let prio = |n: &str, v: i32| {
        pod(
            n,
            400,
            0,
            "n1",
            with(&[rs_owner(), json!({"spec": {"priority": v}})]),
        )
    };
    let cases: Vec<(&str, Value, Vec<Node>, Vec<Pod>, usize, &[&str])> = vec![
        (
            "no node below threshold usage",
            json!({"thresholds": cpu_pods(20.0, 20.0)}),
            vec![
                plain("n1", 4000, 10),
                plain("n2", 4000, 10),
                plain("n3", 4000, 10),
            ],
            ["n1", "n1", "n1", "n2", "n2", "n2", "n3", "n3", "n3"]
                .iter()
                .enumerate()
                .map(|(i, n)| p(&format!("p{}", i + 1), 400, n))
                .collect(),
            0,
            &[],
        ),
        (
            "no evictable pods",
            json!({"thresholds": cpu_pods(40.0, 40.0)}),
            vec![
                plain("n1", 4000, 9),
                plain("n2", 4000, 10),
                plain("n3", 4000, 10),
            ],
            vec![
                pod("p1", 400, 0, "n1", local_storage_mirror()),
                pod("p2", 400, 0, "n1", critical(true)),
                pod("p3", 400, 0, "n2", ds_owner()),
                pod("p4", 400, 0, "n2", ds_owner()),
                p("p5", 400, "n3"),
                p("p6", 400, "n3"),
                p("p7", 400, "n3"),
                p("p8", 400, "n3"),
            ],
            0,
            &[],
        ),
        (
            "no node to schedule evicted pods",
            json!({"thresholds": cpu_pods(20.0, 20.0)}),
            vec![
                plain("n1", 4000, 10),
                plain("n2", 4000, 10),
                off("n3", 4000),
            ],
            vec![
                p("p1", 400, "n1"),
                p("p2", 400, "n2"),
                p("p3", 400, "n3"),
                p("p4", 400, "n3"),
                p("p5", 400, "n3"),
            ],
            0,
            &[],
        ),
        (
            "without priorities",
            json!({"thresholds": cpu_pods(30.0, 30.0)}),
            vec![
                plain("n1", 4000, 10),
                plain("n2", 4000, 10),
                off("n3", 4000),
            ],
            vec![
                p("p1", 400, "n1"),
                pod("p2", 400, 0, "n1", critical(true)),
                p("p3", 400, "n2"),
                p("p4", 400, "n2"),
                p("p5", 400, "n2"),
                p("p6", 400, "n2"),
                p("p7", 400, "n3"),
            ],
            2,
            &["p1", "p7"],
        ),
        (
            "without priorities stop when resource capacity is depleted",
            json!({"thresholds": cpu_pods(30.0, 30.0)}),
            vec![
                plain("n1", 2000, 10),
                plain("n2", 2000, 10),
                off("n3", 2000),
            ],
            vec![
                p("p1", 400, "n1"),
                p("p2", 400, "n2"),
                p("p3", 400, "n2"),
                p("p4", 400, "n2"),
                p("p5", 400, "n2"),
                p("p6", 400, "n3"),
            ],
            1,
            &[],
        ),
        (
            "with priorities",
            json!({"thresholds": {"cpu": 30}}),
            vec![
                plain("n1", 4000, 10),
                plain("n2", 2000, 10),
                off("n3", 2000),
            ],
            vec![
                prio("p1", LOW),
                prio("p2", HIGH),
                p("p5", 400, "n2"),
                p("p6", 400, "n2"),
                p("p7", 400, "n2"),
                p("p8", 400, "n2"),
                pod("p9", 400, 0, "n3", ds_owner()),
            ],
            1,
            &["p1"],
        ),
        (
            "without priorities evicting best-effort pods only",
            json!({"thresholds": {"cpu": 30}}),
            vec![plain("n1", 3000, 10), plain("n2", 3000, 5), off("n3", 3000)],
            vec![
                pod("p1", -1, -1, "n1", rs_owner()),
                p("p2", 400, "n1"),
                p("p3", 400, "n2"),
                p("p4", 400, "n2"),
                p("p5", 400, "n2"),
                p("p6", 400, "n2"),
            ],
            1,
            &["p1"],
        ),
        (
            "with extended resource",
            json!({"thresholds": {"cpu": 20, EXT: 40}}),
            vec![
                ext_node("n1", 4000, 10, 8),
                ext_node("n2", 4000, 10, 8),
                off("n3", 4000),
            ],
            vec![
                ext_pod("p1", 100, "n1", 1, rs()),
                ext_pod("p2", 100, "n1", 1, rs()),
                ext_pod("p3", 500, "n2", 1, rs()),
                ext_pod("p4", 500, "n2", 1, rs()),
                ext_pod("p5", 500, "n2", 1, rs()),
                ext_pod("p6", 500, "n2", 1, rs()),
            ],
            2,
            &["p1", "p2"],
        ),
        (
            "with extended resource in some of nodes",
            json!({"thresholds": {"cpu": 40, EXT: 40}}),
            vec![
                ext_node("n1", 4000, 10, 8),
                plain("n2", 4000, 10),
                off("n3", 4000),
            ],
            vec![
                ext_pod("p1", 100, "n1", 1, rs()),
                ext_pod("p2", 100, "n1", 1, rs()),
                p("p3", 500, "n2"),
                p("p4", 500, "n2"),
                p("p5", 500, "n2"),
                p("p6", 500, "n2"),
            ],
            0,
            &[],
        ),
        (
            "Other node match pod node selector",
            json!({"thresholds": cpu_pods(30.0, 30.0)}),
            vec![node("n1", 4000, 3000, 9, west), plain("n2", 4000, 10)],
            vec![
                p("p1", 400, "n1"),
                p("p2", 400, "n1"),
                p("p3", 400, "n1"),
                pod("p4", 400, 0, "n1", ds_owner()),
                pod("p5", 400, 0, "n2", select_west.clone()),
            ],
            1,
            &[],
        ),
        (
            "Other node does not match pod node selector",
            json!({"thresholds": cpu_pods(30.0, 30.0)}),
            vec![plain("n1", 4000, 9), plain("n2", 4000, 10)],
            vec![
                p("p1", 400, "n1"),
                p("p2", 400, "n1"),
                p("p3", 400, "n1"),
                pod("p4", 400, 0, "n1", ds_owner()),
                pod("p5", 400, 0, "n2", select_west),
            ],
            0,
            &[],
        ),
        (
            "Other node does not have enough Memory",
            json!({"thresholds": cpu_pods(30.0, 30.0)}),
            vec![node("n1", 4000, 200, 9, json!({})), plain("n2", 4000, 10)],
            vec![
                pod("p1", 400, 50, "n1", rs()),
                pod("p2", 400, 50, "n1", rs()),
                pod("p3", 400, 50, "n1", rs()),
                pod("p4", 400, 50, "n1", ds_owner()),
                pod("p5", 400, 100, "n2", rs()),
            ],
            0,
            &[],
        ),
        (
            "with extended resource threshold and no extended resource pods",
            json!({"thresholds": {EXT: 40}, "evictionModes": ["OnlyThresholdingResources"]}),
            vec![
                ext_node("n1", 4000, 10, 10),
                ext_node("n2", 4000, 10, 10),
                ext_node("n3", 4000, 10, 10),
            ],
            vec![
                ext_pod("p1", 100, "n1", 3, rs()),
                ext_pod("p2", 100, "n1", 3, rs()),
                p("p3", 500, "n2"),
                p("p4", 500, "n2"),
                p("p5", 500, "n2"),
                p("p6", 500, "n2"),
            ],
            0,
            &[],
        ),
    ];
    for (name, args, nodes, pods, want, want_pods) in cases {
        let r = pass(
            "HighNodeUtilization",
            "balance",
            args,
            json!({"nodeFit": true}),
            nodes,
            pods,
        );
        let got = evicted(&r);
        assert_eq!(got.len(), want, "{name}: {got:?}");
        for p in want_pods {
            assert!(
                got.iter().any(|g| g == p),
                "{name}: {p} not evicted ({got:?})"
            );
        }
    }
}

#[test]
fn high_node_utilization_with_taints() {
    let cases: Vec<(&str, Vec<Node>, Vec<Pod>, usize)> = vec![
        (
            "No taints",
            taint_nodes(1000, 1000, false),
            vec![
                pod("pod_1_n1", 200, 0, "n1", rs_owner()),
                pod("pod_2_n1", 200, 0, "n1", rs_owner()),
                pod("pod_3_n1", 200, 0, "n1", rs_owner()),
                pod("pod_4_n2", 200, 0, "n2", rs_owner()),
            ],
            1,
        ),
        (
            "No pod tolerates node taint",
            taint_nodes(1000, 1000, true),
            vec![
                pod("pod_1_n1", 200, 0, "n1", rs_owner()),
                pod("pod_2_n3", 200, 0, "n3", rs_owner()),
            ],
            0,
        ),
        (
            "Pod which tolerates node taint",
            taint_nodes(1000, 1000, true),
            vec![
                pod("pod_1_n1", 100, 0, "n1", rs_owner()),
                tolerating(200),
                pod("pod_9_n3", 500, 0, "n3", rs_owner()),
            ],
            1,
        ),
    ];
    for (name, nodes, pods, want) in cases {
        let top = json!({"maxNoOfPodsToEvictPerNode": want});
        let r = pass_with(
            "HighNodeUtilization",
            "balance",
            json!({"thresholds": {"cpu": 40}}),
            json!({}),
            top,
            nodes,
            pods,
        );
        assert_eq!(r.evictions.len(), want, "{name}: {:?}", evicted(&r));
    }
}
