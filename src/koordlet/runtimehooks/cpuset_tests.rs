//! Koordinator's `Test_cpusetRule_getContainerCPUSet` table
//! (`pkg/koordlet/runtimehooks/hooks/cpuset/rule_test.go`), case for case with its names.
//! The kube QoS that Koordinator reads from the cgroup parent is the pod's `qosClass` here.

use serde_json::json;

use super::*;

fn pools(list: &[(u32, &str)]) -> Vec<SharedPool> {
    list.iter()
        .map(|(node, set)| SharedPool {
            socket: *node,
            node: *node,
            cpus: crate::api::cpuset::parse(set).unwrap(),
        })
        .collect()
}

struct Case {
    name: &'static str,
    kubelet_static: bool,
    share: &'static [(u32, &'static str)],
    be_share: &'static [(u32, &'static str)],
    system_qos: &'static str,
    qos_label: Option<&'static str>,
    kube_qos: &'static str,
    /// The `resource-status` annotation's value.
    alloc: Option<serde_json::Value>,
    bad_alloc: bool,
    be_cpu_manager: bool,
    want: Result<Option<&'static str>, ()>,
}

const TWO_NODES: &[(u32, &str)] = &[(0, "0-7"), (1, "8-15")];
const LS_LESS_ONE: &[(u32, &str)] = &[(0, "1-7"), (1, "9-15")];

fn base(name: &'static str) -> Case {
    Case {
        name,
        kubelet_static: false,
        share: TWO_NODES,
        be_share: &[],
        system_qos: "",
        qos_label: None,
        kube_qos: "Burstable",
        alloc: None,
        bad_alloc: false,
        be_cpu_manager: false,
        want: Ok(None),
    }
}

fn numa(node: i32, resource: &str, quantity: &str) -> Option<serde_json::Value> {
    Some(json!({"numaNodeResources": [{"node": node, "resources": {resource: quantity}}]}))
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            share: &[(0, "0-7")],
            bad_alloc: true,
            want: Err(()),
            ..base("get cpuset from bad annotation")
        },
        Case {
            share: LS_LESS_ONE,
            be_share: TWO_NODES,
            qos_label: Some("BE"),
            alloc: numa(0, "cpu", "2"),
            be_cpu_manager: true,
            want: Ok(Some("0-7")),
            ..base("get cpuset from annotation be share pool")
        },
        Case {
            alloc: numa(0, "cpu", "2"),
            want: Ok(Some("0-7")),
            ..base("get cpuset from annotation share pool")
        },
        Case {
            qos_label: Some("LS"),
            want: Ok(Some("0-7,8-15")),
            ..base("get all share pools for ls pod")
        },
        Case {
            qos_label: Some("LS"),
            alloc: numa(0, "hugepages-1Gi", "2Gi"),
            want: Ok(Some("0-7,8-15")),
            ..base("get all share pools for ls pod with no cpu numa allocation")
        },
        Case {
            want: Ok(Some("0-7,8-15")),
            ..base("get all share pools for origin burstable pod under none policy")
        },
        Case {
            kubelet_static: true,
            want: Ok(None),
            ..base("do nothing for origin burstable pod under static policy")
        },
        Case {
            kube_qos: "BestEffort",
            want: Ok(Some("")),
            ..base("empty string for origin besteffort pod")
        },
        Case {
            share: LS_LESS_ONE,
            be_share: TWO_NODES,
            qos_label: Some("LS"),
            alloc: numa(1, "cpu", "2"),
            want: Ok(Some("9-15")),
            ..base("get cpuset from annotation ls share pool")
        },
        Case {
            share: LS_LESS_ONE,
            be_share: TWO_NODES,
            qos_label: Some("BE"),
            kube_qos: "BestEffort",
            alloc: numa(1, "kubernetes.io/batch-cpu", "2k"),
            be_cpu_manager: true,
            want: Ok(Some("8-15")),
            ..base("get cpuset from annotation be share pool (batch-cpu)")
        },
        Case {
            share: &[(0, "4-7"), (1, "9-15")],
            be_share: &[(0, "4-7"), (1, "8-15")],
            system_qos: "0-3",
            qos_label: Some("SYSTEM"),
            alloc: numa(1, "hugepages-1Gi", "2Gi"),
            want: Ok(Some("0-3")),
            ..base("get cpuset from annotation system qos resource")
        },
    ]
}

fn pod_of(c: &Case) -> Pod {
    let mut annotations = serde_json::Map::new();
    if c.bad_alloc {
        annotations.insert(
            "scheduling.koordinator.sh/resource-status".into(),
            json!("bad-alloc-fmt"),
        );
    }
    if let Some(a) = &c.alloc {
        annotations.insert(
            "scheduling.koordinator.sh/resource-status".into(),
            json!(a.to_string()),
        );
    }
    let labels = match c.qos_label {
        Some(q) => json!({"koordinator.sh/qosClass": q}),
        None => json!({}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": "test-pod", "labels": labels, "annotations": annotations},
        "status": {"qosClass": c.kube_qos}
    }))
    .unwrap()
}

#[test]
fn cpuset_rule_get_container_cpuset() {
    for c in cases() {
        let rule = CpusetRule {
            kubelet_static: c.kubelet_static,
            share_pools: pools(c.share),
            be_share_pools: pools(c.be_share),
            system_qos_cpuset: c.system_qos.to_string(),
            be_cpu_manager: c.be_cpu_manager,
            ..Default::default()
        };
        let got = rule.container_cpuset(&pod_of(&c));
        match c.want {
            Err(()) => assert!(got.is_err(), "{}: want an error, got {got:?}", c.name),
            Ok(want) => assert_eq!(
                got.unwrap().as_deref(),
                want,
                "{}: cpuset of container should be equal",
                c.name
            ),
        }
    }
}

#[test]
fn pinned_pods_get_their_own_cpus_first() {
    let rule = CpusetRule {
        share_pools: pools(TWO_NODES),
        ..Default::default()
    };
    let c = Case {
        qos_label: Some("LSR"),
        kube_qos: "Guaranteed",
        alloc: Some(
            json!({"cpuset": "2-3", "numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}}]}),
        ),
        ..base("lsr")
    };
    assert_eq!(
        rule.container_cpuset(&pod_of(&c)).unwrap().as_deref(),
        Some("2-3")
    );
}
