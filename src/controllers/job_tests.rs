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
    let v = pod_from(&j).unwrap();
    assert_eq!(v["metadata"]["labels"]["job-name"], "pi");
    assert_eq!(
        v["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
        "j1"
    );
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Job");
}
