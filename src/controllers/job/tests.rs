use serde_json::json;

use super::*;

const NOW: &str = "2026-11-27T00:00:00Z";

fn job(spec: serde_json::Value) -> Job {
    let mut s = spec;
    s["template"] =
        json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}});
    serde_json::from_value(
        json!({"metadata": {"name": "pi", "namespace": "d", "uid": "j1"}, "spec": s}),
    )
    .unwrap()
}

fn pod(name: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "d"},
        "spec": {"containers": []}, "status": {"phase": phase}}))
    .unwrap()
}

#[test]
fn runs_parallelism_pods_until_completions_succeeded() {
    let j = job(json!({"completions": 3, "parallelism": 2}));
    let p = plan(&j, &[], NOW, 0);
    assert_eq!(p.create, 2);
    let (a, b, c) = (
        pod("a", "Succeeded"),
        pod("b", "Succeeded"),
        pod("c", "Running"),
    );
    let p = plan(&j, &[&a, &b, &c], NOW, 0);
    assert_eq!(p.create, 0, "one more needed and it runs");
    let d = pod("d", "Succeeded");
    let p = plan(&j, &[&a, &b, &d], NOW, 0);
    let s = p.status.unwrap();
    assert_eq!(s["succeeded"], 3);
    assert_eq!(s["conditions"][0]["type"], "Complete");
    assert_eq!(s["completionTime"], NOW);
}

#[test]
fn too_many_failures_fail_the_job_and_stop_its_pods() {
    let j = job(json!({"backoffLimit": 1}));
    let (f1, f2, r) = (
        pod("f1", "Failed"),
        pod("f2", "Failed"),
        pod("r", "Running"),
    );
    let p = plan(&j, &[&f1, &f2, &r], NOW, 0);
    assert_eq!(p.create, 0);
    assert_eq!(p.delete, vec!["r"]);
    let s = p.status.unwrap();
    assert_eq!(s["conditions"][0]["type"], "Failed");
    assert_eq!(s["conditions"][0]["reason"], "BackoffLimitExceeded");
    // One failure within the limit: a replacement.
    let p = plan(&j, &[&f1], NOW, 0);
    assert_eq!(p.create, 1);
}

#[test]
fn a_finished_job_expires_after_its_ttl() {
    let mut j = job(json!({"ttlSecondsAfterFinished": 10}));
    j.status = serde_json::from_value(json!({"succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": NOW}]}))
    .unwrap();
    let at = k8s_openapi::jiff::Timestamp::from_second(1_795_737_600).unwrap();
    assert_eq!(at.to_string(), NOW);
    assert!(!plan(&j, &[], NOW, 1_795_737_605).expire);
    assert!(plan(&j, &[], NOW, 1_795_737_610).expire);
}

