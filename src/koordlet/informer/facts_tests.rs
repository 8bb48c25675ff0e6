//! The facts a `PodMeta` takes once match what the pod object says.

use super::*;
use crate::api::extension::priority::pod_hook_qos_class;
use crate::api::extension::qos::{kube_qos, pod_qos_class, pod_qos_class_with_default};
use crate::os::cgroup::{Driver, Version};

fn meta(pod: serde_json::Value) -> PodMeta {
    let cgroups = Cgroups::new("/sys/fs/cgroup", Version::V1, Driver::Cgroupfs, "");
    PodMeta::new(serde_json::from_value(pod).unwrap(), &cgroups).unwrap()
}

fn pod(labels: serde_json::Value, phase: Option<&str>, limit: Option<&str>) -> serde_json::Value {
    let resources = match limit {
        Some(l) => serde_json::json!({"requests": {"cpu": "500m"}, "limits": {"cpu": l}}),
        None => serde_json::json!({"requests": {"cpu": "500m"}}),
    };
    let mut status = serde_json::json!({"containerStatuses": [
        {"name": "app", "containerID": "containerd://a1", "image": "i", "imageID": "", "ready": true,
         "restartCount": 0, "state": {"running": {}}},
        {"name": "gone", "containerID": "containerd://g1", "image": "i", "imageID": "", "ready": false,
         "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
    ]});
    if let Some(p) = phase {
        status["phase"] = p.into();
    }
    serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u1", "labels": labels},
        "spec": {"containers": [
            {"name": "app", "image": "i", "resources": resources},
            {"name": "side", "image": "i", "resources": {"requests": {"cpu": "250m"}}},
        ]},
        "status": status,
    })
}

#[test]
fn pod_facts_are_what_the_pod_object_says() {
    let cases = [
        (
            serde_json::json!({"koordinator.sh/qosClass": "BE"}),
            Some("Running"),
            None,
        ),
        (serde_json::json!({}), None, Some("2")),
        (
            serde_json::json!({"koordinator.sh/qosClass": "LSR"}),
            Some("Pending"),
            Some("1"),
        ),
        (serde_json::json!({}), Some("Succeeded"), Some("500m")),
        (
            serde_json::json!({"koordinator.sh/qosClass": "LS"}),
            Some("Failed"),
            None,
        ),
    ];
    for (labels, phase, limit) in cases {
        let m = meta(pod(labels, phase, limit));
        let p = &m.pod;
        let f = m.facts;
        assert_eq!(f.qos, pod_qos_class(p), "{phase:?}");
        assert_eq!(f.hook_qos, pod_hook_qos_class(p));
        assert_eq!(f.kube_qos, kube_qos(p));
        assert_eq!(f.qos_with_default(), pod_qos_class_with_default(p));
        assert_eq!(f.live, matches!(phase, None | Some("Pending" | "Running")));
        assert_eq!(f.cpu_request_milli, 750, "both containers' requests");
        assert!(f.has_spec);
        let app = &m.containers[0];
        let want = match limit {
            Some("2") => 2000,
            Some("1") => 1000,
            Some(_) => 500,
            None => 0,
        };
        assert_eq!((app.cpu_limit_milli, app.running), (Some(want), true));
        let gone = &m.containers[1];
        assert_eq!(
            gone.cpu_limit_milli, None,
            "a status without a spec container"
        );
        assert!(!gone.running);
    }
}

#[test]
fn the_series_labels_a_pod_meta_keeps_name_its_series() {
    use crate::koordlet::store::{MetricKind, SeriesKey};
    let m = meta(pod(serde_json::json!({}), Some("Running"), None));
    let kind = MetricKind::PodCpuUsage;
    assert_eq!(SeriesKey::with(kind, &m.series), SeriesKey::pod(kind, "u1"));
    let kind = MetricKind::ContainerCpuUsage;
    for c in &m.containers {
        let bare = PodMeta::container_id(c);
        assert_eq!(
            SeriesKey::with(kind, &c.series),
            SeriesKey::container(kind, bare)
        );
    }
    assert_eq!(
        SeriesKey::with(kind, &m.containers[0].series).encode(),
        "container_cpu_usage{container_id=a1}"
    );
}
