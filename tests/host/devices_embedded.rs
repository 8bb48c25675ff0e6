//! GPU sharing end to end with `koord --role=all --embedded` and the NVML stand-in (root
//! only; CI is root): the koordlet reports the node's Device, the manager puts the GPU
//! resources and labels on the Node, DeviceShare (MostAllocated) packs two half-GPU pods on
//! one GPU and the third on the other, the embedded node runtime starts each container with
//! the `NVIDIA_VISIBLE_DEVICES` the koordlet's GPUEnvInject hook derived from the
//! allocation, and `koord explain schedule` over a snapshot of the cluster names
//! DeviceShare's reasons.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::burner::can_run;
use common::{Koord, eventually, free_port, koord_bin};
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::api::scheduling::device::Device;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

const RATIO: &str = "koordinator.sh/gpu-memory-ratio";

fn gpu_pod(name: &str, ratio: &str, out: &Path) -> Pod {
    let res = json!({"cpu": "10m", "memory": "16Mi", RATIO: ratio});
    let script = format!(
        "echo \"$NVIDIA_VISIBLE_DEVICES\" > {}/{name}; sleep 3600 # {}",
        out.display(),
        common::marker()
    );
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                "resources": {"requests": res, "limits": res}}]}}))
    .unwrap()
}

fn allocated(p: &Pod) -> Option<Value> {
    let raw = p
        .metadata
        .annotations
        .as_ref()?
        .get("scheduling.koordinator.sh/device-allocated")?;
    serde_json::from_str(raw).ok()
}

fn config(dir: &Path, lib: &Path) -> std::path::PathBuf {
    // Koordinator's profile (a file replaces it whole), DeviceShare packing.
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/koord-scheduler-config.yaml");
    let text = std::fs::read_to_string(builtin).unwrap().replacen(
        "  - pluginConfig:\n",
        "  - pluginConfig:\n    - name: DeviceShare\n      args:\n        \
         apiVersion: kubescheduler.config.k8s.io/v1\n        kind: DeviceShareArgs\n        \
         scoringStrategy: {type: MostAllocated}\n",
        1,
    );
    let sched = dir.join("scheduler.yaml");
    std::fs::write(&sched, text).unwrap();
    let koord = dir.join("koord.yaml");
    std::fs::write(
        &koord,
        format!(
            "koordlet:\n  featureGates: {{Accelerators: true, GPUEnvInject: true}}\n  \
             devices: {{nvmlLibrary: {}, syncIntervalSeconds: 1}}\n\
             manager:\n  featureGates: {{EnableSyncGPUSharedResource: true}}\n\
             scheduler:\n  configFile: {}\n",
            lib.display(),
            sched.display()
        ),
    )
    .unwrap();
    koord
}

async fn bound(pods: &Api<Pod>, name: &str) -> Option<Pod> {
    let ok = eventually(Duration::from_secs(60), || async {
        pods.get(name).await.is_ok_and(|p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() && allocated(&p).is_some()
        })
    })
    .await;
    if ok { pods.get(name).await.ok() } else { None }
}