#[test]
fn suspended_jobs_run_nothing_and_pods_carry_the_job_labels() {
    let j = job(json!({"suspend": true}));
    assert_eq!(plan(&j, &[], NOW, 0).create, 0);
    let v = pod_from(&j, None).unwrap();
    assert_eq!(v["metadata"]["labels"]["job-name"], "pi");
    assert_eq!(
        v["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
        "j1"
    );
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Job");
}

fn with_status(name: &str, phase: &str, status: serde_json::Value) -> Pod {
    let mut p = pod(name, phase);
    let mut s = serde_json::to_value(p.status.take().unwrap()).unwrap();
    crate::api::patch::apply(
        crate::api::patch::PatchType::Merge,
        &s,
        status.to_string().as_bytes(),
    )
    .map(|v| s = v)
    .unwrap();
    p.status = Some(serde_json::from_value(s).unwrap());
    p
}

fn indexed_pod(j: &Job, i: i32, phase: &str) -> Pod {
    let mut v = pod_from(j, Some(i)).unwrap();
    v["metadata"]["name"] = format!("pi-{i}-x").into();
    v["status"] = json!({"phase": phase});
    serde_json::from_value(v).unwrap()
}

#[test]
fn indexed_jobs_run_each_missing_index_and_report_completed_indexes() {
    let j = job(json!({"completions": 5, "parallelism": 2, "completionMode": "Indexed"}));
    let p = plan(&j, &[], NOW, 0);
    assert_eq!(p.indexes, [0, 1]);
    let v = pod_from(&j, Some(3)).unwrap();
    assert_eq!(v["metadata"]["generateName"], "pi-3-");
    assert_eq!(v["metadata"]["annotations"][INDEX], "3");
    assert_eq!(v["metadata"]["labels"][INDEX], "3");
    assert_eq!(v["spec"]["hostname"], "pi-3");
    assert_eq!(
        v["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        format!("metadata.annotations['{INDEX}']")
    );

    let (a, b, c, e) = (
        indexed_pod(&j, 0, "Succeeded"),
        indexed_pod(&j, 1, "Succeeded"),
        indexed_pod(&j, 2, "Running"),
        indexed_pod(&j, 4, "Succeeded"),
    );
    let p = plan(&j, &[&a, &b, &c, &e], NOW, 0);
    assert_eq!(p.indexes, [3], "the one index neither done nor running");
    assert_eq!(p.status.unwrap()["completedIndexes"], "0-1,4");
    let d = indexed_pod(&j, 3, "Succeeded");
    let c = indexed_pod(&j, 2, "Succeeded");
    let s = plan(&j, &[&a, &b, &c, &d, &e], NOW, 0).status.unwrap();
    assert_eq!(s["completedIndexes"], "0-4");
    assert_eq!(s["conditions"][0]["type"], "Complete");
}

#[test]
fn the_active_deadline_fails_the_job() {
    let mut j = job(json!({"activeDeadlineSeconds": 30}));
    j.status = serde_json::from_value(json!({"startTime": NOW})).unwrap();
    let r = pod("r", "Running");
    let start = 1_795_737_600;
    assert!(plan(&j, &[&r], NOW, start + 29).delete.is_empty());
    let p = plan(&j, &[&r], NOW, start + 30);
    assert_eq!(p.delete, ["r"]);
    let s = p.status.unwrap();
    assert_eq!(s["conditions"][0]["reason"], "DeadlineExceeded");
    assert_eq!(
        s["conditions"][0]["message"],
        "Job was active longer than specified deadline"
    );
}

#[test]
fn restarts_under_on_failure_count_against_the_backoff_limit() {
    let mut j = job(json!({"backoffLimit": 2}));
    j.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("OnFailure".into());
    let r = with_status(
        "r",
        "Running",
        json!({"containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 3}]}),
    );
    let s = plan(&j, &[&r], NOW, 0).status.unwrap();
    assert_eq!(s["conditions"][0]["reason"], "BackoffLimitExceeded");
    assert_eq!(s["failed"], 0, "restarts are not failed pods");
}

#[test]
fn pod_failure_policy_fail_job_ignore_and_count() {
    let j = job(json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}}
    ]}}));
    let exited = |name: &str, code: i32| {
        with_status(
            name,
            "Failed",
            json!({"containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": code}}}]}),
        )
    };
    let f42 = exited("f42", 42);
    let s = plan(&j, &[&f42], NOW, 0).status.unwrap();
    assert_eq!(s["conditions"][0]["reason"], "PodFailurePolicy");
    assert_eq!(
        s["conditions"][0]["message"],
        "Container c for pod d/f42 failed with exit code 42 matching FailJob rule at index 0"
    );
    let disrupted = with_status(
        "evicted",
        "Failed",
        json!({"conditions": [{"type": "DisruptionTarget", "status": "True"}]}),
    );
    let p = plan(&j, &[&disrupted], NOW, 0);
    assert_eq!(p.create, 1, "an ignored failure is replaced, not counted");
    assert_eq!(p.status.unwrap()["failed"], 0);
    let f1 = exited("f1", 1);
    let s = plan(&j, &[&f1], NOW, 0).status.unwrap();
    assert_eq!(s["conditions"][0]["reason"], "BackoffLimitExceeded");
}

fn failed_pod(j: &Job, i: i32, n: usize, status: serde_json::Value) -> Pod {
    let mut p = indexed_pod(j, i, "Failed");
    p.metadata.name = Some(format!("pi-{i}-f{n}"));
    let mut s = status;
    s["phase"] = "Failed".into();
    p.status = serde_json::from_value(s).unwrap();
    p
}

#[test]
fn backoff_limit_per_index_fails_an_index_and_the_others_go_on() {
    let j = job(
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "backoffLimitPerIndex": 1}),
    );
    let f1 = failed_pod(&j, 1, 1, json!({}));
    let (a, c) = (
        indexed_pod(&j, 0, "Succeeded"),
        indexed_pod(&j, 2, "Running"),
    );
    let p = plan(&j, &[&a, &f1, &c], NOW, 0);
    assert_eq!(p.indexes, [1], "one failure is within the index's limit");
    assert_eq!(p.index_failures.get(&1), Some(&1));
    let mut v = pod_from(&j, Some(1)).unwrap();
    per_index::annotate(&mut v, &p.index_failures, 1);
    assert_eq!(v["metadata"]["annotations"][per_index::FAILURE_COUNT], "1");
    let s = p.status.unwrap();
    assert_eq!(s["failedIndexes"], "");
    assert!(s.get("conditions").is_none());

    let f2 = failed_pod(&j, 1, 2, json!({}));
    let p = plan(&j, &[&a, &f1, &f2, &c], NOW, 0);
    assert!(p.indexes.is_empty(), "index 1 is failed: not retried");
    assert!(p.delete.is_empty(), "index 2 goes on");
    let s = p.status.unwrap();
    assert_eq!(
        (s["failedIndexes"].as_str(), s["failed"].as_i64()),
        (Some("1"), Some(2))
    );
    assert!(s.get("conditions").is_none(), "not over while index 2 runs");

    let c = indexed_pod(&j, 2, "Succeeded");
    let s = plan(&j, &[&a, &f1, &f2, &c], NOW, 0).status.unwrap();
    assert_eq!(s["completedIndexes"], "0,2");
    assert_eq!(s["conditions"][0]["type"], "Failed");
    assert_eq!(s["conditions"][0]["reason"], "FailedIndexes");
    assert_eq!(s["conditions"][0]["message"], "Job has failed indexes");
}

