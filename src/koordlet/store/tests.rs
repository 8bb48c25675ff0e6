use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// Reopens a store whose previous handle was just dropped: sled's background flusher can
/// hold the file lock a moment longer (seen once as WouldBlock in a full test run).
fn reopen(dir: &std::path::Path) -> MetricStore {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match MetricStore::open(dir, StoreOptions::default()) {
            Ok(s) => return s,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("reopening the store: {e}"),
        }
    }
}

fn cpu(uid: &str) -> SeriesKey {
    SeriesKey::pod(MetricKind::PodCpuUsage, uid)
}

#[test]
fn insert_query_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = MetricStore::open(dir.path(), StoreOptions::default()).unwrap();
        let samples: Vec<_> = (0..10)
            .map(|i| {
                (
                    cpu("a"),
                    Point {
                        ts: i * 1000,
                        value: i as f64,
                    },
                )
            })
            .collect();
        s.insert(&samples).unwrap();
        s.insert(&[(
            cpu("b"),
            Point {
                ts: 5000,
                value: 42.0,
            },
        )])
        .unwrap();
        assert_eq!(s.query(&cpu("a"), 2000, 4000).unwrap().len(), 3);
        let a = s.aggregate(&cpu("a"), 0, 9000).unwrap().unwrap();
        assert_eq!((a.avg, a.last, a.count), (4.5, 9.0, 10));
        s.kv_put("model/x", b"state").unwrap();
        futures::executor::block_on(s.flush()).unwrap();
    }
    let s = reopen(dir.path());
    assert_eq!(
        s.query(&cpu("a"), 0, i64::MAX).unwrap().len(),
        10,
        "history survives a restart"
    );
    assert_eq!(s.series_count(), 2);
    assert_eq!(s.kv_get("model/x").unwrap().as_deref(), Some(&b"state"[..]));
    s.insert(&[(
        SeriesKey::pod(MetricKind::PodCpuUsage, "c"),
        Point { ts: 1, value: 1.0 },
    )])
    .unwrap();
    assert_eq!(
        s.series_count(),
        3,
        "new ids do not collide with reloaded ones"
    );
    assert_eq!(
        s.query(&cpu("b"), 0, i64::MAX).unwrap(),
        vec![Point {
            ts: 5000,
            value: 42.0
        }]
    );
}

#[test]
fn gc_drops_old_points_and_idle_series() {
    let s = MetricStore::temporary(StoreOptions {
        retention: Duration::from_secs(10),
        ..Default::default()
    })
    .unwrap();
    s.insert(&[(
        cpu("old"),
        Point {
            ts: 1_000,
            value: 1.0,
        },
    )])
    .unwrap();
    s.insert(&[
        (
            cpu("live"),
            Point {
                ts: 1_000,
                value: 1.0,
            },
        ),
        (
            cpu("live"),
            Point {
                ts: 20_000,
                value: 2.0,
            },
        ),
    ])
    .unwrap();
    assert_eq!(s.gc(25_000).unwrap(), 2);
    assert_eq!(
        s.series_count(),
        1,
        "idle series forgotten: memory follows live series"
    );
    assert_eq!(s.query(&cpu("live"), 0, i64::MAX).unwrap().len(), 1);
}

#[test]
fn non_finite_values_are_skipped_and_negative_time_sorts() {
    let s = MetricStore::temporary(StoreOptions::default()).unwrap();
    s.insert(&[
        (cpu("a"), Point { ts: -5, value: 1.0 }),
        (
            cpu("a"),
            Point {
                ts: 5,
                value: f64::NAN,
            },
        ),
    ])
    .unwrap();
    assert_eq!(
        s.query(&cpu("a"), -10, 10).unwrap(),
        vec![Point { ts: -5, value: 1.0 }]
    );
}

