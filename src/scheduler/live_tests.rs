//! The live scheduler's own bounds, without an API server.

use super::*;

#[tokio::test]
async fn binding_cycles_past_permit_are_bounded() {
    // Nothing listens there: the test makes no request.
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let cfg = super::super::config::default_config().unwrap();
    let mut s = Scheduler::new(client, &cfg, Leadership::always()).unwrap();
    for _ in 0..MAX_BINDING - 1 {
        s.binds.spawn(std::future::pending());
    }
    assert!(s.binding_room());
    s.binds.spawn(std::future::pending());
    assert!(
        !s.binding_room(),
        "{MAX_BINDING} running: the next cycle waits"
    );
    let (tx, _rx) = tokio::sync::oneshot::channel();
    s.waiting.lock().unwrap().insert("d/member".into(), tx);
    assert!(
        s.binding_room(),
        "a gang member waiting at Permit does not hold the others back"
    );
}
/// As kube-scheduler waits for every informer: with every other kind listed, a
/// scheduler that has not yet listed the Devices does not schedule (a GPU pod would
/// pass DeviceShare on a node whose Device is unknown and get no GPU).
#[tokio::test]
async fn devices_are_listed_before_scheduling() {
    use kube::runtime::watcher::Event::InitDone;
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let cfg = super::super::config::default_config().unwrap();
    let mut s = Scheduler::new(client, &cfg, Leadership::always()).unwrap();
    let others = [
        Ev::Pod(InitDone),
        Ev::Node(InitDone),
        Ev::Metric(InitDone),
        Ev::Reservation(InitDone),
        Ev::Quota(InitDone),
        Ev::Pdb(Box::new(InitDone)),
        Ev::Storage(Box::new(crate::scheduler::live_watch::Storage::Pv(
            InitDone,
        ))),
        Ev::Storage(Box::new(crate::scheduler::live_watch::Storage::Pvc(
            InitDone,
        ))),
        Ev::Storage(Box::new(crate::scheduler::live_watch::Storage::Class(
            InitDone,
        ))),
    ];
    for ev in others {
        s.apply(ev);
    }
    assert!(!s.synced(), "Devices not listed yet");
    s.apply(Ev::Device(InitDone));
    assert!(s.synced());
}

fn explanation_created(
    ttl: Option<&str>,
    created_ms: i64,
) -> crate::api::scheduling::explanation::ScheduleExplanation {
    let mut o =
        crate::api::scheduling::explanation::ScheduleExplanation::new("q", Default::default());
    o.spec.ttl = ttl.map(str::to_string);
    let at = k8s_openapi::jiff::Timestamp::from_millisecond(created_ms).unwrap();
    o.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
    o
}

/// `spec.ttl`: 24h unless set, 0 never expires, a Go duration otherwise.
#[test]
fn a_schedule_explanation_expires_after_its_ttl() {
    use super::explain::expired;
    let t0 = 1_700_000_000_000;
    let hour = 3_600_000;
    assert!(!expired(&explanation_created(None, t0), t0 + 23 * hour));
    assert!(expired(&explanation_created(None, t0), t0 + 24 * hour));
    assert!(!expired(
        &explanation_created(Some("0"), t0),
        t0 + 1000 * hour
    ));
    assert!(!expired(
        &explanation_created(Some("1m30s"), t0),
        t0 + 89_000
    ));
    assert!(expired(
        &explanation_created(Some("1m30s"), t0),
        t0 + 90_000
    ));
}