#[test]
fn max_failed_indexes_and_fail_index_rules() {
    let j = job(
        json!({"completions": 4, "parallelism": 2, "completionMode": "Indexed",
        "backoffLimitPerIndex": 3, "maxFailedIndexes": 0, "podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}]}}),
    );
    let exited = |code: i32| {
        json!({"containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": code}}}]})
    };
    let counted = failed_pod(&j, 0, 1, exited(1));
    let p = plan(&j, &[&counted], NOW, 0);
    assert_eq!(p.indexes, [0, 1], "one failure of three allowed: retried");
    let fail_index = failed_pod(&j, 0, 2, exited(7));
    let r = indexed_pod(&j, 1, "Running");
    let p = plan(&j, &[&counted, &fail_index, &r], NOW, 0);
    assert_eq!(p.delete, ["pi-1-x"], "the Job failed: its pods stop");
    let s = p.status.unwrap();
    assert_eq!(s["failedIndexes"], "0", "FailIndex fails the index at once");
    assert_eq!(s["conditions"][0]["reason"], "MaxFailedIndexesExceeded");
    assert_eq!(
        s["conditions"][0]["message"],
        "Job has exceeded the specified maximal number of failed indexes"
    );
}

#[test]
fn a_per_index_limit_lifts_the_job_wide_default() {
    let j = job(
        json!({"completions": 8, "parallelism": 8, "completionMode": "Indexed",
        "backoffLimitPerIndex": 0}),
    );
    let failed: Vec<Pod> = (0..7).map(|i| failed_pod(&j, i, 0, json!({}))).collect();
    let refs: Vec<&Pod> = failed.iter().collect();
    let s = plan(&j, &refs, NOW, 0).status.unwrap();
    assert_eq!(s["failedIndexes"], "0-6");
    assert!(
        s.get("conditions").is_none(),
        "7 failures pass backoffLimit's default of 6, which does not apply here"
    );
}

#[test]
fn a_success_policy_completes_the_job_early_and_stops_the_rest() {
    let j = job(
        json!({"completions": 5, "parallelism": 5, "completionMode": "Indexed",
        "successPolicy": {"rules": [{"succeededIndexes": "0,2-3", "succeededCount": 2},
            {"succeededCount": 4}]}}),
    );
    let (a, b, c, d) = (
        indexed_pod(&j, 0, "Succeeded"),
        indexed_pod(&j, 1, "Succeeded"),
        indexed_pod(&j, 2, "Running"),
        indexed_pod(&j, 4, "Running"),
    );
    let p = plan(&j, &[&a, &b, &c, &d], NOW, 0);
    assert!(
        p.status.unwrap().get("conditions").is_none(),
        "one of 0,2-3 so far"
    );
    let c = indexed_pod(&j, 2, "Succeeded");
    let p = plan(&j, &[&a, &b, &c, &d], NOW, 0);
    assert_eq!(p.delete, ["pi-4-x"], "the rest stop");
    let s = p.status.unwrap();
    let types: Vec<&str> = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(s["conditions"][1]["reason"], "SuccessPolicy");
    assert_eq!(s["conditions"][1]["message"], "Matched rules at index 0");
    // A count-only rule: any two indexes.
    let only_count = job(
        json!({"completions": 5, "parallelism": 5, "completionMode": "Indexed",
        "successPolicy": {"rules": [{"succeededCount": 2}]}}),
    );
    let (a, b) = (
        indexed_pod(&only_count, 3, "Succeeded"),
        indexed_pod(&only_count, 4, "Succeeded"),
    );
    let s = plan(&only_count, &[&a, &b], NOW, 0).status.unwrap();
    assert_eq!(s["conditions"][1]["message"], "Matched rules at index 0");
}
