use super::*;

fn inputs(cap: i64, thr: i64, pods: i64, sys: i64) -> Inputs {
    Inputs {
        capacity_milli: cap,
        threshold_percent: thr,
        min_percent: None,
        non_be_pods_milli: pods,
        non_be_host_milli: 0,
        system_used_milli: sys,
    }
}

#[test]
fn suppress_formula() {
    // 16 cores × 65 % − 6 cores LS − 1 core system = 3.4 cores.
    assert_eq!(suppress_milli(&inputs(16_000, 65, 6_000, 1_000)), 3_400);
    assert_eq!(suppress_milli(&inputs(16_000, 65, 12_000, 1_000)), -2_600);
    let min = Inputs {
        min_percent: Some(10),
        ..inputs(16_000, 65, 12_000, 1_000)
    };
    assert_eq!(suppress_milli(&min), 1_600);
    assert_eq!(system_used(10_000, 6_000, 500, 1_000), 3_500);
    assert_eq!(
        system_used(5_000, 6_000, 0, 1_000),
        1_000,
        "reserved is the floor"
    );
}

#[test]
fn quota_steps() {
    let cap = 16_000; // 1.6 s per 100 ms period; 1 % = 16_000 µs, 10 % = 160_000 µs
    // (suppress, current quota, expected)
    for (s, cur, want) in [
        (3_400, -1, Some(340_000)),
        (3_400, 340_000, None),
        (3_500, 340_000, None),
        (3_600, 340_000, Some(360_000)),
        (10_000, 340_000, Some(500_000)),
        (-2_600, 340_000, Some(MIN_QUOTA)),
        (-2_600, MIN_QUOTA, None),
        (10, -1, Some(MIN_QUOTA)),
    ] {
        assert_eq!(cfs_quota(s, cur, cap), want, "S {s} current {cur}");
    }
}

#[test]
fn cpuset_sizes() {
    assert_eq!(cpuset_count(3_400, 8, 16), 4);
    assert_eq!(cpuset_count(-2_000, 8, 16), MIN_CPUS);
    assert_eq!(
        cpuset_count(15_000, 2, 16),
        4,
        "grows by 10 % of 16 → 2 per round"
    );
    assert_eq!(cpuset_count(40_000, 30, 32), 32);
}

fn topo() -> Vec<Cpu> {
    // 2 sockets × 2 cores × 2 threads: cpu i on core i/2 % 2, socket i/4.
    (0..8)
        .map(|i| Cpu {
            id: i,
            core: (i / 2) % 2 + 2 * (i / 4),
            socket: i / 4,
            numa: i / 4,
        })
        .collect()
}

#[test]
fn picks_whole_cores_round_robin() {
    assert_eq!(
        pick(&topo(), 4),
        vec![0, 1, 4, 5],
        "one whole core from each socket"
    );
    assert_eq!(
        pick(&topo(), 3),
        vec![0, 1, 4],
        "a core, then a single CPU elsewhere"
    );
    assert_eq!(pick(&topo(), 20).len(), 8);
    let excluded: BTreeSet<u32> = [0, 1].into();
    let lsr: BTreeSet<u32> = [2, 3, 4, 5].into();
    // 6 candidates, 4 in the LSR pool: 3 × 4/6 = 2 from LSR, 1 from LS.
    assert_eq!(be_cpuset(&topo(), 3, &excluded, &lsr), vec![2, 3, 6]);
    assert_eq!(
        be_cpuset(&topo(), 2, &(0..8).collect(), &lsr),
        Vec::<u32>::new()
    );
}

/// Koordinator's pods in `Test_cpuSuppress_calculateBESuppressCPU`: podA LS (10 cores
/// requested and limited), podB BE (4 batch cores).
fn go_pod(name: &str, uid: &str, qos: &str) -> serde_json::Value {
    let resources = if qos == "LS" {
        serde_json::json!({"requests": {"cpu": "10", "memory": "20G"}, "limits": {"cpu": "10", "memory": "20G"}})
    } else {
        serde_json::json!({"requests": {"kubernetes.io/batch-cpu": "4", "kubernetes.io/batch-memory": "6G"},
            "limits": {"kubernetes.io/batch-cpu": "4", "kubernetes.io/batch-memory": "6G"}})
    };
    serde_json::json!({"metadata": {"name": name, "uid": uid, "namespace": "default",
            "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {"nodeName": "test-node", "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": "Running"}})
}

struct Case {
    name: &'static str,
    node: serde_json::Value,
    node_used: i64,
    pod_metrics: &'static [(&'static str, i64)],
    pods: Vec<serde_json::Value>,
    host_apps: serde_json::Value,
    host_metrics: &'static [(&'static str, i64)],
    min: Option<i64>,
    want: i64,
}

fn states_of(
    node: serde_json::Value,
    pods: Vec<serde_json::Value>,
    apps: serde_json::Value,
) -> States {
    let cg = crate::os::Cgroups::new(
        std::path::Path::new("/nonexistent"),
        crate::os::Version::V1,
        crate::os::Driver::Cgroupfs,
        "",
    );
    let pods = pods
        .into_iter()
        .map(|p| {
            crate::koordlet::informer::PodMeta::new(serde_json::from_value(p).unwrap(), &cg)
                .unwrap()
        })
        .collect();
    let slo =
        serde_json::json!({"metadata": {"name": "test-node0"}, "spec": {"hostApplications": apps}});
    States {
        node: Some(Arc::new(serde_json::from_value(node).unwrap())),
        pods: Arc::new(pods),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        ..Default::default()
    }
}

fn usage_of(node: i64, pods: &[(&str, i64)], apps: &[(&str, i64)]) -> Usage {
    let map = |l: &[(&str, i64)]| l.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    Usage {
        node: Some(node),
        pods: map(pods),
        host_apps: map(apps),
    }
}

