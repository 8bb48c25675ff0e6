//! Koordinator's `auditor_test.go` cases, with their names, and the log's rotation.

use super::*;

fn block(i: usize) -> String {
    std::iter::repeat_n((b'a' + (i % 26) as u8) as char, 63).collect()
}

fn auditor(dir: &std::path::Path) -> Auditor {
    let a = Auditor::new(Config {
        log_dir: dir.to_path_buf(),
        ..Config::default()
    });
    for i in 0..26 {
        a.log(0, Event::node().message(block(i)));
    }
    a
}

fn page(a: &Auditor, size: usize, token: &str) -> (Vec<Event>, String) {
    let answer = a.query(Some(&size.to_string()), Some(token), true);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let v: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    let events = serde_json::from_value(v["Events"].clone()).unwrap();
    (events, v["NextPageToken"].as_str().unwrap().to_string())
}

#[test]
fn auditor_logger() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let (events, token) = page(&a, 10, "");
    assert_eq!(events.len(), 10);
    assert_eq!(events[0].message, block(25), "newest first");
    assert_eq!(events[0].kind, "node");
    let (events, token) = page(&a, 1, &token);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].message, block(26 - 11));
    let (mut count, mut token) = (0, token);
    loop {
        let (events, next) = page(&a, 5, &token);
        count += events.len();
        token = next;
        if events.len() < 5 {
            break;
        }
    }
    assert_eq!(count, 26 - 11, "read to the end");
    assert_eq!(token, "", "no next page at the end");
}

#[test]
fn auditor_logger_txt_output() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let answer = a.query(Some("10"), None, false);
    assert_eq!(answer.body.trim().lines().count(), 10);
    assert!(
        answer.next_page_token.is_some_and(|t| !t.is_empty()),
        "Next-Page-Token"
    );
}

#[test]
fn auditor_logger_reader_invalid_page_token() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let first = a.query(Some("10"), None, false).next_page_token.unwrap();
    assert_eq!(a.query(Some("10"), Some("nope"), false).status, 409);
    // More readers than maxConcurrentReaders: the oldest is dropped.
    for _ in 0..Config::default().max_concurrent_readers {
        a.query(Some("1"), None, false);
    }
    let expired = a.query(Some("10"), Some(&first), false);
    assert_eq!(expired.status, 409);
    assert_eq!(expired.body, format!("invalid pageToken {first}\n"));
    let too_many = a.query(Some("2049"), None, true);
    assert_eq!(
        (too_many.status, too_many.body.as_str()),
        (400, "size(2049) exceeds the limit(2048)\n")
    );
}

#[test]
fn verbose_events_above_the_level_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let a = Auditor::new(Config {
        log_dir: dir.path().to_path_buf(),
        ..Config::default()
    });
    a.log(4, Event::group("kubepods").reason("UpdateCgroup"));
    a.log(3, Event::pod("default", "p").reason("evict"));
    let (events, _) = page(&a, 10, "");
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].namespace.as_str(), events[0].name.as_str()),
        ("default", "p")
    );
    assert!(!events[0].created_at.is_empty());
}

#[test]
fn the_log_rotates_and_keeps_the_disk_bound() {
    let dir = tempfile::tempdir().unwrap();
    // 4 MiB: two files of 2 MiB, the current one and one renamed.
    let mut w = log::Writer::new(dir.path().to_path_buf(), 4);
    let line = vec![b'x'; 1023];
    for _ in 0..(3 * 2048 + 10) {
        w.append(&line).unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"audit.log".to_string()));
    let read = log::ReverseLines::open(dir.path()).count();
    assert_eq!(read, 2048 + 10, "the newest file and the current one");
}

#[tokio::test]
async fn events_are_served_on_the_admin_endpoint() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        log_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    http::start(&config, true, true);
    record(0, || Event::pod("default", "be-1").reason("BEMemoryEvict"));
    let metrics = crate::kernel::Metrics::new();
    let state = crate::kernel::admin::AdminState {
        readiness: crate::kernel::Readiness::new(&metrics),
        metrics,
        config: Arc::new(serde_json::json!({})),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(crate::kernel::admin::serve(listener, state, stop.clone()));
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /events?size=5 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    stop.cancel();
    let _ = server.await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = out.split("\r\n\r\n").nth(1).unwrap();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let events = v["Events"].as_array().unwrap();
    // The process-wide auditor may be another test's: look for this event by name.
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "be-1" && e["reason"] == "BEMemoryEvict" && e["type"] == "pod"),
        "{v}"
    );
}
