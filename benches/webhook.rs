//! Admission latency of the pod mutating path in process (JSON in → AdmissionReview out,
//! no TLS): 20 ClusterColocationProfiles, one matching, a two-container pod translated to
//! batch resources; and the validating path. Budget: p99 < 2 ms for `/mutate-pod`.
//! Run: `cargo bench --bench webhook`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use koord::manager::webhook::Handlers;
use koord::manager::webhook::lookup::Fixed;
use serde_json::json;

const ITERATIONS: usize = 20_000;

fn handlers() -> Handlers {
    let mut profiles = Vec::new();
    for i in 0..20 {
        let spec = if i == 7 {
            json!({"namespaceSelector": {"matchLabels": {"colocation": "on"}}, "selector": {"matchLabels": {"app": "spark"}},
                "qosClass": "BE", "priorityClassName": "koord-batch", "koordinatorPriority": 1111,
                "schedulerName": "koord-scheduler", "labels": {"koordinator.sh/mutated": "true"}})
        } else {
            json!({"selector": {"matchLabels": {"app": format!("other-{i}")}}, "qosClass": "LS"})
        };
        profiles.push(Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": format!("profile-{i:02}")}, "spec": spec}),
            )
            .unwrap(),
        ));
    }
    let fixed = Fixed {
        profiles,
        namespaces: BTreeMap::from([(
            "batch".to_string(),
            BTreeMap::from([("colocation".to_string(), "on".to_string())]),
        )]),
        ..Fixed::default()
    }
    .with_koord_priority_classes();
    Handlers::new(
        koord::manager::features::defaults(),
        Arc::new(fixed),
        ("koordinator-system".into(), "slo-controller-config".into()),
    )
}

fn review(i: usize) -> Vec<u8> {
    let container = |name: &str| {
        json!({"name": name, "image": "spark:3.5", "env": [{"name": "A", "value": "b"}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}})
    };
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("spark-{i}"), "namespace": "batch", "labels": {"app": "spark", "job": "etl"},
            "annotations": {"owner": "data-team"}},
        "spec": {"containers": [container("driver"), container("sidecar")], "restartPolicy": "Never"}});
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("uid-{i}"), "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "batch",
            "operation": "CREATE", "userInfo": {"username": "admin"}, "object": pod}}))
    .unwrap()
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.5), at(0.99), at(0.999))
}

fn measure(name: &str, h: &Handlers, path: &str, bodies: &[Vec<u8>]) {
    for b in bodies.iter().take(1000) {
        let _ = h.serve(path, b);
    }
    let mut samples = Vec::with_capacity(bodies.len());
    for b in bodies {
        let t = Instant::now();
        let (code, out) = h.serve(path, b);
        samples.push(t.elapsed());
        assert_eq!(code, 200);
        assert_eq!(out["response"]["allowed"], true, "{out}");
    }
    let (p50, p99, p999) = percentiles(samples);
    println!(
        "{name:<40} p50 {p50:>9.1?}  p99 {p99:>9.1?}  p99.9 {p999:>9.1?}  ({} requests)",
        bodies.len()
    );
}

fn main() {
    let h = handlers();
    let bodies: Vec<Vec<u8>> = (0..ITERATIONS).map(review).collect();
    let (_, first) = h.serve("/mutate-pod", &bodies[0]);
    assert!(first["response"]["patch"].is_string(), "the pod is mutated");
    measure(
        "/mutate-pod (profile match + translate)",
        &h,
        "/mutate-pod",
        &bodies,
    );
    // The validating webhook sees the mutated pod; here the plain one (LS default) is fine.
    measure("/validate-pod", &h, "/validate-pod", &bodies);
}
