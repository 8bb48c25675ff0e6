//! `koord simulate replay` throughput, no API server in the loop: a recording of 5,000
//! nodes (4 CPU / 32 Gi / 110 pods, a NodeMetric each) and 50,000 pods — 40,000 bound when
//! the recording began (8 per node, 100m / 500 Mi), 10,000 arriving one per millisecond
//! afterwards — written with the recorder's own writer, then replayed under Koordinator's
//! default scheduler profile: the recording read and decoded, the initial state loaded,
//! every arriving pod placed by the scheduling cycle, the manager's NodeResource samples
//! and the descheduler's passes at the start, every `deschedulingInterval` and the end.
//! Printed: pods/s over the whole replay (all 50,000 pods of the recording per second of
//! wall time, until the replay returns its result), the CPU per pod of every thread until
//! then (the replay's state is freed on a side thread after), and the process's peak RSS.
//! Budget: ≥ 20,000 pods/s.
//! `BENCH_NODES`, `BENCH_BOUND` and `BENCH_ARRIVING` change the shape.
//! Run: `cargo bench --bench simulate_replay`.

use std::time::Instant;

use koord::simulate::recording::{Change, FORMAT, Header, Op, Writer};
use serde_json::json;

mod common;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node(i: usize) -> serde_json::Value {
    let alloc = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i}"), "labels": {"kubernetes.io/hostname": format!("node-{i}")}},
        "status": {"allocatable": alloc, "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pod(i: usize, node: Option<usize>) -> serde_json::Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": "default", "uid": format!("uid-{i}"),
            "creationTimestamp": "2026-12-07T00:00:00Z"},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(format!("node-{n}"));
        p["status"] = json!({"phase": "Running"});
    }
    p
}

fn metric(i: usize) -> serde_json::Value {
    json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": format!("node-{i}")},
        "status": {"updateTime": "2026-12-07T00:00:00Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "8Gi"}}}}})
}

fn write(path: &std::path::Path, nodes: usize, bound: usize, arriving: usize) {
    let header = Header {
        format: FORMAT.into(),
        started_at: "2026-12-07T00:00:00Z".into(),
        server: "bench".into(),
        kinds: vec!["Node".into(), "Pod".into(), "NodeMetric".into()],
        skipped: vec![],
        embedded: false,
    };
    let mut w = Writer::create(path, &header).unwrap();
    let mut put = |t: u64, op: Op, kind: &str, object: serde_json::Value| {
        let c = Change {
            t,
            op,
            kind: kind.into(),
            object,
        };
        w.change(&c).unwrap();
    };
    put(0, Op::Init, "Node", json!(null));
    for i in 0..nodes {
        put(0, Op::Sync, "Node", node(i));
    }
    put(0, Op::Synced, "Node", json!(null));
    put(0, Op::Init, "Pod", json!(null));
    for i in 0..bound {
        put(0, Op::Sync, "Pod", pod(i, Some(i % nodes)));
    }
    put(0, Op::Synced, "Pod", json!(null));
    put(0, Op::Init, "NodeMetric", json!(null));
    for i in 0..nodes {
        put(0, Op::Sync, "NodeMetric", metric(i));
    }
    put(0, Op::Synced, "NodeMetric", json!(null));
    for i in 0..arriving {
        put(1000 + i as u64, Op::Apply, "Pod", pod(bound + i, None));
    }
    w.finish().unwrap();
}

fn main() {
    let nodes = env("BENCH_NODES", 5_000);
    let bound = env("BENCH_BOUND", 40_000);
    let arriving = env("BENCH_ARRIVING", 10_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.jsonl.gz");
    write(&path, nodes, bound, arriving);
    let size = std::fs::metadata(&path).unwrap().len();
    let cpu0 = common::cpu_secs(std::process::id());
    let started = Instant::now();
    let opts = koord::simulate::replay::Options {
        name: "A".into(),
        scheduler: koord::scheduler::config::from_file(None).unwrap(),
        slo: None,
        descheduler: None,
        sample_every_ms: 60_000,
    };
    let run = koord::simulate::driver::replay(&path, &opts, None).unwrap();
    let total = started.elapsed().as_secs_f64();
    let cpu = common::cpu_secs(std::process::id()) - cpu0;
    let pods = bound + arriving;
    assert_eq!(run.placements.len(), arriving, "every arriving pod placed");
    let (_, peak) = common::rss_mib(std::process::id());
    println!(
        "simulate replay: {nodes} nodes, {pods} pods ({bound} bound, {arriving} arriving), recording {:.1} MiB gzip",
        size as f64 / (1 << 20) as f64
    );
    println!(
        "  {:.0} pods/s over the whole replay ({total:.2} s, the recording read as it is replayed; {} cycles); {:.1} µs CPU per pod; peak RSS {peak:.0} MiB",
        pods as f64 / total,
        run.cycles,
        cpu * 1e6 / pods as f64
    );
}
