//! Koordinator's `TestEvaluateQuota` (evaluate_quota_test.go) and the evaluator's
//! `cpu exceed` / `gpu exceed` cases, with their names and reasons.

use crate::manager::features;
use serde_json::{Value, json};

use super::*;
use crate::manager::webhook::lookup::Fixed;
use crate::manager::webhook::test_util::{handlers, handlers_with, request};

fn quota(max: Value, child_request: Option<Value>, admission: Option<Value>) -> ElasticQuota {
    let mut ann = serde_json::Map::new();
    if let Some(c) = child_request {
        ann.insert(ANNOTATION_QUOTA_CHILD_REQUEST.into(), c.to_string().into());
    }
    if let Some(a) = admission {
        ann.insert(
            "quota.scheduling.koordinator.sh/admission".into(),
            a.to_string().into(),
        );
    }
    serde_json::from_value(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota", "metadata": {"name": "quota1", "namespace": "kube-system",
        "annotations": ann}, "spec": {"max": max}}))
    .unwrap()
}

fn pod(requests: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "pod1", "namespace": "ns1",
        "labels": {LABEL_QUOTA_NAME: "quota1"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}))
    .unwrap()
}

fn resources(v: Value) -> Amounts {
    let list: BTreeMap<String, Quantity> = serde_json::from_value(v).unwrap();
    amounts(Some(&list))
}

#[test]
fn koordinators_evaluate_quota_cases() {
    let cm = json!({"cpu": "2", "memory": "4Gi"});
    let max = json!({"cpu": "4", "memory": "8Gi"});
    let batch = json!({"kubernetes.io/batch-cpu": "4", "kubernetes.io/batch-memory": "8Gi"});
    type Case = (
        &'static str,
        ElasticQuota,
        Value,
        Result<Option<Value>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "normal case 1",
            quota(max.clone(), None, None),
            cm.clone(),
            Ok(Some(json!({"cpu": "2", "memory": "4Gi"}))),
        ),
        (
            "normal case 2",
            quota(
                max.clone(),
                Some(json!({"cpu": "2", "memory": "2Gi"})),
                None,
            ),
            cm.clone(),
            Ok(Some(json!({"cpu": "4", "memory": "6Gi"}))),
        ),
        (
            "cpu exceeded max",
            quota(
                max.clone(),
                Some(json!({"cpu": "4", "memory": "2Gi"})),
                None,
            ),
            cm.clone(),
            Err(
                "exceeded quota: kube-system/quota1, requested: cpu=2, used: cpu=4, limited: cpu=4",
            ),
        ),
        (
            "cpu and memory exceeded max",
            quota(
                max.clone(),
                Some(json!({"cpu": "4", "memory": "8Gi"})),
                None,
            ),
            cm.clone(),
            Err(
                "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: cpu=4,memory=8Gi, limited: cpu=4,memory=8Gi",
            ),
        ),
        (
            "cpu exceeded max, but not admission",
            quota(
                max.clone(),
                Some(json!({"cpu": "4", "memory": "2Gi"})),
                Some(json!({"cpu": "8", "memory": "16Gi"})),
            ),
            cm.clone(),
            Ok(Some(json!({"cpu": "6", "memory": "6Gi"}))),
        ),
        (
            "cpu and memory exceeded max, but not admission",
            quota(
                max.clone(),
                Some(json!({"cpu": "4", "memory": "8Gi"})),
                Some(json!({"cpu": "8", "memory": "16Gi"})),
            ),
            cm.clone(),
            Ok(Some(json!({"cpu": "6", "memory": "12Gi"}))),
        ),
        (
            "quota has batch cpu, pod not",
            quota(batch.clone(), Some(batch.clone()), None),
            cm.clone(),
            Ok(None),
        ),
        (
            "quota has batch cpu, pod has and exceeded",
            quota(batch.clone(), Some(batch.clone()), None),
            json!({"kubernetes.io/batch-cpu": "1", "kubernetes.io/batch-memory": "2Gi"}),
            Err(
                "exceeded quota: kube-system/quota1, requested: kubernetes.io/batch-cpu=1,kubernetes.io/batch-memory=2Gi, used: kubernetes.io/batch-cpu=4,kubernetes.io/batch-memory=8Gi, limited: kubernetes.io/batch-cpu=4,kubernetes.io/batch-memory=8Gi",
            ),
        ),
        (
            "admission not set, use max by default",
            quota(json!({"cpu": "1", "memory": "2Gi"}), None, None),
            cm.clone(),
            Err(
                "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=1,memory=2Gi",
            ),
        ),
        (
            "admission set empty, use max by default",
            quota(json!({"cpu": "1", "memory": "2Gi"}), None, Some(json!({}))),
            cm.clone(),
            Err(
                "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=1,memory=2Gi",
            ),
        ),
        (
            "admission set zero explicitly",
            quota(
                max.clone(),
                None,
                Some(json!({"cpu": "0", "memory": "0Gi"})),
            ),
            cm.clone(),
            Err(
                "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=0,memory=0",
            ),
        ),
        (
            "admission set zero for non-related resource",
            quota(max.clone(), None, Some(json!({"nvidia.com/gpu": "0"}))),
            cm.clone(),
            Ok(Some(json!({"cpu": "2", "memory": "4Gi"}))),
        ),
        (
            "gpu exceed",
            quota(
                json!({"nvidia.com/gpu": "2"}),
                Some(json!({"nvidia.com/gpu": "2"})),
                None,
            ),
            json!({"nvidia.com/gpu": "2"}),
            Err(
                "exceeded quota: kube-system/quota1, requested: nvidia.com/gpu=2, used: nvidia.com/gpu=2, limited: nvidia.com/gpu=2",
            ),
        ),
    ];
    for (name, q, requests, want) in cases {
        let got = admit(&q, &pod(requests));
        let want = want.map(|u| u.map(resources)).map_err(str::to_string);
        assert_eq!(got.map_err(|e| e.to_string()), want, "{name}");
    }
}