#[derive(Debug, Clone)]
enum Op {
    /// One insert call: (series, time, value) in the order a pass would send them.
    Insert(Vec<(u8, i64, f64)>),
    Query(u8, i64, i64),
    Gc(i64),
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec((0u8..3, 0i64..200_000, -1e6f64..1e6), 1..4).prop_map(Op::Insert),
        2 => (0u8..3, 0i64..200_000, 0i64..200_000).prop_map(|(s, a, b)| Op::Query(s, a.min(b), a.max(b))),
        1 => (0i64..400_000).prop_map(Op::Gc),
        1 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The store answers exactly like an in-memory model of points and retention.
    #[test]
    fn matches_in_memory_model(ops in proptest::collection::vec(op(), 1..60)) {
        let retention = 100_000i64;
        // A one-minute recent window, so GC rounds move points to sled hour chunks.
        let s = MetricStore::temporary(StoreOptions { retention: Duration::from_millis(retention as u64), recent: Duration::from_secs(60), ..Default::default() }).unwrap();
        let mut model: BTreeMap<(u8, i64), f64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(batch) => {
                    let samples: Vec<_> = batch.iter().map(|&(sid, ts, value)| (cpu(&sid.to_string()), Point { ts, value })).collect();
                    s.insert(&samples).unwrap();
                    for (sid, ts, v) in batch {
                        model.insert((sid, ts), keep(v));
                    }
                }
                Op::Query(sid, a, b) => {
                    let got: Vec<(i64, f64)> = s.query(&cpu(&sid.to_string()), a, b).unwrap().into_iter().map(|p| (p.ts, p.value)).collect();
                    let want: Vec<(i64, f64)> = model.range((sid, a)..=(sid, b)).map(|((_, t), v)| (*t, *v)).collect();
                    prop_assert_eq!(&got, &want);
                    let agg = s.aggregate(&cpu(&sid.to_string()), a, b).unwrap();
                    let pts: Vec<Point> = want.iter().map(|(t, v)| Point { ts: *t, value: *v }).collect();
                    prop_assert_eq!(agg, aggregate(&pts));
                }
                Op::Gc(now) => {
                    s.gc(now).unwrap();
                    model.retain(|(_, t), _| *t >= now - retention);
                }
                Op::Flush => futures::executor::block_on(s.flush()).unwrap(),
            }
        }
    }
}

fn steady(key: &SeriesKey, from_s: i64, to_s: i64) -> Vec<(SeriesKey, Point)> {
    (from_s..to_s)
        .map(|t| {
            (
                key.clone(),
                Point {
                    ts: t * 1000,
                    value: (t % 7) as f64,
                },
            )
        })
        .collect()
}

#[test]
fn the_recent_window_stays_in_memory_and_older_minutes_go_to_hour_chunks() {
    let s = MetricStore::temporary(StoreOptions::default()).unwrap();
    let a = cpu("a");
    // Three hours of 1 s samples, in batches as the collector writes them.
    for batch in steady(&a, 0, 3 * 3600).chunks(60) {
        s.insert(batch).unwrap();
    }
    let before = s.query(&a, 0, i64::MAX).unwrap();
    assert_eq!(before.len(), 3 * 3600);
    assert_eq!(s.chunk_keys(), 0, "nothing in sled before a GC round");
    let now = 3 * 3_600_000 + 5 * 60_000;
    s.gc(now).unwrap();
    assert_eq!(s.chunk_keys(), 3, "one sled key an hour");
    assert_eq!(s.query(&a, 0, i64::MAX).unwrap(), before);
    let window = s.query(&a, 3_500_000, 3_700_000).unwrap();
    assert_eq!(window.len(), 201, "a window across hours");
    // Memory holds the last 25 minutes of data (now − 30 min to the end), compressed.
    let in_memory = s.query(&a, now - RECENT_MS, i64::MAX).unwrap().len();
    assert_eq!(in_memory, 25 * 60);
    // The open minute is kept by row (~70 bytes a row for a lone series, shared by every
    // series at a real node's 1,000); the sealed minutes under 4 bytes a point.
    assert!(
        s.recent_bytes() < 24 * 60 * 4 + 60 * 72,
        "{} bytes",
        s.recent_bytes()
    );
    // A late sample for an hour in sled is kept in memory, wins on read, and is merged
    // into its hour at the next round.
    s.insert(&[(
        a.clone(),
        Point {
            ts: 10_000,
            value: 99.0,
        },
    )])
    .unwrap();
    assert_eq!(s.query(&a, 10_000, 10_000).unwrap()[0].value, 99.0);
    s.gc(now).unwrap();
    assert_eq!(s.chunk_keys(), 3);
    assert_eq!(s.query(&a, 10_000, 10_000).unwrap()[0].value, 99.0);
}

