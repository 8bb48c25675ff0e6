use super::*;
use crate::simulate::recording::{Change, FORMAT, Header, Writer, open};

fn header() -> Header {
    Header {
        format: FORMAT.into(),
        started_at: "2026-12-07T00:00:00Z".into(),
        server: "test".into(),
        kinds: vec!["Pod".into()],
        skipped: vec![],
        embedded: false,
    }
}

fn pod(i: u64) -> Change {
    let object = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "ns"}, "spec": {"containers": []}});
    Change {
        t: i,
        op: Op::Apply,
        kind: "Pod".into(),
        object,
    }
}

/// Batches go to the decoders in turn and come back in the recording's order, each object
/// decoded into its kind, one that does not decode named and skipped.
#[test]
fn events_come_back_in_order_from_every_decoder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.gz");
    let mut w = Writer::create(&path, &header()).unwrap();
    let n = (BATCH * DECODERS * 3 + 7) as u64;
    for i in 0..n {
        let mut c = pod(i);
        if i == 300 {
            c.object["spec"] = serde_json::json!("not a spec");
        }
        w.change(&c).unwrap();
    }
    let gone = Change {
        t: n,
        op: Op::Delete,
        kind: "Node".into(),
        object: serde_json::json!({"metadata": {"name": "n1"}}),
    };
    w.change(&gone).unwrap();
    w.finish().unwrap();
    let (_, reader) = open(&path).unwrap();
    let mut events = Events::spawn(reader).unwrap();
    let all: Vec<Event> = events.by_ref().collect();
    assert_eq!(all.len() as u64, n + 1);
    for (i, e) in all.iter().take(n as usize).enumerate() {
        assert_eq!(e.t, i as u64);
        assert_eq!(e.key, format!("ns/p{i}"));
        match (&e.object, i) {
            (Object::Absent, 300) => {}
            (Object::Pod(p), _) => assert_eq!(p.metadata.name.as_deref(), Some(&*format!("p{i}"))),
            _ => panic!("event {i} not decoded as a Pod"),
        }
    }
    let last = &all[n as usize];
    assert_eq!((last.key.as_str(), last.name()), ("n1", "n1"));
    assert_eq!(events.warnings.len(), 1, "{:?}", events.warnings);
    assert!(events.warnings[0].contains("a Pod in the recording skipped"));
}

/// A recording cut short ends the stream with the reader's warning, after what came before.
#[test]
fn a_recording_cut_short_ends_with_its_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.gz");
    let mut w = Writer::create(&path, &header()).unwrap();
    for i in 0..3000 {
        w.change(&pod(i)).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let (_, reader) = open(&path).unwrap();
    let mut events = Events::spawn(reader).unwrap();
    let got = events.by_ref().count();
    assert!(got > 0 && got < 3000, "{got}");
    assert_eq!(events.warnings.len(), 1, "{:?}", events.warnings);
    assert!(events.warnings[0].contains("the rest is ignored"));
}