#[test]
fn quota_not_found_and_which_requests_are_evaluated() {
    let q = std::sync::Arc::new(quota(json!({"cpu": "4"}), None, None));
    let fixed = Fixed {
        quotas: vec![q],
        ..Fixed::default()
    };
    let h = handlers(fixed.clone());
    assert_eq!(
        namespace_of(&h, "quota2").map_err(|e| e.to_string()),
        Err("elastic quota quota2 not found".into())
    );
    assert_eq!(namespace_of(&h, "quota1"), Ok("kube-system".to_string()));
    let p = serde_json::to_value(pod(json!({"cpu": "1"}))).unwrap();
    let create = request("Pod", "CREATE", "ns1", Some(p.clone()), None);
    let typed: Pod = serde_json::from_value(p.clone()).unwrap();
    assert_eq!(
        quota_of(&h, &create, &typed, None).as_deref(),
        Some("quota1")
    );
    // An update is evaluated only with EnableQuotaAdmissionOnUpdate, and only when the
    // pod moves to another quota.
    let update = request("Pod", "UPDATE", "ns1", Some(p.clone()), Some(p.clone()));
    assert_eq!(quota_of(&h, &update, &typed, Some(&typed)), None);
    let gates =
        crate::manager::features::defaults().with(features::ENABLE_QUOTA_ADMISSION_ON_UPDATE, true);
    let h = handlers_with(fixed, gates, 0);
    assert_eq!(
        quota_of(&h, &update, &typed, Some(&typed)),
        None,
        "same quota"
    );
    let mut moved = typed.clone();
    moved.metadata.labels = None;
    assert_eq!(
        quota_of(&h, &update, &typed, Some(&moved)).as_deref(),
        Some("quota1"),
        "from the default quota into quota1"
    );
    // Koordinator's own quotas are never evaluated.
    let mut system = typed.clone();
    system.metadata.labels =
        Some([(LABEL_QUOTA_NAME.to_string(), QUOTA_SYSTEM.to_string())].into());
    assert_eq!(quota_of(&h, &create, &system, None), None);
}
