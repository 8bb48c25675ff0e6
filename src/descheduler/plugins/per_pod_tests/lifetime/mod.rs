//! pod_lifetime_test.go.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::spare;
use crate::descheduler::testkit::*;

fn ts(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .to_string()
}

const OLD: &str = "2009-11-10T23:00:00Z";

/// `buildTestPodForNode1(name, creationTime, apply)` (100m), optionally RS-owned.
fn aged(name: &str, created: &str, owned: bool, extra: Value) -> Pod {
    let base = json!({"metadata": {"creationTimestamp": created}});
    let owner = if owned { rs_owner() } else { json!({}) };
    pod(name, 100, 0, "node1", with(&[owner, base, extra]))
}

/// `buildPod(name, "node1", apply)`: 1m / 1 byte, RS-owned, no creation time (age 0).
fn bp(name: &str, extra: Value) -> Pod {
    pod(name, 1, 1, "node1", with(&[rs_owner(), extra]))
}

fn status(v: Value) -> Value {
    json!({"status": v})
}

fn cstate(field: &str, state: Value) -> Value {
    status(
        json!({field: [{"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": state}]}),
    )
}

fn cond(type_: &str, status_: &str, reason: &str, at: Option<i64>) -> Value {
    let mut c = json!({"type": type_, "status": status_, "reason": reason});
    if let Some(ms) = at {
        c["lastTransitionTime"] = json!(ts(ms));
    }
    c
}

mod table;

#[test]
fn pod_life_time_args_are_validated_as_upstream() {
    for (a, want) in [
        (json!({}), "at least one filtering criterion"),
        (json!({"states": ["Sleeping"]}), "states must be one of"),
        (
            json!({"conditions": [{}]}),
            "at least one of type, status, reason",
        ),
        (
            json!({"states": ["Failed"], "ownerKinds": {"include": ["Job"], "exclude": ["ReplicaSet"]}}),
            "only one of Include/Exclude ownerKinds",
        ),
    ] {
        let e = crate::descheduler::plugins::Upstream::new("PodLifeTime", &a)
            .err()
            .expect("refused");
        assert!(e.to_string().contains(want), "{a}: {e}");
    }
}
