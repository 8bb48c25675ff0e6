//! Koordinator's helm chart, run as a cluster runs it: the chart's rendered Deployments and
//! DaemonSet (tests/fixtures/koordinator/chart-workloads.yaml, chart v1.8.0 at its default
//! values) and ConfigMaps are applied to the embedded API server, then each container's
//! `command`, `args` and `env` run with koord's binary under the command's name. Only what
//! a pod gives a container is stood in for: its mounts (ConfigMap items written to a
//! directory, hostPaths resolved to the host's paths — the writable ones to the test's
//! directory), `fieldRef` env values, a kubeconfig in place of the service account, free
//! ports in place of the chart's (the same number rewritten wherever the chart writes
//! it), and — this machine not being the koordlet's container — Koordinator's
//! `agent_mode=hostMode`. Each container must pass the chart's readiness probe and do
//! its job: a NodeSLO rendered, a pod scheduled, a NodeMetric reported.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, PodSpec};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{Koord, TestApi, eventually, free_port, http_get, kubeconfig, wait_until};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/koordinator");
const NODE: &str = "chart-node";
const NAMESPACE: &str = "koordinator-system";

fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(file)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// One workload's container as the chart writes it.
struct Workload {
    name: String,
    spec: PodSpec,
}

impl Workload {
    fn container(&self) -> &k8s_openapi::api::core::v1::Container {
        &self.spec.containers[0]
    }

