//! Soak: the embedded API server under steady writes, and an idle `--role=all --embedded`,
//! side by side for `SOAK_SECONDS` (default 300). Each one's data directory size on disk
//! and RSS are sampled every second and printed every 30 s (now and the 30 s maximum);
//! both should stay flat (compaction, bounded history).
//!
//! The writer, each second: replaces a 2.5 MiB ConfigMap, replaces a 600 KiB one, and
//! creates then deletes ten small ones; a watcher follows all ConfigMaps.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Proc, free_port, koord, proc_stat, ready};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use koord::apiserver::store::disk_bytes;
use kube::api::{Api, DeleteParams, PostParams, WatchParams};
use serde_json::json;

fn start(dir: &Path, all: bool) -> (Proc, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "--embedded".to_string(),
        "--embedded-addr".into(),
        format!("127.0.0.1:{}", free_port()),
        "--admin-addr".into(),
        admin.clone(),
        "--data-dir".into(),
        dir.display().to_string(),
    ];
    let mut envs = vec![(
        "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
        format!("127.0.0.1:{}", free_port()),
    )];
    if all {
        args.insert(0, "--role=all".into());
    } else {
        envs.push(("KOORD_EMBEDDED__REGISTER_LOCAL_NODE", "false".into()));
    }
    let p = koord(&args, &envs);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready(&admin) {
        assert!(Instant::now() < deadline, "koord did not become ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    (p, admin)
}

async fn client(dir: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

fn cm(name: &str, size: usize, i: u64) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"i": i.to_string(), "payload": "x".repeat(size)}
    }))
    .unwrap()
}

async fn replace(api: &Api<ConfigMap>, name: &str, size: usize, i: u64) {
    let mut obj = cm(name, size, i);
    if let Ok(cur) = api.get(name).await {
        obj.metadata.resource_version = cur.metadata.resource_version;
        let _ = api.replace(name, &PostParams::default(), &obj).await;
    } else {
        let _ = api.create(&PostParams::default(), &obj).await;
    }
}

async fn write_steadily(client: kube::Client, writes: Arc<AtomicU64>, until: Instant) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut i = 0;
    while Instant::now() < until {
        tick.tick().await;
        i += 1;
        replace(&api, "big", 2_500_000, i).await;
        replace(&api, "medium", 600_000, i).await;
        for k in 0..10 {
            let name = format!("small-{i}-{k}");
            let _ = api.create(&PostParams::default(), &cm(&name, 200, i)).await;
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
        writes.fetch_add(22, Ordering::Relaxed);
    }
}

async fn watch_all(client: kube::Client, seen: Arc<AtomicU64>) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    loop {
        let Ok(stream) = api.watch(&WatchParams::default(), "0").await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let mut stream = stream.boxed();
        while let Some(Ok(_)) = stream.next().await {
            seen.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("soak: bench");
        return;
    }
    let secs: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let tmp = tempfile::tempdir().unwrap();
    let (busy_dir, idle_dir) = (tmp.path().join("busy"), tmp.path().join("idle"));
    let (busy, _) = start(&busy_dir, false);
    let (idle, _) = start(&idle_dir, true);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let writes = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let c = rt.block_on(client(&busy_dir));
    rt.spawn(write_steadily(c.clone(), writes.clone(), until));
    rt.spawn(watch_all(c, seen.clone()));
    println!(
        "soak {secs} s: writer = 2.5 MiB + 600 KiB ConfigMap replaced and 10 small created+deleted per second"
    );
    println!(
        "{:>6} | {:>8} {:>8} {:>13} {:>13} | {:>13} {:>13}",
        "t (s)",
        "writes",
        "events",
        "dir MiB now/max",
        "RSS MiB now/max",
        "idle dir now/max",
        "idle RSS now/max"
    );
    // Sampled every second (compaction makes the directory a sawtooth); printed every 30 s
    // with the maximum of the 30 s before.
    let mut window = [0u64; 4];
    let mut peaks = [0u64; 4];
    let mut next_print = started;
    loop {
        let now = [
            disk_bytes(&busy_dir),
            proc_stat(busy.pid()).0 * 1024,
            disk_bytes(&idle_dir),
            proc_stat(idle.pid()).0 * 1024,
        ];
        for i in 0..4 {
            window[i] = window[i].max(now[i]);
            peaks[i] = peaks[i].max(now[i]);
        }
        if Instant::now() >= next_print {
            println!(
                "{:>6} | {:>8} {:>8} {:>6.1}/{:<6.1} {:>6.1}/{:<6.1} | {:>6.1}/{:<6.1} {:>6.1}/{:<6.1}",
                started.elapsed().as_secs(),
                writes.load(Ordering::Relaxed),
                seen.load(Ordering::Relaxed),
                mib(now[0]),
                mib(window[0]),
                mib(now[1]),
                mib(window[1]),
                mib(now[2]),
                mib(window[2]),
                mib(now[3]),
                mib(window[3]),
            );
            window = [0; 4];
            next_print += Duration::from_secs(30);
        }
        if Instant::now() >= until {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    println!(
        "peaks: busy dir {:.1} MiB, RSS {:.1} MiB; idle dir {:.1} MiB, RSS {:.1} MiB",
        mib(peaks[0]),
        mib(peaks[1]),
        mib(peaks[2]),
        mib(peaks[3])
    );
    rt.shutdown_background();
}