async fn env_of(out: &Path, name: &str) -> Option<String> {
    let file = out.join(name);
    let ok = eventually(Duration::from_secs(30), || async {
        std::fs::read_to_string(&file).is_ok_and(|s| !s.trim().is_empty())
    })
    .await;
    ok.then(|| std::fs::read_to_string(&file).unwrap().trim().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_gpu_pods_share_a_gpu_and_get_its_env() {
    if !can_run() {
        eprintln!("skipping: needs root and cgroups for the embedded node runtime");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = common::nvml::fake_nvml(dir.path(), 2) else {
        return;
    };
    let out = dir.path().join("env");
    std::fs::create_dir_all(&out).unwrap();
    let cfg = config(dir.path(), &lib);
    let data = dir.path().join("data");
    let parent = format!("koord-test-{}-gpu-e2e", std::process::id());
    let (api, admin, pods_addr) = (free_port(), free_port(), free_port());
    let koord = Koord::start(
        &[
            "--role=all",
            "--embedded",
            "--config",
            cfg.to_str().unwrap(),
            "--embedded-addr",
            &format!("127.0.0.1:{api}"),
            "--admin-addr",
            &format!("127.0.0.1:{admin}"),
            "--data-dir",
            data.to_str().unwrap(),
            "--node-name",
            "koord-node",
        ],
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
                &format!("127.0.0.1:{pods_addr}"),
            ),
        ],
        dir.path(),
    );
    let kc = data.join("kubeconfig");
    let client = common::embedded_client(&koord, &kc).await;

    // The koordlet's Device, then the manager's node resources and labels.
    let devices: Api<Device> = Api::all(client.clone());
    let reported = eventually(Duration::from_secs(60), || async {
        devices
            .get_opt("koord-node")
            .await
            .ok()
            .flatten()
            .is_some_and(|d| d.spec.devices.as_ref().is_some_and(|l| l.len() == 2))
    })
    .await;
    assert!(reported, "no Device\n{}", koord.logs());
    let nodes: Api<Node> = Api::all(client.clone());
    let want = [
        ("koordinator.sh/gpu-core", "200"),
        (RATIO, "200"),
        ("koordinator.sh/gpu-memory", "171798691840"),
        ("koordinator.sh/gpu", "200"),
        ("koordinator.sh/gpu.shared", "200"),
    ];
    let advertised = eventually(Duration::from_secs(60), || async {
        nodes.get("koord-node").await.is_ok_and(|n| {
            let alloc = n.status.and_then(|s| s.allocatable).unwrap_or_default();
            let labels = n.metadata.labels.unwrap_or_default();
            want.iter()
                .all(|(k, v)| alloc.get(*k).is_some_and(|q| q.0 == *v))
                && labels
                    .get("node.koordinator.sh/gpu-model")
                    .map(String::as_str)
                    == Some("A100-SXM4-80GB")
        })
    })
    .await;
    let node = nodes.get("koord-node").await.unwrap();
    assert!(
        advertised,
        "node allocatable {:?}\n{}",
        node.status.and_then(|s| s.allocatable),
        koord.logs()
    );

    // GPU usage in the NodeMetric (the GPU collector through the same NVML).
    let metrics: Api<koord::api::slo::NodeMetric> = Api::all(client.clone());
    let usage = eventually(Duration::from_secs(60), || async {
        metrics.get("koord-node").await.is_ok_and(|m| {
            let gpus = m
                .status
                .and_then(|s| s.node_metric)
                .and_then(|n| n.node_usage.devices)
                .unwrap_or_default();
            gpus.len() == 2
                && gpus.iter().all(|g| {
                    g.resources
                        .as_ref()
                        .is_some_and(|r| r.contains_key("koordinator.sh/gpu-memory"))
                })
        })
    })
    .await;
    assert!(usage, "no GPU usage in the NodeMetric\n{}", koord.logs());

    // Two half-GPU pods share GPU 0 (MostAllocated packs); the third gets GPU 1.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let mut minors = Vec::new();
    for name in ["a", "b", "c"] {
        pods.create(&pp, &gpu_pod(name, "50", &out)).await.unwrap();
        let p = bound(&pods, name).await;
        let p = p.unwrap_or_else(|| panic!("{name} not scheduled\n{}", koord.logs()));
        let a = allocated(&p).unwrap();
        let g = &a["gpu"][0];
        assert_eq!(g["resources"][RATIO], "50", "{a}");
        assert_eq!(g["resources"]["koordinator.sh/gpu-memory"], "40Gi", "{a}");
        let minor = g["minor"].as_i64().unwrap();
        assert_eq!(
            g["id"],
            format!("GPU-00000000-0000-0000-0000-00000000000{minor}"),
            "{a}"
        );
        minors.push(minor);
        let env = env_of(&out, name).await;
        assert_eq!(
            env,
            Some(minor.to_string()),
            "{name}: NVIDIA_VISIBLE_DEVICES\n{}",
            koord.logs()
        );
    }
    assert_eq!(minors, [0, 0, 1]);

    // With a gone, each GPU has half free: a whole-GPU pod fits the node's totals (so
    // NodeResourcesFit passes) but no single device; DeviceShare says so.
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let gone = eventually(Duration::from_secs(30), || async {
        pods.get_opt("a").await.is_ok_and(|p| p.is_none())
    })
    .await;
    assert!(gone, "{}", koord.logs());
    pods.create(&pp, &gpu_pod("whole", "100", &out))
        .await
        .unwrap();
    let refused = eventually(Duration::from_secs(30), || async {
        pods.get("whole").await.is_ok_and(|p| {
            let conds = p.status.and_then(|s| s.conditions).unwrap_or_default();
            conds.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.message
                        .as_deref()
                        .unwrap_or("")
                        .contains("Insufficient gpu devices")
            })
        })
    })
    .await;
    assert!(
        refused,
        "{:?}\n{}",
        pods.get("whole").await.map(|p| p.status),
        koord.logs()
    );

    // `koord explain schedule` over a snapshot of the cluster, plus one more half pod.
    let mut items: Vec<Value> = Vec::new();
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        items.push(json!(n));
    }
    for p in pods.list(&ListParams::default()).await.unwrap() {
        items.push(json!(p));
    }
    for d in devices.list(&ListParams::default()).await.unwrap() {
        items.push(json!(d));
    }
    let mut extra = json!(gpu_pod("e", "50", &out));
    extra["apiVersion"] = "v1".into();
    extra["kind"] = "Pod".into();
    // Queued after `whole` (the queue orders equal priorities by creation time).
    extra["metadata"]["creationTimestamp"] = "2100-01-01T00:00:00Z".into();
    items.push(extra);
    let snap = dir.path().join("snapshot.json");
    std::fs::write(
        &snap,
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();
    let sched = dir.path().join("scheduler.yaml");
    let run = std::process::Command::new(koord_bin())
        .args(["explain", "schedule", "-o", "json", "-f"])
        .arg(&snap)
        .arg("--config")
        .arg(&sched)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let entry = |key: &str| {
        v["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pod"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} missing: {text}"))
    };
    let whole = entry("default/whole");
    assert_eq!(whole["node"], Value::Null, "{text}");
    let verdict = &whole["nodes"]["koord-node"];
    assert_eq!(verdict["plugin"], "DeviceShare", "{text}");
    assert_eq!(verdict["reason"], "Insufficient gpu devices", "{text}");
    let e = entry("default/e");
    assert_eq!(e["node"], "koord-node", "{text}");
    assert!(
        e["nodes"]["koord-node"]["scores"]["DeviceShare"].is_i64(),
        "{text}"
    );
    assert_eq!(e["devices"]["gpu"][0]["resources"][RATIO], "50", "{text}");
    drop(koord);
    let root = Path::new("/sys/fs/cgroup/cpu").join(&parent);
    let gone = eventually(Duration::from_secs(20), || async { !root.exists() }).await;
    assert!(gone, "koord left its cgroups behind");
}
