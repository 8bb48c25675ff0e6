use super::*;
use serde_json::json;

fn key() -> ResourceKey {
    ("".into(), "configmaps".into())
}

fn put(store: &Store, name: &str, labels: Value) -> Committed {
    let v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": labels}});
    store
        .commit::<StoreError>(&key(), "default", name, |_| Ok(Change::Put(v)))
        .unwrap()
}

#[test]
fn revisions_are_global_and_monotonic_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        assert_eq!(put(&s, "a", json!({})).object.rev, 1);
        assert_eq!(put(&s, "b", json!({})).object.rev, 2);
        s.commit::<StoreError>(&key(), "default", "b", |_| Ok(Change::Delete))
            .unwrap();
        assert_eq!(s.rev(), 3);
    }
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.rev(), 3, "deletion revision survives a restart");
    let a = s.get(&key(), "default", "a").unwrap();
    assert_eq!(a.rev, 1);
    assert_eq!(a.value()["metadata"]["resourceVersion"], "1");
    assert!(s.get(&key(), "default", "b").is_none());
    assert_eq!(put(&s, "c", json!({})).object.rev, 4);
}

#[test]
fn watch_replays_history_and_expires_old_revisions() {
    let s = Store::temporary(StoreOptions {
        history: 3,
        ..Default::default()
    })
    .unwrap();
    for i in 0..5 {
        put(&s, &format!("o{i}"), json!({}));
    }
    let w = s.watch(&key(), Some(3), Filter::default(), false).unwrap();
    let names: Vec<&str> = w.initial.iter().map(|(_, o)| o.name.as_str()).collect();
    assert_eq!(names, vec!["o3", "o4"]);
    let err = s
        .watch(&key(), Some(1), Filter::default(), false)
        .err()
        .unwrap();
    assert_eq!((err.requested, err.oldest), (1, 2));
    let all = s.watch(&key(), None, Filter::default(), false).unwrap();
    assert_eq!(all.initial.len(), 5);
}

#[test]
fn label_transitions_become_added_and_deleted() {
    let s = Store::temporary(StoreOptions::default()).unwrap();
    let filter = Filter::parse(None, Some("app=web"), None).unwrap();
    let mut w = s.watch(&key(), None, filter, false).unwrap();
    put(&s, "x", json!({"app": "db"}));
    put(&s, "x", json!({"app": "web"}));
    put(&s, "x", json!({"app": "db"}));
    let mut kinds = Vec::new();
    while let Ok(WatchItem::Event(k, _)) = w.rx.try_recv() {
        kinds.push(k);
    }
    assert_eq!(kinds, vec![EventType::Added, EventType::Deleted]);
}

#[test]
fn slow_watcher_is_closed_without_blocking_writers() {
    let s = Store::temporary(StoreOptions {
        watcher_buffer: 4,
        ..Default::default()
    })
    .unwrap();
    let slow = s.watch(&key(), None, Filter::default(), false).unwrap();
    let mut fast = s.watch(&key(), None, Filter::default(), false).unwrap();
    for i in 0..20 {
        put(&s, &format!("o{i}"), json!({}));
        while fast.rx.try_recv().is_ok() {}
    }
    assert_eq!(s.watcher_count(&key()), 1, "the slow watcher was dropped");
    assert_eq!(s.lagged_watchers(), 1);
    drop(slow);
}

#[test]
fn bookmarks_arrive_in_order() {
    let s = Store::temporary(StoreOptions::default()).unwrap();
    let mut w = s.watch(&key(), None, Filter::default(), false).unwrap();
    put(&s, "a", json!({}));
    assert!(s.bookmark(&key(), w.id));
    assert!(matches!(
        w.rx.try_recv(),
        Ok(WatchItem::Event(EventType::Added, _))
    ));
    assert!(matches!(w.rx.try_recv(), Ok(WatchItem::Bookmark(1))));
    drop(w.rx);
    assert!(!s.bookmark(&key(), w.id));
}

#[test]
fn list_filters_by_namespace() {
    let s = Store::temporary(StoreOptions::default()).unwrap();
    put(&s, "a", json!({}));
    let other = json!({"metadata": {"name": "z", "namespace": "other"}});
    s.commit::<StoreError>(&key(), "other", "z", |_| Ok(Change::Put(other)))
        .unwrap();
    let (rev, items) = s.list(
        &key(),
        &Filter {
            namespace: Some("default".into()),
            ..Default::default()
        },
    );
    assert_eq!(rev, 2);
    assert_eq!(items.len(), 1);
    assert_eq!(s.list(&key(), &Filter::default()).1.len(), 2);
}

fn put_big(store: &Store, name: &str, i: usize, size: usize) -> Committed {
    let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"i": i.to_string(), "big": "x".repeat(size)}});
    store
        .commit::<StoreError>(&key(), "default", name, |_| Ok(Change::Put(v)))
        .unwrap()
}

