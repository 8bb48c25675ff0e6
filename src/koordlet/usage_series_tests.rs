use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::kernel::Metrics;
use crate::koordlet::collectors::testutil::FakeHost;
use crate::koordlet::store::Point;
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
fn series_follow_the_last_pass_and_its_pod_list() {
    let registry = Metrics::new();
    let series = UsageSeries::register(&registry);
    assert!(registry.names().contains(&POD_SERIES.to_string()));
    assert_eq!(scraped(&registry), vec![], "no pass yet, no series");
    let host = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let a = host.pod("a", "uid-a", KubeQoS::Burstable, None, &["c1"], 0);
    let b = host.pod("b", "uid-b", KubeQoS::Burstable, None, &["c2"], 0);
    let pass = |pods: &Arc<Vec<PodMeta>>, kinds: &[(MetricKind, &str, f64)]| LastPass {
        node: "n1".into(),
        pods: pods.clone(),
        samples: kinds
            .iter()
            .map(|(k, who, v)| {
                let key = if who.starts_with("uid") {
                    SeriesKey::pod(*k, who)
                } else {
                    SeriesKey::container(*k, who)
                };
                (key, Point { ts: 1, value: *v })
            })
            .collect(),
    };
    let pods = Arc::new(vec![a.clone(), b.clone()]);
    series.set(pass(
        &pods,
        &[
            (MetricKind::PodCpuUsage, "uid-a", 0.5),
            (MetricKind::PodMemoryUsage, "uid-a", 100.0),
            (MetricKind::PodCpuUsage, "uid-b", 0.25),
            (MetricKind::ContainerCpuUsage, "c1", 0.4),
            // Not a usage series: not exported here.
            (MetricKind::PodCpuThrottled, "uid-a", 0.1),
        ],
    ));
    let pod = POD_SERIES.to_string();
    let ctr = CONTAINER_SERIES.to_string();
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
    let labels = registry
        .scrape()
        .samples
        .into_iter()
        .find(|s| s.metric == CONTAINER_SERIES)
        .unwrap()
        .labels;
    assert_eq!(labels.get("node"), Some("n1"));
    assert_eq!(labels.get("namespace"), Some(a.namespace.as_str()));
    // Same list: a series without a value this pass is dropped, the others move.
    series.set(pass(
        &pods,
        &[
            (MetricKind::PodCpuUsage, "uid-a", 0.75),
            (MetricKind::PodCpuUsage, "uid-b", 0.25),
            (MetricKind::ContainerCpuUsage, "c1", 0.6),
        ],
    ));
    assert_eq!(
        scraped(&registry),
        vec![
            row(&ctr, "a", "c1", "cpu", "0.6"),
            row(&pod, "a", "", "cpu", "0.75"),
            row(&pod, "b", "", "cpu", "0.25"),
        ]
    );
    // A new list without pod b: b's series go, even with a stray sample of it.
    let pods = Arc::new(vec![a.clone()]);
    series.set(pass(
        &pods,
        &[
            (MetricKind::PodCpuUsage, "uid-a", 1.0),
            (MetricKind::PodMemoryUsage, "uid-a", 200.0),
            (MetricKind::PodCpuUsage, "uid-b", 0.3),
        ],
    ));
    assert_eq!(
        scraped(&registry),
        vec![
            row(&pod, "a", "", "cpu", "1.0"),
            row(&pod, "a", "", "memory", "200.0"),
        ]
    );
}
