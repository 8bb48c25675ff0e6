//! pod_life_time_test.go's table.

use super::*;

#[test]
fn pod_life_time() {
    let now = NOW_MS;
    let newer = ts(now);
    let one = || vec![node("node1", 2000, 3000, 10, json!({})), spare()];
    let max = |extra: Value| with(&[json!({"maxPodLifeTimeSeconds": 600}), extra]);
    let pending = |name: &str, extra: Value| {
        aged(
            name,
            OLD,
            true,
            with(&[status(json!({"phase": "Pending"})), extra]),
        )
    };
    let pvc = json!({"spec": {"volumes": [{"name": "pvc", "persistentVolumeClaim": {"claimName": "foo"}}]}});
    let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
    let old_t = Some(now - 2 * 3600 * 1000);
    let new_t = Some(now - 60 * 1000);
    let job = json!({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job1", "uid": ""}]}});
    let failed = status(json!({"phase": "Failed"}));
    let lim = |k: &str, v: u32| json!({k: v});
    // (description, args, pods, evictor args, limits, want count, want pods)
    let cases: Vec<(&str, Value, Vec<Pod>, Value, Value, usize, &[&str])> = vec![
        (
            "No pod should be evicted since pod terminating",
            max(json!({"labelSelector": {"matchLabels": {"foo": "bar"}}})),
            vec![
                aged("p14", OLD, true, deleting.clone()),
                aged("p15", OLD, true, deleting),
            ],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "Does not evict pvc pods with ignorePvcPods set to true",
            max(json!({})),
            vec![aged("p11", OLD, true, pvc.clone())],
            json!({"ignorePvcPods": true}),
            json!({}),
            0,
            &[],
        ),
        (
            "Evicts pvc pods with ignorePvcPods set to false (or unset)",
            max(json!({})),
            vec![aged("p11", OLD, true, pvc)],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "1 pod matching label selector should be evicted",
            max(json!({"labelSelector": {"matchLabels": {"foo": "bar"}}})),
            vec![
                aged(
                    "p12",
                    OLD,
                    true,
                    json!({"metadata": {"labels": {"foo": "bar"}}}),
                ),
                aged(
                    "p13",
                    OLD,
                    true,
                    json!({"metadata": {"labels": {"foo": "bar1"}}}),
                ),
            ],
            json!({}),
            json!({}),
            1,
            &["p12"],
        ),
        (
            "2 Oldest pods should be evicted when maxPodsToEvictPerNode and maxPodsToEvictPerNamespace are not set",
            max(json!({})),
            vec![
                aged("p1", &newer, true, json!({})),
                aged("p2", OLD, true, json!({})),
                pending("p9", json!({})),
            ],
            json!({}),
            json!({}),
            2,
            &["p2", "p9"],
        ),
        (
            "1 Oldest pod should be evicted when maxPodsToEvictPerNamespace is set to 1",
            max(json!({})),
            vec![
                aged("p1", &newer, true, json!({})),
                aged("p2", OLD, true, json!({})),
            ],
            json!({}),
            lim("maxNoOfPodsToEvictPerNamespace", 1),
            1,
            &["p2"],
        ),
        (
            "1 Oldest pod should be evicted when maxPodsToEvictTotal is set to 1",
            max(json!({})),
            vec![
                aged("p1", &newer, true, json!({})),
                aged("p2", OLD, true, json!({})),
            ],
            json!({}),
            json!({"maxNoOfPodsToEvictPerNamespace": 2, "maxNoOfPodsToEvictTotal": 1}),
            1,
            &["p2"],
        ),
        (
            "1 Oldest pod should be evicted when maxPodsToEvictPerNode is set to 1",
            max(json!({})),
            vec![
                aged("p1", &newer, true, json!({})),
                aged("p2", OLD, true, json!({})),
            ],
            json!({}),
            lim("maxNoOfPodsToEvictPerNode", 1),
            1,
            &["p2"],
        ),
        (
            "Two pods, one with ContainerCreating state. 1 should be evicted.",
            max(json!({"states": ["ContainerCreating"]})),
            vec![
                pending("p9", json!({})),
                aged(
                    "container-creating-stuck",
                    OLD,
                    true,
                    cstate(
                        "containerStatuses",
                        json!({"waiting": {"reason": "ContainerCreating"}}),
                    ),
                ),
            ],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "1 pod with container status CrashLoopBackOff should be evicted",
            max(json!({"states": ["CrashLoopBackOff"]})),
            vec![pending(
                "p9",
                cstate(
                    "containerStatuses",
                    json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "1 pod with init container status CreateContainerError should not be evicted without includingInitContainers",
            max(json!({"states": ["CreateContainerError"]})),
            vec![pending(
                "p9",
                cstate(
                    "initContainerStatuses",
                    json!({"waiting": {"reason": "CreateContainerError"}}),
                ),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "1 pod with init container status CreateContainerError should be evicted with includingInitContainers",
            max(json!({"states": ["CreateContainerError"], "includingInitContainers": true})),
            vec![pending(
                "p9",
                cstate(
                    "initContainerStatuses",
                    json!({"waiting": {"reason": "CreateContainerError"}}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "1 pod with ephemeral container status CreateContainerError should not be evicted without includingEphemeralContainers",
            max(json!({"states": ["CreateContainerError"]})),
            vec![pending(
                "p9",
                cstate(
                    "ephemeralContainerStatuses",
                    json!({"waiting": {"reason": "CreateContainerError"}}),
                ),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "1 pod with ephemeral container status CreateContainerError should be evicted with includingEphemeralContainers",
            max(json!({"states": ["CreateContainerError"], "includingEphemeralContainers": true})),
            vec![pending(
                "p9",
                cstate(
                    "ephemeralContainerStatuses",
                    json!({"waiting": {"reason": "CreateContainerError"}}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "1 pod with pod status reason NodeLost should be evicted",
            max(json!({"states": ["NodeLost"]})),
            vec![pending("p9", status(json!({"reason": "NodeLost"})))],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "Two pods in the default namespace, 1 is new and 1 very is old. 1 should be evicted.",
            max(json!({})),
            vec![
                aged("p1", &newer, true, json!({})),
                aged("p2", OLD, true, json!({})),
            ],
            json!({}),
            json!({}),
            1,
            &["p2"],
        ),
        (
            "Two pods in the default namespace, 2 are new and 0 are old. 0 should be evicted.",
            max(json!({})),
            vec![
                aged("p3", &newer, true, json!({})),
                aged("p4", &newer, true, json!({})),
            ],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "Two pods in the default namespace, 1 created 605 seconds ago. 1 should be evicted.",
            max(json!({})),
            vec![
                aged("p5", &newer, true, json!({})),
                aged("p6", &ts(now - 605_000), true, json!({})),
            ],
            json!({}),
            json!({}),
            1,
            &["p6"],
        ),
        (
            "Two pods in the default namespace, 1 created 595 seconds ago. 0 should be evicted.",
            max(json!({})),
            vec![
                aged("p7", &newer, false, json!({})),
                aged("p8", &ts(now - 595_000), false, json!({})),
            ],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "Two old pods with different states. 1 should be evicted.",
            max(json!({"states": ["Pending"]})),
            vec![
                pending("p9", json!({})),
                aged("p10", OLD, true, status(json!({"phase": "Running"}))),
            ],
            json!({}),
            json!({}),
            1,
            &["p9"],
        ),
        (
            "1 pod with pod status phase v1.PodSucceeded should be evicted",
            max(json!({"states": ["Succeeded"]})),
            vec![aged(
                "p16",
                OLD,
                true,
                status(json!({"phase": "Succeeded"})),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "evict pod with matching terminated reason via states",
            json!({"states": ["NodeAffinity"]}),
            vec![bp(
                "p1",
                with(&[
                    failed.clone(),
                    cstate(
                        "containerStatuses",
                        json!({"terminated": {"reason": "NodeAffinity", "exitCode": 0}}),
                    ),
                ]),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "evict pod with matching pod status reason via states",
            json!({"states": ["Shutdown"]}),
            vec![bp(
                "p1",
                status(json!({"phase": "Failed", "reason": "Shutdown"})),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "states does not match terminated reason on init container without flag",
            json!({"states": ["CreateContainerConfigError"]}),
            vec![bp(
                "p1",
                cstate(
                    "initContainerStatuses",
                    json!({"terminated": {"reason": "CreateContainerConfigError", "exitCode": 0}}),
                ),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "evict pod with matching condition reason",
            json!({"conditions": [{"reason": "PodCompleted", "status": "True"}]}),
            vec![
                bp(
                    "p1",
                    status(
                        json!({"conditions": [cond("Initialized", "True", "PodCompleted", old_t)]}),
                    ),
                ),
                bp(
                    "p2",
                    status(
                        json!({"conditions": [cond("Initialized", "True", "OtherReason", old_t)]}),
                    ),
                ),
            ],
            json!({}),
            json!({}),
            1,
            &["p1"],
        ),
        (
            "evict pod matching condition type only",
            json!({"conditions": [{"type": "Ready"}]}),
            vec![bp(
                "p1",
                status(json!({"conditions": [cond("Ready", "False", "", old_t)]})),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "no matching conditions, 0 evictions",
            json!({"conditions": [{"reason": "PodCompleted"}]}),
            vec![bp(
                "p1",
                status(json!({"conditions": [cond("Ready", "True", "SomethingElse", None)]})),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "evict pod with old transition time",
            json!({"states": ["Succeeded"], "conditions": [{"reason": "PodCompleted", "status": "True", "minTimeSinceLastTransitionSeconds": 300}]}),
            vec![bp(
                "p1",
                status(
                    json!({"phase": "Succeeded", "conditions": [cond("Initialized", "True", "PodCompleted", old_t), cond("Ready", "False", "PodCompleted", old_t)]}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &["p1"],
        ),
        (
            "do not evict pod with recent transition time",
            json!({"states": ["Succeeded"], "conditions": [{"minTimeSinceLastTransitionSeconds": 14400}]}),
            vec![bp(
                "p1",
                status(
                    json!({"phase": "Succeeded", "conditions": [cond("Ready", "False", "", new_t)]}),
                ),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "transition time scoped to matching conditions only",
            json!({"conditions": [{"reason": "PodCompleted", "minTimeSinceLastTransitionSeconds": 300}]}),
            vec![bp(
                "p1",
                status(
                    json!({"conditions": [cond("Initialized", "", "PodCompleted", old_t), cond("Ready", "", "OtherReason", new_t)]}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &["p1"],
        ),
        (
            "no conditions on pod, transition time filter returns false",
            json!({"states": ["Running"], "conditions": [{"minTimeSinceLastTransitionSeconds": 300}]}),
            vec![bp("p1", status(json!({"phase": "Running"})))],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "exclude Job owner kind: Job-owned pod not evicted",
            json!({"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}}),
            vec![bp("p1", with(&[failed.clone(), job.clone()]))],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "exclude Job owner kind: non-Job pod still evicted",
            json!({"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}}),
            vec![
                bp("p1", with(&[failed.clone(), job.clone()])),
                bp("p2", failed.clone()),
            ],
            json!({}),
            json!({}),
            1,
            &["p2"],
        ),
        (
            "include only Job owner kind",
            json!({"states": ["Failed"], "ownerKinds": {"include": ["Job"]}}),
            vec![
                bp("p1", with(&[failed.clone(), job])),
                bp("p2", failed.clone()),
            ],
            json!({}),
            json!({}),
            1,
            &["p1"],
        ),
        (
            "states matches terminated reason on ephemeral container",
            json!({"states": ["OOMKilled"], "includingEphemeralContainers": true}),
            vec![bp(
                "p1",
                cstate(
                    "ephemeralContainerStatuses",
                    json!({"terminated": {"reason": "OOMKilled", "exitCode": 137}}),
                ),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "states does not match ephemeral container without flag",
            json!({"states": ["OOMKilled"]}),
            vec![bp(
                "p1",
                cstate(
                    "ephemeralContainerStatuses",
                    json!({"terminated": {"reason": "OOMKilled", "exitCode": 137}}),
                ),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
        (
            "evict pod with matching exit code",
            json!({"states": ["Failed"], "exitCodes": [1]}),
            vec![bp(
                "p1",
                with(&[
                    failed.clone(),
                    cstate("containerStatuses", json!({"terminated": {"exitCode": 1}})),
                ]),
            )],
            json!({}),
            json!({}),
            1,
            &[],
        ),
        (
            "exit code not matched, 0 evictions",
            json!({"states": ["Failed"], "exitCodes": [2]}),
            vec![bp(
                "p1",
                with(&[
                    failed,
                    cstate("containerStatuses", json!({"terminated": {"exitCode": 1}})),
                ]),
            )],
            json!({}),
            json!({}),
            0,
            &[],
        ),
    ];
    for (description, a, pods, evictor, top, want, want_pods) in cases {
        let r = pass_with("PodLifeTime", "deschedule", a, evictor, top, one(), pods);
        let got = evicted(&r);
        assert_eq!(got.len(), want, "{description}: {got:?}");
        for p in want_pods {
            assert!(
                got.iter().any(|g| g == p),
                "{description}: {p} not evicted ({got:?})"
            );
        }
    }
}
