use super::*;

fn header() -> Header {
    Header {
        format: FORMAT.into(),
        started_at: "2026-12-07T00:00:00Z".into(),
        server: "test".into(),
        kinds: vec!["Node".into()],
        skipped: vec![],
        embedded: false,
    }
}

fn change(t: u64, op: Op) -> Change {
    Change {
        t,
        op,
        kind: "Node".into(),
        object: serde_json::json!({"metadata": {"name": format!("n{t}")}}),
    }
}

#[test]
fn a_recording_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.gz");
    let mut w = Writer::create(&path, &header()).unwrap();
    for (t, op) in [(0, Op::Sync), (5, Op::Apply), (9, Op::Delete)] {
        w.change(&change(t, op)).unwrap();
    }
    w.finish().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a recording holds the cluster's objects");
    let r = read(&path).unwrap();
    assert_eq!(r.header, header());
    assert_eq!(r.changes.len(), 3);
    assert_eq!(r.changes[2], change(9, Op::Delete));
    assert!(r.warnings.is_empty());
}

#[test]
fn a_recording_cut_short_keeps_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.gz");
    let mut w = Writer::create(&path, &header()).unwrap();
    for t in 0..200 {
        w.change(&change(t, Op::Apply)).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let r = read(&path).unwrap();
    assert!(!r.changes.is_empty() && r.changes.len() < 200);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

#[test]
fn not_a_recording_is_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.gz");
    let mut h = header();
    h.format = "something/else".into();
    Writer::create(&path, &h).unwrap().finish().unwrap();
    let e = read(&path).err().unwrap().to_string();
    assert!(
        e.contains("r.gz: line 1") && e.contains("something/else"),
        "{e}"
    );
}