    /// Every port the chart gives this container: declared, probed, or in an address flag.
    fn ports(&self) -> Vec<u16> {
        let c = self.container();
        let mut out: Vec<u16> = c
            .ports
            .iter()
            .flatten()
            .map(|p| p.container_port as u16)
            .collect();
        out.extend(self.probe().map(|(_, p)| p));
        for a in c.args.iter().flatten() {
            if let Some((_, tail)) = a.rsplit_once([':', '='])
                && let Ok(p) = tail.parse::<u16>()
                && p > 1024
            {
                out.push(p);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The readiness probe's path and port.
    fn probe(&self) -> Option<(String, u16)> {
        let get = self
            .container()
            .readiness_probe
            .as_ref()?
            .http_get
            .as_ref()?;
        let port = match &get.port {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p) => *p as u16,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(_) => return None,
        };
        Some((get.path.clone().unwrap_or_default(), port))
    }
}

fn workloads() -> Vec<Workload> {
    docs("chart-workloads.yaml")
        .into_iter()
        .map(|d| Workload {
            name: d["metadata"]["name"].as_str().unwrap().to_string(),
            spec: serde_json::from_value(d["spec"]["template"]["spec"].clone()).unwrap(),
        })
        .collect()
}

/// The chart's ConfigMaps by name (`koord-scheduler-config`, ...).
fn config_maps() -> BTreeMap<String, ConfigMap> {
    [
        "koord-scheduler-config.yaml",
        "koord-descheduler-config.yaml",
        "slo-controller-config.yaml",
    ]
    .iter()
    .flat_map(|f| docs(f))
    .map(|d| {
        let cm: ConfigMap = serde_json::from_value(d).unwrap();
        (cm.metadata.name.clone().unwrap(), cm)
    })
    .collect()
}

/// What a pod gives the container, here: ports, mounts and env resolved.
struct Prepared {
    args: Vec<String>,
    env: Vec<(String, String)>,
    ports: BTreeMap<u16, u16>,
}

fn rewrite_ports(s: &str, ports: &BTreeMap<u16, u16>) -> String {
    let mut out = s.to_string();
    for (old, new) in ports {
        for sep in [':', '='] {
            out = out.replace(&format!("{sep}{old}"), &format!("{sep}{new}"));
        }
        if out == old.to_string() {
            out = new.to_string();
        }
    }
    out
}

fn prepare(w: &Workload, dir: &Path, cms: &BTreeMap<String, ConfigMap>, kc: &Path) -> Prepared {
    let ports: BTreeMap<u16, u16> = w.ports().into_iter().map(|p| (p, free_port())).collect();
    let c = w.container();
    let mut args: Vec<String> = c
        .args
        .iter()
        .flatten()
        .map(|a| rewrite_ports(a, &ports))
        .collect();
    let volumes = w.spec.volumes.clone().unwrap_or_default();
    for m in c.volume_mounts.iter().flatten() {
        let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
            continue;
        };
        let target: PathBuf = if let Some(cm) = &v.config_map {
            let data = cms[cm.name.as_str()].data.clone().unwrap_or_default();
            let at = dir.join(m.name.as_str());
            std::fs::create_dir_all(&at).unwrap();
            for item in cm.items.iter().flatten() {
                let text = rewrite_ports(&data[&item.key], &ports);
                std::fs::write(at.join(&item.path), text).unwrap();
            }
            at
        } else if let Some(h) = &v.host_path {
            PathBuf::from(&h.path)
        } else {
            continue;
        };
        let mount = m.mount_path.trim_end_matches('/');
        let to = target.display().to_string();
        for a in args.iter_mut() {
            *a = a.replace(
                &format!("={mount}"),
                &format!("={}", to.trim_end_matches('/')),
            );
        }
    }
    let mut env: Vec<(String, String)> = c
        .env
        .iter()
        .flatten()
        .map(|e| {
            let from = e.value_from.as_ref().and_then(|f| f.field_ref.as_ref());
            let v = match from.map(|f| f.field_path.as_str()) {
                Some("metadata.namespace") => NAMESPACE.to_string(),
                Some("spec.nodeName") => NODE.to_string(),
                _ => rewrite_ports(e.value.as_deref().unwrap_or_default(), &ports),
            };
            (e.name.clone(), v)
        })
        .collect();
    env.push(("KUBECONFIG".into(), kc.display().to_string()));
    let data = dir.join("data");
    env.push(("KOORD_COMMON__DATA_DIR".into(), data.display().to_string()));
    let admin = format!("127.0.0.1:{}", free_port());
    env.push(("KOORD_COMMON__ADMIN_ADDR".into(), admin));
    if c.command.iter().flatten().any(|c| c.ends_with("/koordlet")) {
        env.push(("agent_mode".into(), "hostMode".into()));
    }
    args.retain(|a| !a.is_empty());
    Prepared { args, env, ports }
}

async fn apply(api: &TestApi, cms: &BTreeMap<String, ConfigMap>) {
    let c = api.client.clone();
    let pp = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    // The embedded API server may have made it already.
    let _ = Api::<Namespace>::all(c.clone()).create(&pp, &ns).await;
    for cm in cms.values() {
        Api::<ConfigMap>::namespaced(c.clone(), NAMESPACE)
            .create(&pp, cm)
            .await
            .unwrap();
    }
    for d in docs("chart-workloads.yaml") {
        let obj: DynamicObject = serde_json::from_value(d.clone()).unwrap();
        let kind = d["kind"].as_str().unwrap();
        let gvk = kube::api::GroupVersionKind::gvk("apps", "v1", kind);
        let ar = kube::api::ApiResource::from_gvk(&gvk);
        Api::<DynamicObject>::namespaced_with(c.clone(), NAMESPACE, &ar)
            .create(&pp, &obj)
            .await
            .unwrap_or_else(|e| panic!("applying the chart's {kind}: {e}"));
    }
}

/// Where the chart's device daemon writes (its hostPath, the koordlet's default).
const DEVICE_FILE: &str = "/var/run/koordlet/xpu-device-infos/ic-device";

/// The device daemon, run as the chart runs it, writes the host's devices where the
/// koordlet reads them (root only: the path is the host's /var/run).
fn check_device_daemon(koord: &Koord) {
    if !nix_is_root() {
        eprintln!("skipped the device daemon's file check: {DEVICE_FILE} needs root");
        return;
    }
    let written = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(DEVICE_FILE)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
            .is_some()
    });
    assert!(
        written,
        "no device list at {DEVICE_FILE}:\n{}",
        koord.logs()
    );
}

fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_workloads_run_koord_unchanged() {
    // The device daemon writes into the host's /var/run; remove what it leaves.
    let device_dir = Path::new(DEVICE_FILE).parent().unwrap();
    let made = [device_dir, device_dir.parent().unwrap()].map(|d| (d, !d.exists()));
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = TestApi::with_nodes(&[NODE]).await;
    let cms = config_maps();
    apply(&api, &cms).await;
    let kc = kubeconfig(dir.path(), port);
    let mut running: Vec<(String, Koord)> = Vec::new();
    for w in workloads() {
        let wdir = dir.path().join(&w.name);
        std::fs::create_dir_all(&wdir).unwrap();
        let p = prepare(&w, &wdir, &cms, &kc);
        let command = w.container().command.clone().unwrap_or_default();
        let name = Path::new(&command[0])
            .file_name()
            .unwrap()
            .to_string_lossy();
        let args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = p
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let koord = Koord::start_as(&name, &args, &env, &wdir);
        if name == "koord-device-daemon" {
            // No probe and no port: its job is the device file the koordlet reads.
            check_device_daemon(&koord);
            running.push((w.name.clone(), koord));
            continue;
        }
        // The chart's readiness probe, on the port it names; the koordlet (no probe in
        // the chart) on its `-addr`.
        let (path, port) = match w.probe() {
            Some((path, port)) => (format!("/{}", path.trim_start_matches('/')), p.ports[&port]),
            None => ("/readyz".to_string(), p.ports[&9316]),
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let ready = wait_until(Duration::from_secs(40), || {
            http_get(addr, &path).is_some_and(|(s, _)| s == 200)
        });
        assert!(
            ready,
            "{}: {path} on {port} never answered 200:\n{}",
            w.name,
            koord.logs()
        );
        running.push((w.name.clone(), koord));
    }
    let c = api.client.clone();
    let logs = |running: &[(String, Koord)]| {
        running
            .iter()
            .map(|(n, k)| format!("--- {n}\n{}", k.logs()))
            .collect::<String>()
    };
    // koord-manager: the node's NodeSLO.
    let slos: Api<koord::api::slo::NodeSLO> = Api::all(c.clone());
    let rendered = eventually(Duration::from_secs(30), || async {
        slos.get_opt(NODE).await.ok().flatten().is_some()
    })
    .await;
    assert!(rendered, "no NodeSLO:\n{}", logs(&running));
    // ... and, CPU normalization being off by default, the node's ratio "1.00".
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let key = "node.koordinator.sh/cpu-normalization-ratio";
    let ratio = eventually(Duration::from_secs(30), || async {
        let n = nodes.get(NODE).await.ok();
        let a = n.and_then(|n| n.metadata.annotations);
        a.and_then(|a| a.get(key).cloned()).as_deref() == Some("1.00")
    })
    .await;
    assert!(ratio, "no {key}:\n{}", logs(&running));
    // koord-scheduler: a pod that names it is bound.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let bound = eventually(Duration::from_secs(30), || async {
        let p = pods.get_opt("web").await.ok().flatten();
        p.and_then(|p| p.spec?.node_name).as_deref() == Some(NODE)
    })
    .await;
    assert!(bound, "pod not scheduled:\n{}", logs(&running));
    // koordlet: the node's NodeMetric reported.
    let metrics: Api<koord::api::slo::NodeMetric> = Api::all(c.clone());
    let reported = eventually(Duration::from_secs(40), || async {
        let m = metrics.get_opt(NODE).await.ok().flatten();
        m.and_then(|m| m.status?.update_time).is_some()
    })
    .await;
    assert!(reported, "no NodeMetric report:\n{}", logs(&running));
    drop(running);
    let _ = std::fs::remove_file(DEVICE_FILE);
    for (d, _) in made.iter().filter(|(_, new)| *new) {
        let _ = std::fs::remove_dir(d);
    }
    api.stop().await;
}
