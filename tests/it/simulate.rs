//! `koord simulate` on an embedded cluster: the real `koord --role=scheduler` places pods
//! arriving one after another while `koord simulate record` lists and watches the
//! cluster; replaying the recording under the same configuration places every pod where
//! the live scheduler did. `--compare` with MostAllocated scoring shows the pods it
//! places elsewhere; `--add` says how many more pods of a template fit and which plugin
//! stops the rest; the HTML report renders in headless Chromium.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, koord_bin, kubeconfig};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

const SIZES: [&str; 10] = [
    "500m", "1", "250m", "1500m", "750m", "1", "300m", "2", "600m", "400m",
];

fn pod(i: usize, cpu: &str) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": format!("app-{i}"), "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}}),
    )
    .unwrap()
}

fn replay(file: &Path, extra: &[&str]) -> Value {
    let out = std::process::Command::new(koord_bin())
        .args(["simulate", "replay", "-f"])
        .arg(file)
        .args(["-o", "json"])
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "replay failed: {err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(crate::kubectl::on_path)
}

/// Records the cluster while the live scheduler places ten pods; the recording.
async fn record_a_run(dir: &Path) -> (PathBuf, Vec<(String, String)>) {
    let (api, port) = TestApi::with_nodes(&["n1", "n2", "n3"]).await;
    let kc = kubeconfig(dir, port);
    let kc = kc.to_str().unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let data = dir.to_str().unwrap();
    let sched = Koord::start(
        &[
            "--role=scheduler",
            "--kubeconfig",
            kc,
            "--admin-addr",
            &admin,
            "--data-dir",
            data,
        ],
        &[],
        dir,
    );
    let file = dir.join("run.jsonl.gz");
    let mut recorder = Koord::start(
        &[
            "simulate",
            "record",
            "--kubeconfig",
            kc,
            "--duration",
            "0",
            "-o",
            file.to_str().unwrap(),
        ],
        &[],
        dir,
    );
    let recording = eventually(Duration::from_secs(20), || async {
        std::fs::read_to_string(&recorder.log).is_ok_and(|l| l.contains("recording"))
    })
    .await;
    assert!(recording, "{}", recorder.logs());
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let mut live = Vec::new();
    for (i, cpu) in SIZES.iter().enumerate() {
        pods.create(&Default::default(), &pod(i, cpu))
            .await
            .unwrap();
        let name = format!("app-{i}");
        let mut node = None;
        for _ in 0..100 {
            node = pods
                .get(&name)
                .await
                .unwrap()
                .spec
                .and_then(|s| s.node_name);
            if node.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(node.is_some(), "{name} not bound\n{}", sched.logs());
        live.push((format!("default/{name}"), node.unwrap()));
    }
    // The last binding reaches the recording, then it ends.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    recorder.signal("INT");
    assert!(
        recorder.wait_exit(Duration::from_secs(10)).is_some(),
        "{}",
        recorder.logs()
    );
    assert!(
        recorder.logs().contains("interrupted; wrote"),
        "{}",
        recorder.logs()
    );
    drop(sched);
    drop(api);
    (file, live)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_places_pods_where_the_live_scheduler_did() {
    let dir = tempfile::tempdir().unwrap();
    let (file, live) = record_a_run(dir.path()).await;
    let out = replay(
        &file,
        &["--report-dir", dir.path().join("report").to_str().unwrap()],
    );
    let run = &out["runs"][0];
    for (pod, node) in &live {
        assert_eq!(
            run["placements"][pod]["node"],
            json!(node),
            "{pod}: {:#}",
            run["agreement"]
        );
    }
    assert_eq!(
        run["agreement"]["compared"],
        json!(live.len()),
        "{:#}",
        run["agreement"]
    );
    assert_eq!(run["agreement"]["equal"], json!(live.len()));
    assert!(run["samples"].as_array().is_some_and(|s| !s.is_empty()));

    // MostAllocated, weighted above the rest, packs: some pods go elsewhere.
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/koord-scheduler-config.yaml"
    ))
    .unwrap();
    let packed = dir.path().join("most-allocated.yaml");
    let most = base
        .replace("type: LeastAllocated", "type: MostAllocated")
        .replace(
            "      score:\n        enabled:\n",
            "      score:\n        enabled:\n          - name: NodeResourcesFit\n            weight: 10\n",
        );
    assert!(most.contains("weight: 10"));
    std::fs::write(&packed, most).unwrap();
    let compare = format!("scheduler-config={}", packed.display());
    let out = replay(&file, &["--compare", &compare]);
    let diffs = out["differences"].as_array().unwrap();
    assert!(!diffs.is_empty(), "{out:#}");
    assert_eq!(out["runs"][1]["name"], json!("B"));
    for d in diffs {
        assert!(
            d["A"].is_string() && d["B"].is_string() && d["A"] != d["B"],
            "{d}"
        );
    }

    // What if: 1-CPU pods on what is left (3 nodes x 4 CPUs, 8.3 CPUs requested).
    let template = dir.path().join("batch.yaml");
    std::fs::write(
        &template,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: batch, namespace: default}\n\
         spec:\n  template:\n    metadata: {labels: {app: batch}}\n    spec:\n      schedulerName: koord-scheduler\n      containers:\n      - name: c\n        image: x\n        resources: {requests: {cpu: '1'}}\n",
    )
    .unwrap();
    let add = format!("{} x 50", template.display());
    let out = replay(&file, &["--add", &add]);
    let w = &out["runs"][0]["whatIf"];
    assert_eq!(w["asked"], json!(50));
    let fit = w["fit"].as_u64().unwrap();
    assert!((1..50).contains(&fit), "{w:#}");
    let per_node: u64 = w["nodes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(per_node, fit);
    let details =
        &w["stopped"]["detailedExplanation"][0]["scheduleExplanation"]["nodeFailedDetails"];
    assert_eq!(
        details[0]["failedPlugin"],
        json!("NodeResourcesFit"),
        "{w:#}"
    );
    assert_eq!(details[0]["reason"], json!("Insufficient cpu"));

    // The report opens in a browser.
    let html = dir.path().join("report").join("report.html");
    assert!(html.is_file());
    let Some(browser) = chromium() else {
        eprintln!("skipping the browser check: no chromium on PATH (scripts/deps.sh installs it)");
        return;
    };
    let out = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<polyline"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dom.contains("koord simulate"));
    assert!(
        dom.matches("<figure>").count() >= 3,
        "cluster and node charts"
    );
}

