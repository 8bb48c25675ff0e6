use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::kernel::Metrics;
use crate::koordlet::collectors::testutil::FakeHost;
use crate::os::{Driver, Version};

/// `(series, pod, container, resource) → value` of the usage gauges on a scrape.
fn scraped(registry: &Metrics) -> Vec<(String, String, String, String, String)> {
    let mut out: Vec<_> = registry
        .scrape()
        .samples
        .iter()
        .filter(|s| {
            s.metric == "koord_koordlet_pod_resource_usage"
                || s.metric == "koord_koordlet_container_resource_usage"
        })
        .map(|s| {
            let l = |k| s.labels.get(k).unwrap_or_default().to_string();
            (
                s.metric.clone(),
                l("pod"),
                l("container"),
                l("resource"),
                format!("{:?}", s.value),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn gauges_follow_the_pass_values_and_the_pod_list() {
    let registry = Metrics::new();
    let m = KoordletMetrics::register(&registry);
    let host = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let a = host.pod("a", "uid-a", KubeQoS::Burstable, None, &["c1"], 0);
    let b = host.pod("b", "uid-b", KubeQoS::Burstable, None, &["c2"], 0);
    let values = |kinds: &[(MetricKind, &str, f64)]| {
        let kinds: Vec<(SeriesKey, f64)> = kinds
            .iter()
            .map(|(k, who, v)| {
                let key = if who.starts_with("uid") {
                    SeriesKey::pod(*k, who)
                } else {
                    SeriesKey::container(*k, who)
                };
                (key, *v)
            })
            .collect();
        move |k: &SeriesKey| kinds.iter().find(|(s, _)| s == k).map(|(_, v)| *v)
    };
    let mut g = UsageGauges::default();
    let pods = Arc::new(vec![a.clone(), b.clone()]);
    g.publish(
        "n1",
        &pods,
        &m,
        values(&[
            (MetricKind::PodCpuUsage, "uid-a", 0.5),
            (MetricKind::PodMemoryUsage, "uid-a", 100.0),
            (MetricKind::PodCpuUsage, "uid-b", 0.25),
            (MetricKind::ContainerCpuUsage, "c1", 0.4),
        ]),
    );
    let pod = "koord_koordlet_pod_resource_usage".to_string();
    let ctr = "koord_koordlet_container_resource_usage".to_string();
    let row = |m: &String, p: &str, c: &str, r: &str, v: &str| {
        (
            m.clone(),
            p.into(),
            c.into(),
            r.into(),
            format!("Gauge({v})"),
        )
    };
    assert_eq!(
        scraped(&registry),
        vec![
            row(&ctr, "a", "c1", "cpu", "0.4"),
            row(&pod, "a", "", "cpu", "0.5"),
            row(&pod, "a", "", "memory", "100.0"),
            row(&pod, "b", "", "cpu", "0.25"),
        ]
    );
    // Same list: a series without a value this pass is dropped, the others move.
    g.publish(
        "n1",
        &pods,
        &m,
        values(&[
            (MetricKind::PodCpuUsage, "uid-a", 0.75),
            (MetricKind::PodCpuUsage, "uid-b", 0.25),
            (MetricKind::ContainerCpuUsage, "c1", 0.6),
        ]),
    );
    assert_eq!(
        scraped(&registry),
        vec![
            row(&ctr, "a", "c1", "cpu", "0.6"),
            row(&pod, "a", "", "cpu", "0.75"),
            row(&pod, "b", "", "cpu", "0.25"),
        ]
    );
    // A new list without pod b: b's series go, a's keep their values and move on.
    let pods = Arc::new(vec![a.clone()]);
    g.publish(
        "n1",
        &pods,
        &m,
        values(&[
            (MetricKind::PodCpuUsage, "uid-a", 1.0),
            (MetricKind::PodMemoryUsage, "uid-a", 200.0),
        ]),
    );
    assert_eq!(
        scraped(&registry),
        vec![
            row(&pod, "a", "", "cpu", "1.0"),
            row(&pod, "a", "", "memory", "200.0"),
        ]
    );
}
