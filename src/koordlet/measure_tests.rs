use super::*;
use crate::api::extension::qos::KubeQoS;
use crate::koordlet::collectors::testutil::FakeHost;
use crate::koordlet::store::{Point, StoreOptions};
use crate::os::{Driver, Version};

fn loop_ctx(states: &States, registry: &crate::kernel::Metrics) -> LoopCtx {
    LoopCtx {
        informer: Informer::fixed(states.clone()),
        store: Arc::new(MetricStore::temporary(StoreOptions::default()).unwrap()),
        metrics: KoordletMetrics::register(registry),
        usage: UsageSeries::register(registry),
        shutdown: crate::kernel::Shutdown::new(),
        node: "n1".into(),
    }
}

fn pod_psi(registry: &crate::kernel::Metrics) -> usize {
    let scrape = registry.scrape();
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == "koordlet_pod_psi")
        .count()
}

#[test]
fn psi_series_stay_between_the_psi_collectors_passes() {
    let host = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
    let pod = host.pod("a", "uid-a", KubeQoS::Burstable, None, &["c1"], 0);
    let states = States {
        pods: Arc::new(vec![pod]),
        ..States::default()
    };
    let registry = crate::kernel::Metrics::new();
    let l = loop_ctx(&states, &registry);
    let labels = [
        ("pod_uid", "uid-a"),
        ("psi_resource", "cpu"),
        ("psi_precision", "10"),
        ("psi_degree", "some"),
    ];
    let psi = vec![(
        SeriesKey::new(MetricKind::PodPsi, &labels),
        Point { ts: 1, value: 0.5 },
    )];
    publish(
        &l,
        &states,
        &psi,
        Ran {
            psi: true,
            resctrl: false,
        },
    );
    assert_eq!(pod_psi(&registry), 1);
    // The passes between two PSI passes (every 10 s by default) keep the series.
    publish(
        &l,
        &states,
        &Vec::new(),
        Ran {
            psi: false,
            resctrl: false,
        },
    );
    assert_eq!(pod_psi(&registry), 1);
    // A PSI pass that saw nothing of the pod drops it.
    publish(
        &l,
        &states,
        &Vec::new(),
        Ran {
            psi: true,
            resctrl: false,
        },
    );
    assert_eq!(pod_psi(&registry), 0);
}

#[test]
fn node_usage_gauges_come_from_the_pass() {
    let states = States::default();
    let registry = crate::kernel::Metrics::new();
    let l = loop_ctx(&states, &registry);
    let samples = vec![
        (
            SeriesKey::pod(MetricKind::PodCpuUsage, "uid-a"),
            Point { ts: 1, value: 9.0 },
        ),
        (
            SeriesKey::node(MetricKind::NodeCpuUsage),
            Point { ts: 1, value: 1.5 },
        ),
        (
            SeriesKey::node(MetricKind::NodeMemoryUsage),
            Point { ts: 1, value: 2e9 },
        ),
    ];
    publish(
        &l,
        &states,
        &samples,
        Ran {
            psi: false,
            resctrl: false,
        },
    );
    let scrape = registry.scrape();
    let value = |name: &str| {
        let s = scrape.samples.iter().find(|s| s.metric == name).unwrap();
        format!("{:?}", s.value)
    };
    assert_eq!(value("koordlet_node_used_cpu_cores"), "Gauge(1.5)");
    assert_eq!(
        value("koordlet_node_used_memory_bytes"),
        "Gauge(2000000000.0)"
    );
}