/// A loopback proxy in front of the API server that notes every request line.
async fn counting_proxy(upstream: u16) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let noted = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(("127.0.0.1", upstream))
                .await
                .unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let noted = noted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    // GETs have no body: each request starts a chunk or follows a blank line.
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    for line in text.split("\r\n").filter(|l| l.starts_with("GET ")) {
                        noted.lock().unwrap().push(line.to_string());
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_lists_and_watches_each_kind_once() {
    let (api, port) = TestApi::with_nodes(&["n1", "n2"]).await;
    let (proxy, seen) = counting_proxy(port).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), proxy);
    let file = dir.path().join("r.jsonl.gz");
    let mut recorder = Koord::start(
        &[
            "simulate",
            "record",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--duration",
            "4s",
            "-o",
            file.to_str().unwrap(),
        ],
        &[],
        dir.path(),
    );
    assert!(
        recorder.wait_exit(Duration::from_secs(30)).is_some(),
        "{}",
        recorder.logs()
    );
    assert!(
        recorder.logs().contains("duration reached"),
        "{}",
        recorder.logs()
    );
    let mut lists: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for line in seen.lock().unwrap().iter() {
        let target = line.split(' ').nth(1).unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if !query.contains("limit=") && !query.contains("watch=") {
            continue; // discovery
        }
        let e = lists.entry(path.to_string()).or_default();
        if query.contains("watch=true") {
            e.1 += 1;
        } else if !query.contains("continue=") {
            e.0 += 1;
        }
    }
    let kinds = koord::simulate::record::KINDS.len();
    assert_eq!(lists.len(), kinds, "{lists:#?}");
    for (path, (l, w)) in &lists {
        assert_eq!((*l, *w), (1, 1), "{path}: {l} lists, {w} watches");
    }
    // The recording holds the two nodes.
    let rec = koord::simulate::recording::read(&file).unwrap();
    let nodes = rec
        .changes
        .iter()
        .filter(|c| c.kind == "Node" && c.op == koord::simulate::recording::Op::Sync)
        .count();
    assert_eq!(nodes, 2);
    drop(api);
}