#[test]
fn compaction_keeps_the_files_in_proportion_to_live_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let opts = StoreOptions {
        compact_slack_bytes: 4 << 20,
        ..Default::default()
    };
    let s = Store::open(&path, opts.clone()).unwrap();
    for i in 0..60 {
        put_big(&s, "big", i, 300_000);
    }
    put(&s, "small", json!({"a": "b"}));
    s.commit::<StoreError>(&key(), "default", "small", |_| Ok(Change::Delete))
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(s.durable(s.rev())).unwrap();
    let (disk, live) = s.sizes().unwrap();
    assert!(disk > 10 << 20, "sled keeps every version: {disk}");
    assert!(s.compact_if_needed().unwrap());
    let (after, live_after) = s.sizes().unwrap();
    assert_eq!(live, live_after);
    assert!(
        after < 2 * live + (4 << 20),
        "{after} bytes on disk for {live} live"
    );
    assert!(!s.compact_if_needed().unwrap(), "nothing more to gain");
    let rev = s.rev();
    put_big(&s, "after", 0, 10);
    drop(s);
    let s = Store::open(&path, opts).unwrap();
    assert_eq!(s.rev(), rev + 1);
    let big = s.get(&key(), "default", "big").unwrap();
    assert_eq!(big.value()["data"]["i"], "59");
    assert!(s.get(&key(), "default", "small").is_none());
    assert!(s.get(&key(), "default", "after").is_some());
}

#[test]
fn an_interrupted_compaction_leaves_one_complete_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let s = Store::open(&path, StoreOptions::default()).unwrap();
        put(&s, "a", json!({}));
    }
    // A partial new database beside the live one is discarded.
    std::fs::create_dir_all(dir.path().join("db.compact")).unwrap();
    std::fs::write(dir.path().join("db.compact/db"), b"partial").unwrap();
    {
        let s = Store::open(&path, StoreOptions::default()).unwrap();
        assert!(s.get(&key(), "default", "a").is_some());
        put(&s, "b", json!({}));
    }
    assert!(!dir.path().join("db.compact").exists());
    // The live one renamed away and the new one complete: the new one is opened.
    std::fs::rename(&path, dir.path().join("db.compact")).unwrap();
    let s = Store::open(&path, StoreOptions::default()).unwrap();
    assert!(s.get(&key(), "default", "b").is_some());
}

#[test]
fn watch_history_is_bounded_by_bytes() {
    let s = Store::temporary(StoreOptions {
        history_bytes: 1 << 20,
        ..Default::default()
    })
    .unwrap();
    for i in 0..50 {
        put_big(&s, "big", i, 100_000);
    }
    let t = s.mem.type_state(&key());
    let inner = lock(&t);
    assert!(inner.history_bytes <= 1 << 20, "{}", inner.history_bytes);
    assert!(inner.history.len() >= 9 && inner.history.len() <= 10);
    let oldest = inner.oldest;
    drop(inner);
    assert!(
        s.watch(&key(), Some(oldest - 1), Filter::default(), false)
            .is_err()
    );
}

/// An acknowledged write is visible to the next read: the flusher may promote at any
/// moment, so a revision must never be published before its write is staged.
#[test]
fn acknowledged_writes_are_read_back_under_concurrent_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Store::open(dir.path(), StoreOptions::default()).unwrap());
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                let name = format!("w{t}");
                let mut stale = Vec::new();
                for i in 0..1500 {
                    let c = put(&s, &name, json!({"i": i.to_string()}));
                    rt.block_on(s.durable(c.object.rev)).unwrap();
                    let read = s.get(&key(), "default", &name).map(|o| o.rev);
                    if read != Some(c.object.rev) || s.visible_rev() < c.object.rev {
                        stale.push((c.object.rev, read));
                    }
                }
                stale
            })
        })
        .collect();
    let stale: Vec<_> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(stale.is_empty(), "acked but not read back: {stale:?}");
}

fn put_kib(store: &Store, name: &str, kib: usize) {
    let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"d": "x".repeat(kib << 10)}});
    store
        .commit::<StoreError>(&key(), "default", name, |_| Ok(Change::Put(v)))
        .unwrap();
}

#[test]
fn slow_watcher_of_large_objects_is_closed_by_bytes() {
    let s = Store::temporary(StoreOptions {
        watcher_buffer_bytes: 64 << 10,
        ..Default::default()
    })
    .unwrap();
    let mut slow = s.watch(&key(), None, Filter::default(), false).unwrap();
    for i in 0..6 {
        put_kib(&s, &format!("o{i}"), 10);
    }
    assert_eq!(s.watcher_count(&key()), 1, "60 KiB queued: still open");
    let held = s.watch_queued_bytes();
    assert!(held > 60 << 10 && held < 64 << 10, "{held}");
    put_kib(&s, "o6", 10);
    assert_eq!(s.watcher_count(&key()), 0, "70 KiB would be queued: closed");
    assert_eq!(s.lagged_watchers(), 1);
    // What it was sent before it was closed is still read, then the stream ends.
    let mut read = 0;
    while slow.rx.try_recv().is_ok() {
        read += 1;
    }
    assert_eq!(read, 6);
    assert_eq!(s.watch_queued_bytes(), 0, "read items are released");
}

#[test]
fn watchers_together_hold_at_most_the_total_budget() {
    let s = Store::temporary(StoreOptions {
        watcher_buffer_bytes: 1 << 20,
        watch_buffer_bytes: 100 << 10,
        ..Default::default()
    })
    .unwrap();
    let watchers: Vec<_> = (0..3)
        .map(|_| s.watch(&key(), None, Filter::default(), false).unwrap())
        .collect();
    for i in 0..4 {
        put_kib(&s, &format!("o{i}"), 10);
    }
    assert!(s.watch_queued_bytes() <= 100 << 10);
    assert!(
        s.watcher_count(&key()) < 3,
        "a watcher past the total was closed"
    );
    let mut fast = s.watch(&key(), None, Filter::default(), false).unwrap();
    drop(watchers);
    assert_eq!(
        s.watch_queued_bytes(),
        0,
        "a dropped watcher's queue is released"
    );
    put_kib(&s, "o4", 10);
    assert!(
        fast.rx.try_recv().is_ok(),
        "room again once the slow ones are gone"
    );
}
