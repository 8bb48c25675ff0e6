//! Koordinator's `hooks/tc/helper_test.go` tables, with their names.

use super::*;
use crate::api::slo::nodeslo::{NetworkQOS, ResourceQOS};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn ls(enable: bool, ingress_request: IntOrString) -> ResourceQOSStrategy {
    ResourceQOSStrategy {
        ls_class: Some(ResourceQOS {
            network_qos: Some(NetworkQOSCfg {
                enable: Some(enable),
                network_qos: NetworkQOS {
                    ingress_request: Some(ingress_request),
                    ..NetworkQOS::default()
                },
            }),
            ..ResourceQOS::default()
        }),
        ..ResourceQOSStrategy::default()
    }
}

fn total(q: &str) -> SystemStrategy {
    SystemStrategy {
        total_network_bandwidth: Some(Quantity(q.into())),
        ..SystemStrategy::default()
    }
}

#[test]
fn load_config_from_node_slo() {
    let hw = |c: NetQosGlobalConfig| NetQosGlobalConfig {
        hw_tx_bps_max: 100_000_000,
        hw_rx_bps_max: 100_000_000,
        ..c
    };
    let only_enable = ResourceQOSStrategy {
        ls_class: Some(ResourceQOS {
            network_qos: Some(NetworkQOSCfg {
                enable: Some(true),
                ..NetworkQOSCfg::default()
            }),
            ..ResourceQOS::default()
        }),
        ..ResourceQOSStrategy::default()
    };
    let system = total("100M");
    let cases: Vec<(
        &str,
        Option<&SystemStrategy>,
        ResourceQOSStrategy,
        NetQosGlobalConfig,
    )> = vec![
        (
            "nodeslo.spec is nil",
            None,
            ResourceQOSStrategy::default(),
            NetQosGlobalConfig::default(),
        ),
        (
            "network qos is nil",
            None,
            only_enable,
            NetQosGlobalConfig::default(),
        ),
        (
            "network config not enable to be set",
            Some(&system),
            ls(false, IntOrString::Int(10)),
            hw(NetQosGlobalConfig::default()),
        ),
        (
            "total network bandwidth not been set",
            None,
            ls(true, IntOrString::Int(10)),
            NetQosGlobalConfig::default(),
        ),
        (
            "get network config from a int value",
            Some(&system),
            ls(true, IntOrString::Int(10)),
            hw(NetQosGlobalConfig {
                l1_rx_bps_min: 10_000_000,
                ..NetQosGlobalConfig::default()
            }),
        ),
        (
            "get network config from a string value",
            Some(&system),
            ls(true, IntOrString::String("10M".into())),
            hw(NetQosGlobalConfig {
                l1_rx_bps_min: 10_000_000,
                ..NetQosGlobalConfig::default()
            }),
        ),
    ];
    for (name, system, rq, want) in cases {
        assert_eq!(load_config(system, &rq), want, "{name}");
    }
}

#[test]
fn get_bandwidth_val() {
    let s = |v: &str| Some(IntOrString::String(v.into()));
    let cases = [
        ("input is nil", 1000, None, 0),
        (
            "percentage value less than 0",
            1000,
            Some(IntOrString::Int(-1)),
            0,
        ),
        (
            "percentage value is zero",
            1000,
            Some(IntOrString::Int(0)),
            0,
        ),
        (
            "percentage value over 100",
            1000,
            Some(IntOrString::Int(200)),
            0,
        ),
        ("valid percentage", 1000, Some(IntOrString::Int(10)), 100),
        ("invalid quantity format", 1000, s("aaa"), 0),
        ("quantity string is nil", 1000, s(""), 0),
        ("valid string format", 10000, s("2k"), 2000),
    ];
    for (name, total, v, want) in cases {
        assert_eq!(bandwidth_val(total, v.as_ref()), want, "{name}");
    }
}

#[test]
fn pod_annotation_limits_in_bytes() {
    // terwayqos_test.go: TestGetPodQoSWith{Valid,Invalid,No}Annotation.
    let valid = r#"{"IngressLimit": "1000", "EgressLimit": "2000"}"#;
    assert_eq!(pod_limits(Some(valid)), Ok((125, 250)));
    let invalid = r#"{"IngressLimit": "invalid", "EgressLimit": "2000"}"#;
    assert!(pod_limits(Some(invalid)).is_err());
    assert_eq!(pod_limits(None), Ok((0, 0)));
    assert_eq!(
        pod_limits(Some(r#"{"egressLimit": "80M"}"#)),
        Ok((0, 10_000_000)),
        "an absent limit is none (tc's getIngressAndEgress defaults to \"0\")"
    );
}

#[test]
fn the_policy_defaults_to_tc() {
    assert_eq!(policy(&ResourceQOSStrategy::default()), POLICY_TC);
    let rq = ResourceQOSStrategy {
        policies: Some(crate::api::slo::nodeslo::ResourceQOSPolicies {
            net_qos_policy: Some(POLICY_TERWAY.into()),
            ..Default::default()
        }),
        ..ResourceQOSStrategy::default()
    };
    assert_eq!(policy(&rq), POLICY_TERWAY);
}
