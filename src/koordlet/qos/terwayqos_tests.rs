//! Koordinator's `terwayqos_test.go` and `types_test.go`, with their names, and the files
//! written and removed as the policy changes.

use super::*;
use crate::api::slo::NodeSLO;
use crate::api::slo::nodeslo::{NetworkQOS, ResourceQOS};
use crate::os::cgroup::{Cgroups, Driver, Version};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::sync::Arc;

fn pod(labels: serde_json::Value, kube_qos: Option<&str>) -> k8s_openapi::api::core::v1::Pod {
    let mut p = serde_json::json!({"metadata": {"name": "p", "labels": labels}});
    if let Some(q) = kube_qos {
        p["status"] = serde_json::json!({"qosClass": q});
    }
    serde_json::from_value(p).unwrap()
}

#[test]
fn parse_quantity_cases() {
    let s = |v: &str| Some(IntOrString::String(v.into()));
    // TestParseQuantityWithNilValue
    assert_eq!(parse_quantity(None, 100), Ok(0));
    // TestParseQuantityWithStringTypeAndValidValue
    assert_eq!(parse_quantity(s("40").as_ref(), 100), Ok(5));
    // TestParseQuantityWithStringTypeAndValueExceedingTotal
    assert!(parse_quantity(s("808").as_ref(), 100).is_err());
    // TestParseQuantityWithIntType
    assert_eq!(parse_quantity(Some(&IntOrString::Int(50)), 100), Ok(50));
}

#[test]
fn pod_priority_cases() {
    // TestPodPriorityWithExistingLabel
    assert_eq!(
        pod_prio(&pod(
            serde_json::json!({"koordinator.sh/qosClass": "BE"}),
            None
        )),
        2
    );
    // TestPodPriorityWithQOS{Guaranteed,Burstable,BestEffort}, TestPodPriorityWithNoQOSClass
    let none = serde_json::json!({});
    assert_eq!(pod_prio(&pod(none.clone(), Some("Guaranteed"))), 1);
    assert_eq!(pod_prio(&pod(none.clone(), Some("Burstable"))), 1);
    assert_eq!(pod_prio(&pod(none.clone(), Some("BestEffort"))), 2);
    assert_eq!(pod_prio(&pod(none, None)), 0);
}

fn enabled_cfg(v: &str) -> NetworkQOSCfg {
    let v = Some(IntOrString::String(v.into()));
    NetworkQOSCfg {
        enable: Some(true),
        network_qos: NetworkQOS {
            ingress_request: v.clone(),
            ingress_limit: v.clone(),
            egress_request: v.clone(),
            egress_limit: v,
        },
    }
}

#[test]
fn parse_qos_cases() {
    // TestParseQoSWithNone / WithDisabled: not enabled, nothing read.
    assert_eq!(netqos::enabled(Some(&NetworkQOSCfg::default())), None);
    // TestParseQoSWithEnabled
    let q = parse_qos(&enabled_cfg("10M"), 100 * 1000 * 1000).unwrap();
    assert_eq!(q[1], 10 * 1000 * 1000 / 8);
}

#[test]
fn parse_net_qos_case() {
    // TestParseNetQoS
    let rq = ResourceQOSStrategy {
        ls_class: Some(ResourceQOS {
            network_qos: Some(enabled_cfg("10M")),
            ..ResourceQOS::default()
        }),
        be_class: Some(ResourceQOS {
            network_qos: Some(enabled_cfg("20M")),
            ..ResourceQOS::default()
        }),
        ..ResourceQOSStrategy::default()
    };
    let system = SystemStrategy {
        total_network_bandwidth: Some(Quantity("100M".into())),
        ..SystemStrategy::default()
    };
    let node = parse_net_qos(Some(&system), &rq).unwrap();
    assert_eq!(node.hw_rx_bps_max, 100 * 1000 * 1000 / 8);
    assert_eq!(node.l1_tx_bps_min, 10 * 1000 * 1000 / 8);
    assert_eq!(node.l2_tx_bps_min, 20 * 1000 * 1000 / 8);
    assert_eq!(node.l1_tx_bps_max, 10 * 1000 * 1000 / 8);
    assert_eq!(node.l2_tx_bps_max, 20 * 1000 * 1000 / 8);
}

#[test]
fn node_marshal_text() {
    let node = Node {
        hw_tx_bps_max: 1,
        l2_rx_bps_max: 10,
        ..Node::default()
    };
    let text = node.text();
    assert!(text.starts_with("hw_tx_bps_max 1\nhw_rx_bps_max 0\noffline_l1_tx_bps_min 0\n"));
    assert!(text.ends_with("offline_l2_rx_bps_max 10\n"));
    assert_eq!(text.lines().count(), 10);
}

fn states(policy: &str) -> States {
    let slo: NodeSLO = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n"},
        "spec": {
            "systemStrategy": {"totalNetworkBandwidth": "100M"},
            "resourceQOSStrategy": {
                "policies": {"netQOSPolicy": policy},
                "beClass": {"networkQOS": {"enable": true, "egressLimit": "20M"}}
            }
        }
    }))
    .unwrap();
    let cgroups = Cgroups::new("/sys/fs/cgroup", Version::V1, Driver::Cgroupfs, "");
    let be: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "be", "namespace": "default", "uid": "u-be",
                     "labels": {"koordinator.sh/qosClass": "BE"},
                     "annotations": {"koordinator.sh/networkQOS": "{\"ingressLimit\": \"8M\", \"egressLimit\": \"16M\"}"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "qosClass": "BestEffort"}
    }))
    .unwrap();
    States {
        pods: Arc::new(vec![PodMeta::new(be, &cgroups).unwrap()]),
        node_slo: Some(Arc::new(slo)),
        ..States::default()
    }
}

#[test]
fn files_follow_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let t = TerwayQos::new(dir.path().join("qos"));
    assert_eq!(t.sync(&states(netqos::POLICY_TERWAY)), Ok(2));
    let node = std::fs::read_to_string(dir.path().join("qos/global_bps_config")).unwrap();
    assert!(node.contains("hw_tx_bps_max 12500000\n"), "{node}");
    assert!(node.contains("offline_l2_tx_bps_max 2500000\n"), "{node}");
    let pods: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("qos/pod.json")).unwrap())
            .unwrap();
    let be = &pods["u-be"];
    assert_eq!(be["podName"], "be");
    assert_eq!(be["podUID"], "u-be");
    assert_eq!(be["prio"], 2);
    assert_eq!(
        be["qosConfig"],
        serde_json::json!({"ingressBandwidth": 1000000, "egressBandwidth": 2000000})
    );
    assert!(
        be["cgroupDir"]
            .as_str()
            .unwrap()
            .starts_with("/sys/fs/cgroup/net_cls/")
    );
    assert_eq!(
        t.sync(&states(netqos::POLICY_TERWAY)),
        Ok(0),
        "unchanged: not rewritten"
    );
    assert_eq!(
        t.sync(&states(netqos::POLICY_TC)),
        Ok(2),
        "another policy: both removed"
    );
    assert!(!dir.path().join("qos/pod.json").exists());
}
