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
