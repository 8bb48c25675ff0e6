//! `TestRemoveFailedPods`.

// The tables are upstream's, one tuple per case.
#![allow(clippy::type_complexity)]

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{count, spare};
use crate::descheduler::testkit::*;

/// `newPodStatus(reason, phase, initContainerState, containerState)` on upstream's failed pod
/// (1m / 1 byte, owned by a ReplicaSet).
fn failed_pod(
    name: &str,
    node_name: &str,
    reason: &str,
    init: Option<Value>,
    regular: Option<Value>,
    deleting: bool,
) -> Pod {
    let mut status = json!({"phase": "Failed"});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    if let Some(s) = init {
        status["initContainerStatuses"] = json!([{"name": "i", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": s}]);
    }
    if let Some(s) = regular {
        status["containerStatuses"] = json!([{"name": "c", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": s}]);
    }
    let mut extra = with(&[rs_owner(), json!({"status": status})]);
    if deleting {
        extra["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    pod(name, 1, 1, node_name, extra)
}

fn term(reason: &str, code: i32) -> Value {
    json!({"terminated": {"reason": reason, "exitCode": code}})
}

fn term_code(code: i32) -> Value {
    json!({"terminated": {"exitCode": code}})
}

fn waiting(reason: &str) -> Value {
    json!({"waiting": {"reason": reason}})
}

#[test]
fn remove_failed_pods() {
    let n1 = || node("node1", 2000, 3000, 10, json!({}));
    let one = || vec![n1(), spare()];
    let fp = |name: &str, init: Option<Value>, c: Option<Value>| {
        failed_pod(name, "node1", "", init, c, false)
    };
    let args = |init: bool, reasons: &[&str], codes: &[i32], kinds: &[&str], min: Option<u64>| json!({"includingInitContainers": init, "reasons": reasons, "exitCodes": codes, "excludeOwnerKinds": kinds, "minPodLifetimeSeconds": min});
    let none = || args(false, &[], &[], &[], None);
    let cases: Vec<(&str, Value, Vec<Node>, Vec<Pod>, bool, usize)> = vec![
        (
            "default empty args, 0 failures, 0 evictions",
            json!({}),
            one(),
            vec![],
            false,
            0,
        ),
        ("0 failures, 0 evictions", none(), one(), vec![], false, 0),
        (
            "1 container terminated with reason NodeAffinity, 1 eviction",
            none(),
            one(),
            vec![fp("p1", None, Some(term("NodeAffinity", 0)))],
            false,
            1,
        ),
        (
            "1 container terminated with exitCode 1, 1 eviction",
            args(false, &[], &[1], &[], None),
            one(),
            vec![fp("p1", None, Some(term_code(1)))],
            false,
            1,
        ),
        (
            "1 container terminated with exitCode 1, reason NodeAffinity, 1 eviction",
            args(false, &[], &[1], &[], None),
            one(),
            vec![fp("p1", None, Some(term("NodeAffinity", 1)))],
            false,
            1,
        ),
        (
            "1 container terminated with exitCode 1, expected exitCode 2, 0 eviction",
            args(false, &[], &[2], &[], None),
            one(),
            vec![fp("p1", None, Some(term_code(1)))],
            false,
            0,
        ),
        (
            "2 containers terminated with exitCode 1 and 2 respectively, 2 evictions",
            args(false, &[], &[1, 2, 3], &[], None),
            one(),
            vec![
                fp("p1", None, Some(term_code(1))),
                fp("p2", None, Some(term_code(2))),
            ],
            false,
            2,
        ),
        (
            "2 containers terminated with exitCode 1 and 2 respectively, expected exitCode 1, 1 eviction",
            args(false, &[], &[1], &[], None),
            one(),
            vec![
                fp("p1", None, Some(term_code(1))),
                fp("p2", None, Some(term_code(2))),
            ],
            false,
            1,
        ),
        (
            "1 init container terminated with reason NodeAffinity, 1 eviction",
            args(true, &[], &[], &[], None),
            one(),
            vec![fp("p1", Some(term("NodeAffinity", 0)), None)],
            false,
            1,
        ),
        (
            "1 init container terminated with exitCode 1, 1 eviction",
            args(true, &[], &[1], &[], None),
            one(),
            vec![fp("p1", None, Some(term_code(1)))],
            false,
            1,
        ),
        (
            "1 init container terminated with exitCode 2, expected 1, 0 eviction",
            args(true, &[], &[1], &[], None),
            one(),
            vec![fp("p1", None, Some(term_code(2)))],
            false,
            0,
        ),
        (
            "1 init container waiting with reason CreateContainerConfigError, 1 eviction",
            args(true, &[], &[], &[], None),
            one(),
            vec![fp("p1", Some(waiting("CreateContainerConfigError")), None)],
            false,
            1,
        ),
        (
            "2 init container waiting with reason CreateContainerConfigError, 2 nodes, 2 evictions",
            args(true, &[], &[], &[], None),
            vec![n1(), node("node2", 2000, 3000, 10, json!({}))],
            vec![
                fp("p1", Some(term("CreateContainerConfigError", 0)), None),
                failed_pod(
                    "p2",
                    "node2",
                    "",
                    Some(term("CreateContainerConfigError", 0)),
                    None,
                    false,
                ),
            ],
            false,
            2,
        ),
        (
            "include reason=CreateContainerConfigError, 1 container terminated with reason CreateContainerConfigError, 1 eviction",
            args(false, &["CreateContainerConfigError"], &[], &[], None),
            one(),
            vec![fp("p1", None, Some(term("CreateContainerConfigError", 0)))],
            false,
            1,
        ),
        (
            "include reason=CreateContainerConfigError+NodeAffinity, 1 container terminated with reason CreateContainerConfigError, 1 eviction",
            args(
                false,
                &["CreateContainerConfigError", "NodeAffinity"],
                &[],
                &[],
                None,
            ),
            one(),
            vec![fp("p1", None, Some(term("CreateContainerConfigError", 0)))],
            false,
            1,
        ),
        (
            "include reason=CreateContainerConfigError, 1 container terminated with reason NodeAffinity, 0 eviction",
            args(false, &["CreateContainerConfigError"], &[], &[], None),
            one(),
            vec![fp("p1", None, Some(term("NodeAffinity", 0)))],
            false,
            0,
        ),
        (
            "include init container=false, 1 init container waiting with reason CreateContainerConfigError, 0 eviction",
            args(false, &["CreateContainerConfigError"], &[], &[], None),
            one(),
            vec![fp("p1", Some(waiting("CreateContainerConfigError")), None)],
            false,
            0,
        ),
        (
            "lifetime 1 hour, 1 container terminated with reason NodeAffinity, 0 eviction",
            args(false, &[], &[], &[], Some(3600)),
            one(),
            vec![fp("p1", None, Some(term("NodeAffinity", 0)))],
            false,
            0,
        ),
        (
            "nodeFit=true, 1 unschedulable node, 1 container terminated with reason NodeAffinity, 0 eviction",
            none(),
            vec![
                n1(),
                node(
                    "node2",
                    2000,
                    2000,
                    10,
                    json!({"spec": {"unschedulable": true}}),
                ),
            ],
            vec![fp("p1", None, Some(term("NodeAffinity", 0)))],
            true,
            0,
        ),
        (
            "nodeFit=true, only available node does not have enough resources, 1 container terminated with reason CreateContainerConfigError, 0 eviction",
            args(false, &["CreateContainerConfigError"], &[], &[], None),
            vec![
                node("node1", 1, 1, 10, json!({})),
                node("node2", 0, 0, 10, json!({})),
            ],
            vec![fp("p1", None, Some(term("CreateContainerConfigError", 0)))],
            true,
            0,
        ),
        (
            "excluded owner kind=ReplicaSet, 1 init container terminated with owner kind=ReplicaSet, 0 eviction",
            args(true, &[], &[], &["ReplicaSet"], None),
            one(),
            vec![fp("p1", Some(term("NodeAffinity", 0)), None)],
            false,
            0,
        ),
        (
            "excluded owner kind=DaemonSet, 1 init container terminated with owner kind=ReplicaSet, 1 eviction",
            args(true, &[], &[], &["DaemonSet"], None),
            one(),
            vec![fp("p1", Some(term("NodeAffinity", 0)), None)],
            false,
            1,
        ),
        (
            "excluded owner kind=DaemonSet, 1 init container terminated with owner kind=ReplicaSet, 1 pod in termination; nothing should be moved",
            args(true, &[], &[], &["DaemonSet"], None),
            one(),
            vec![failed_pod(
                "p1",
                "node1",
                "",
                Some(term("NodeAffinity", 0)),
                None,
                true,
            )],
            false,
            0,
        ),
        (
            "1 container terminated with reason ShutDown, 0 evictions",
            none(),
            one(),
            vec![failed_pod("p1", "node1", "Shutdown", None, None, false)],
            true,
            0,
        ),
        (
            "include reason=Shutdown, 2 containers terminated with reason ShutDown, 2 evictions",
            args(false, &["Shutdown"], &[], &[], None),
            one(),
            vec![
                failed_pod("p1", "node1", "Shutdown", None, None, false),
                failed_pod("p2", "node1", "Shutdown", None, None, false),
            ],
            false,
            2,
        ),
    ];
    for (description, a, nodes, pods, node_fit, want) in cases {
        let got = count(
            "RemoveFailedPods",
            a,
            json!({"nodeFit": node_fit}),
            json!({}),
            nodes,
            pods,
        );
        assert_eq!(got, want, "{description}");
    }
}