#[test]
fn values_are_kept_to_a_milli() {
    let s = MetricStore::temporary(StoreOptions::default()).unwrap();
    let a = cpu("a");
    let raw = [0.123_556_789_1, -2.5e-4, 1_234.000_4, 3.0e12 + 0.5];
    let samples: Vec<_> = raw
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            (
                a.clone(),
                Point {
                    ts: i as i64,
                    value: v,
                },
            )
        })
        .collect();
    s.insert(&samples).unwrap();
    let got: Vec<f64> = s
        .query(&a, 0, 10)
        .unwrap()
        .iter()
        .map(|p| p.value)
        .collect();
    assert_eq!(got, [0.124, 0.0, 1234.0, 3.0e12 + 0.5]);
}

#[test]
fn retention_drops_folded_hours_too() {
    let s = MetricStore::temporary(StoreOptions {
        retention: Duration::from_secs(3600),
        ..Default::default()
    })
    .unwrap();
    let a = cpu("a");
    for batch in steady(&a, 0, 3 * 3600).chunks(60) {
        s.insert(batch).unwrap();
    }
    let now = 3 * 3_600_000;
    s.gc(now).unwrap();
    let left = s.query(&a, 0, i64::MAX).unwrap();
    assert_eq!(left.first().map(|p| p.ts), Some(now - 3_600_000));
    assert_eq!(left.len(), 3600);
}

#[test]
fn an_uncompressed_store_is_migrated_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path()).unwrap();
        let series = db.open_tree("series").unwrap();
        let chunks = db.open_tree("chunks").unwrap();
        let name = cpu("old").encode();
        series.insert(name.as_bytes(), &7u32.to_be_bytes()).unwrap();
        let mut raw = Vec::new();
        for (ts, v) in [(60_000i64, 1.5f64), (61_000, 2.5)] {
            raw.extend_from_slice(&ts.to_le_bytes());
            raw.extend_from_slice(&v.to_le_bytes());
        }
        chunks.insert(chunk_key(7, 60_000), raw).unwrap();
        db.flush().unwrap();
    }
    let s = reopen(dir.path());
    assert_eq!(
        s.query(&cpu("old"), 0, i64::MAX).unwrap(),
        vec![
            Point {
                ts: 60_000,
                value: 1.5
            },
            Point {
                ts: 61_000,
                value: 2.5
            }
        ]
    );
}

#[test]
fn a_key_reads_its_labels_back_in_name_order() {
    let be = SeriesKey::new(
        MetricKind::NodeBe,
        &[("be_resource", "cpu"), ("be_allocation", "usage")],
    );
    assert_eq!(be.encode(), "node_be{be_allocation=usage,be_resource=cpu}");
    let labels: Vec<_> = be.labels().collect();
    assert_eq!(labels, [("be_allocation", "usage"), ("be_resource", "cpu")]);
    assert_eq!(be.label("be_resource"), Some("cpu"));
    assert_eq!(be.label("pod_uid"), None);
    assert_eq!(
        SeriesKey::node(MetricKind::NodeCpuUsage).labels().count(),
        0
    );
    assert_eq!(
        SeriesKey::node(MetricKind::NodeCpuUsage).encode(),
        "node_cpu_usage{}"
    );
    // A comma inside a value is kept unless a label name follows it.
    let app = SeriesKey::host_app(MetricKind::HostAppCpuUsage, "nginx, v=2");
    assert_eq!(app.label("host_app_name"), Some("nginx, v=2"));
    let pod = SeriesKey::new(
        MetricKind::PodPsi,
        &[("pod_uid", "u,1"), ("psi_degree", "")],
    );
    assert_eq!(pod.label("pod_uid"), Some("u,1"));
    assert_eq!(pod.label("psi_degree"), Some(""));
}