fn node_20() -> serde_json::Value {
    serde_json::json!({"metadata": {"name": "test-node0"}, "status": {
        "allocatable": {"cpu": "20", "memory": "40G"}, "capacity": {"cpu": "20", "memory": "40G"}}})
}

/// `Test_cpuSuppress_calculateBESuppressCPU`, case by case (values in cores there, milli here).
#[test]
fn calculate_be_suppress_cpu() {
    // podA LS using 8 cores and podB BE using 2, on a 20-core node using 12.
    let base = |name, want| Case {
        name,
        node: node_20(),
        node_used: 12_000,
        pod_metrics: &[("abc", 8_000), ("def", 2_000)],
        pods: vec![go_pod("podA", "abc", "LS"), go_pod("podB", "def", "BE")],
        host_apps: serde_json::json!([]),
        host_metrics: &[],
        min: None,
        want,
    };
    let cases = [
        Case {
            name: "does not panic on empty (non-nil) input",
            node: serde_json::json!({"metadata": {}}),
            node_used: 0,
            pod_metrics: &[],
            pods: vec![],
            host_apps: serde_json::json!([]),
            host_metrics: &[],
            min: None,
            want: 0,
        },
        Case {
            name: "calculate correctly for missing podMeta or transient metrics",
            node: node_20(),
            node_used: 11_000,
            pod_metrics: &[("abc", 8_000), ("def", 4_000)],
            pods: vec![go_pod("podB", "def", "BE")],
            host_apps: serde_json::json!([]),
            host_metrics: &[],
            min: None,
            want: 6_000,
        },
        base("calculate be suppress cpus correctly", 4_000), // 20*0.7-(12-8-2)-8
        Case {
            host_apps: serde_json::json!([{"name": "test-ls-app", "priority": "koord-prod", "qos": "LS"}]),
            host_metrics: &[("test-ls-app", 1_000)],
            // 20*0.7-(12-8-2-1)-8-1
            ..base(
                "calculate be suppress cpus correctly with ls host app",
                4_000,
            )
        },
        Case {
            host_apps: serde_json::json!([{"name": "test-be-app", "priority": "koord-batch", "qos": "BE",
                "cgroupPath": {"base": "KubepodsBesteffort"}}]),
            host_metrics: &[("test-be-app", 1_000)],
            // 20*0.7-(12-8-2-1)-8 (Koordinator's name for this case, though its app is BE)
            ..base(
                "calculate be suppress cpus correctly with ls host app",
                5_000,
            )
        },
        Case {
            min: Some(60),
            ..base("calculate be suppress cpus with min", 12_000) // 20*0.6
        },
    ];
    for c in cases {
        let states = states_of(c.node, c.pods, c.host_apps);
        let usage = usage_of(c.node_used, c.pod_metrics, c.host_metrics);
        let strategy = ResourceThresholdStrategy {
            cpu_suppress_threshold_percent: Some(70),
            cpu_suppress_min_percent: c.min,
            ..Default::default()
        };
        let i = super::inputs(&states, &usage, &strategy).expect(c.name);
        assert_eq!(suppress_milli(&i), c.want, "{}", c.name);
    }
}

/// `TestCalculateFilterPodsUsed` "calculate for non-BE": a BE host application counts only
/// in the system's share; node reserved 8 is the floor of system used.
#[test]
fn calculate_filter_pods_used_for_non_be() {
    let pod = |name: &str, uid: &str, qos: &str, kube: &str| {
        serde_json::json!({"metadata": {"name": name, "uid": uid, "namespace": "default",
            "labels": {"koordinator.sh/qosClass": qos}}, "spec": {"containers": []},
            "status": {"qosClass": kube}})
    };
    let node = serde_json::json!({"metadata": {"name": "n"}, "status": {
        "capacity": {"cpu": "100"}, "allocatable": {"cpu": "92"}}});
    let apps = serde_json::json!([
        {"name": "ls-app", "priority": "koord-prod", "qos": "LS"},
        {"name": "be-app", "priority": "koord-batch", "qos": "BE", "cgroupPath": {"base": "KubepodsBesteffort"}}]);
    let states = states_of(
        node,
        vec![
            pod("ls-pod", "xxxxxx", "LS", "Burstable"),
            pod("be-pod", "yyyyyy", "BE", "BestEffort"),
        ],
        apps,
    );
    let usage = usage_of(
        80_000,
        &[("xxxxxx", 20_000), ("yyyyyy", 32_000)],
        &[("ls-app", 4_000), ("be-app", 8_000)],
    );
    let i = super::inputs(&states, &usage, &ResourceThresholdStrategy::default()).unwrap();
    assert_eq!(
        (
            i.non_be_pods_milli,
            i.non_be_host_milli,
            i.system_used_milli
        ),
        (20_000, 4_000, 16_000)
    );
}

/// `GetNodeResourceReserved`: the node's reservation annotation counts when it holds back
/// more than the kubelet does (`reservedCPUs` as whole CPUs).
#[test]
fn system_used_floor_is_the_larger_reservation() {
    let node = serde_json::json!({"metadata": {"name": "n", "annotations": {
            "node.koordinator.sh/reservation": "{\"reservedCPUs\":\"0-3\"}"}},
        "status": {"capacity": {"cpu": "20"}, "allocatable": {"cpu": "19"}}});
    let states = states_of(node, vec![], serde_json::json!([]));
    let i = super::inputs(
        &states,
        &usage_of(2_000, &[], &[]),
        &ResourceThresholdStrategy::default(),
    );
    assert_eq!(
        i.unwrap().system_used_milli,
        4_000,
        "4 reserved CPUs over 1 kubelet core"
    );
}
