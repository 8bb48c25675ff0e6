//! A cluster as koord's roles meet it in production, on the embedded API server: HTTPS,
//! RBAC enforced, every container running under its pod's ServiceAccount token. Workloads
//! (Deployments, DaemonSets) are run as a kubelet would run them — each container's
//! `command` (or koord's entry point), `args` and `env`, with only what a node gives a
//! container stood in for: ConfigMap volumes written to a directory, hostPaths resolved
//! to the host's paths (writable ones to the test's directory), emptyDirs as fresh
//! directories, `fieldRef` env values, a kubeconfig carrying the ServiceAccount's token
//! in place of the projected one, free loopback ports in place of the pod's (the same
//! number rewritten wherever the pod spec writes it), and — this machine not being the
//! koordlet's container — Koordinator's `agent_mode=hostMode` with pods read from the API
//! (there is no kubelet here).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, ServiceAccount};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::common::{Koord, TestApi, free_port, http_get, wait_until};

const ADMIN_TOKEN: &str = "podrun-admin-token-0123456789abcdef";
pub const NAMESPACE: &str = "koordinator-system";

/// The API server, its admin client and the test's directory.
pub struct Cluster {
    pub api: TestApi,
    pub dir: tempfile::TempDir,
}

/// YAML documents of `text` (empty ones dropped).
pub fn docs_of(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

impl Cluster {
    /// An HTTPS API server that authenticates and authorizes every request, with nodes of
    /// (name, cpu, memory).
    pub async fn start(nodes: &[(&str, &str, &str)]) -> Cluster {
        let mut opts = koord::apiserver::Options::for_tests();
        opts.addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        opts.tls = true;
        opts.bearer_token = Some(ADMIN_TOKEN.into());
        let api = TestApi::start_with(opts).await;
        let pp = PostParams::default();
        let all: Api<k8s_openapi::api::core::v1::Node> = Api::all(api.client.clone());
        for (name, cpu, memory) in nodes {
            let alloc = serde_json::json!({"cpu": cpu, "memory": memory, "pods": "110"});
            let node = serde_json::json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": alloc, "capacity": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}]}});
            all.create(&pp, &serde_json::from_value(node).unwrap())
                .await
                .unwrap();
        }
        Cluster {
            api,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.api.client.clone()
    }

    /// Creates each object, or replaces the one of that name (as `kubectl apply` would
    /// end up); CustomResourceDefinitions first, so objects of their kinds resolve.
    pub async fn apply(&self, docs: &[Value]) {
        let (crds, rest): (Vec<&Value>, Vec<&Value>) = docs
            .iter()
            .partition(|d| d["kind"] == "CustomResourceDefinition");
        for batch in [crds, rest] {
            let discovery = Discovery::new(self.client()).run().await.unwrap();
            for d in batch {
                self.apply_one(&discovery, d).await;
            }
        }
    }

    async fn apply_one(&self, discovery: &Discovery, d: &Value) {
        let (group, version) = match d["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", d["apiVersion"].as_str().unwrap()),
        };
        let gvk = GroupVersionKind::gvk(group, version, d["kind"].as_str().unwrap());
        let (ar, caps): (ApiResource, _) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("the API server does not serve {gvk:?}"));
        let mut obj: DynamicObject = serde_json::from_value(d.clone()).unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj.namespace().unwrap_or_else(|| NAMESPACE.to_string());
                Api::namespaced_with(self.client(), &ns, &ar)
            }
            Scope::Cluster => Api::all_with(self.client(), &ar),
        };
        let name = obj.name_any();
        let pp = PostParams::default();
        match api.get_opt(&name).await.unwrap() {
            None => {
                api.create(&pp, &obj)
                    .await
                    .unwrap_or_else(|e| panic!("creating {} {name}: {e}", gvk.kind));
            }
            Some(have) => {
                obj.metadata.resource_version = have.metadata.resource_version;
                api.replace(&name, &pp, &obj)
                    .await
                    .unwrap_or_else(|e| panic!("replacing {} {name}: {e}", gvk.kind));
            }
        }
    }

    /// A kubeconfig that authenticates as ServiceAccount `ns/sa` with a token from the
    /// TokenRequest API (what the kubelet projects into the pod).
    pub async fn service_account_kubeconfig(&self, ns: &str, sa: &str) -> PathBuf {
        let api: Api<ServiceAccount> = Api::namespaced(self.client(), ns);
        let req = serde_json::from_value(serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86400}}))
        .unwrap();
        let token = api
            .create_token_request(sa, &PostParams::default(), &req)
            .await
            .unwrap_or_else(|e| panic!("no token for {ns}/{sa}: {e}"))
            .status
            .unwrap()
            .token;
        let text = self.api.server().kubeconfig().replace(ADMIN_TOKEN, &token);
        assert!(
            text.contains(&token),
            "the admin token is in the kubeconfig"
        );
        let path = self.dir.path().join(format!("kubeconfig-{sa}"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// One workload's pod template, as its Deployment or DaemonSet writes it.
pub struct Workload {
    pub name: String,
    pub spec: PodSpec,
}

impl Workload {
    /// The Deployments and DaemonSets among `docs`.
    pub fn all(docs: &[Value]) -> Vec<Workload> {
        docs.iter()
            .filter(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
            .map(|d| Workload {
                name: d["metadata"]["name"].as_str().unwrap().to_string(),
                spec: serde_json::from_value(d["spec"]["template"]["spec"].clone()).unwrap(),
            })
            .collect()
    }

    fn container(&self) -> &k8s_openapi::api::core::v1::Container {
        &self.spec.containers[0]
    }

    /// Every port the pod spec gives the container: declared, probed, or in an address
    /// flag or env value.
    fn ports(&self) -> Vec<u16> {
        let c = self.container();
        let mut out: Vec<u16> = c
            .ports
            .iter()
            .flatten()
            .map(|p| p.container_port as u16)
            .collect();
        out.extend(self.probe().map(|(_, p)| p));
        let values = c
            .args
            .iter()
            .flatten()
            .chain(c.env.iter().flatten().filter_map(|e| e.value.as_ref()));
        for a in values {
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
    pub fn probe(&self) -> Option<(String, u16)> {
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
        Some((
            format!(
                "/{}",
                get.path.clone().unwrap_or_default().trim_start_matches('/')
            ),
            port,
        ))
    }

    /// The program the container runs (`koord` when the image's entry point is koord's).
    fn program(&self) -> String {
        let command = self.container().command.clone().unwrap_or_default();
        command
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map_or("koord".into(), |n| n.to_string_lossy().into_owned())
    }
}

/// A running container: its process and the ports it was given.
pub struct Running {
    pub name: String,
    pub koord: Koord,
    pub ports: BTreeMap<u16, u16>,
    /// Where its readiness is asked.
    pub ready_at: Option<(String, SocketAddr)>,
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

/// The mounts of a container: (mount path, directory standing in for it).
fn mounts(
    w: &Workload,
    dir: &Path,
    cms: &BTreeMap<String, ConfigMap>,
    ports: &BTreeMap<u16, u16>,
) -> Vec<(String, PathBuf)> {
    let volumes = w.spec.volumes.clone().unwrap_or_default();
    let mut out = Vec::new();
    for m in w.container().volume_mounts.iter().flatten() {
        let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
            continue;
        };
        let at = dir.join(&m.name);
        let target = if let Some(cm) = &v.config_map {
            let data = cms[cm.name.as_str()].data.clone().unwrap_or_default();
            std::fs::create_dir_all(&at).unwrap();
            for item in cm.items.iter().flatten() {
                let text = rewrite_ports(&data[&item.key], ports);
                std::fs::write(at.join(&item.path), text).unwrap();
            }
            at
        } else if v.empty_dir.is_some() {
            std::fs::create_dir_all(&at).unwrap();
            at
        } else if let Some(h) = &v.host_path {
            // Read-only host directories are the host's; the ones a container writes are
            // the test's own.
            if m.read_only == Some(true)
                || h.path.starts_with("/sys")
                || h.path.starts_with("/proc")
            {
                PathBuf::from(&h.path)
            } else {
                std::fs::create_dir_all(&at).unwrap();
                at
            }
        } else {
            continue;
        };
        out.push((m.mount_path.trim_end_matches('/').to_string(), target));
    }
    // Longest mount path first, so `/host-sys-fs` is not read as `/host-sys` + `-fs`.
    out.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
    out
}

/// `value` with a mount path replaced by its stand-in directory.
fn remount(value: &str, mounts: &[(String, PathBuf)]) -> String {
    for (m, to) in mounts {
        let to = to.display().to_string();
        if value == m || value.starts_with(&format!("{m}/")) {
            return value.replacen(m.as_str(), &to, 1);
        }
        for sep in ['=', ' '] {
            let key = format!("{sep}{m}");
            if let Some(at) = value.find(&key) {
                let after = &value[at + key.len()..];
                if after.is_empty() || after.starts_with('/') {
                    return format!("{}{sep}{to}{after}", &value[..at]);
                }
            }
        }
    }
    value.to_string()
}

/// Env values that are the node's, not the pod's: a kubelet URL (no kubelet here).
const NODE_ONLY_ENV: &[&str] = &["KOORD_KOORDLET__KUBELET__PODS_URL"];

impl Cluster {
    /// Runs `w`'s container on `node` as its ServiceAccount.
    pub async fn run(
        &self,
        w: &Workload,
        node: &str,
        cms: &BTreeMap<String, ConfigMap>,
    ) -> Running {
        let dir = self.dir.path().join(&w.name);
        std::fs::create_dir_all(&dir).unwrap();
        let ports: BTreeMap<u16, u16> = w.ports().into_iter().map(|p| (p, free_port())).collect();
        let mounts = mounts(w, &dir, cms, &ports);
        let c = w.container();
        let mut args: Vec<String> = c
            .args
            .iter()
            .flatten()
            .map(|a| remount(&rewrite_ports(a, &ports), &mounts))
            .filter(|a| !a.is_empty())
            .collect();
        let mut env: Vec<(String, String)> = Vec::new();
        for e in c.env.iter().flatten() {
            if NODE_ONLY_ENV.contains(&e.name.as_str()) {
                continue;
            }
            let from = e.value_from.as_ref().and_then(|f| f.field_ref.as_ref());
            let v = match from.map(|f| f.field_path.as_str()) {
                Some("metadata.namespace") => NAMESPACE.to_string(),
                Some("spec.nodeName") => node.to_string(),
                _ => remount(
                    &rewrite_ports(e.value.as_deref().unwrap_or_default(), &ports),
                    &mounts,
                ),
            };
            env.push((e.name.clone(), v));
        }
        let sa = w
            .spec
            .service_account_name
            .clone()
            .unwrap_or("default".into());
        let kc = self.service_account_kubeconfig(NAMESPACE, &sa).await;
        env.push(("KUBECONFIG".into(), kc.display().to_string()));
        // koord's own defaults that point at the host: the data dir, the admin address.
        let data = dir.join("data");
        if !env.iter().any(|(k, _)| k == "KOORD_COMMON__DATA_DIR") {
            env.push(("KOORD_COMMON__DATA_DIR".into(), data.display().to_string()));
        } else {
            for (k, v) in env.iter_mut() {
                if k == "KOORD_COMMON__DATA_DIR" {
                    *v = data.display().to_string();
                }
            }
        }
        let admin = format!("127.0.0.1:{}", free_port());
        if let Some((_, v)) = env
            .iter_mut()
            .find(|(k, _)| k == "KOORD_COMMON__ADMIN_ADDR")
        {
            // koord's manifests: `0.0.0.0:<admin port>`, already given a free port.
            *v = v.replace("0.0.0.0", "127.0.0.1");
        } else {
            env.push(("KOORD_COMMON__ADMIN_ADDR".into(), admin.clone()));
        }
        env.push(("KOORD_COMMON__NODE_NAME".into(), node.to_string()));
        // What a failing check needs to tell why: the descheduler's decisions.
        env.push((
            "KOORD_COMMON__LOG_LEVEL".into(),
            "info,koord::descheduler=debug".into(),
        ));
        let program = w.program();
        let koordlet = program == "koordlet" || args.iter().any(|a| a == "--role=koordlet");
        if koordlet {
            env.push(("agent_mode".into(), "hostMode".into()));
        }
        // The webhook server on the port the pod spec declares for it.
        if let Some(p) = c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().is_some_and(|n| n.starts_with("webhook")))
        {
            let port = ports[&(p.container_port as u16)];
            env.push(("KOORD_MANAGER__WEBHOOK__PORT".into(), port.to_string()));
        }
        let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        args.retain(|a| !a.is_empty());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let koord = if program == "koord" {
            Koord::start(&argv, &envs, &dir)
        } else {
            Koord::start_as(&program, &argv, &envs, &dir)
        };
        let admin_addr = env
            .iter()
            .find(|(k, _)| k == "KOORD_COMMON__ADMIN_ADDR")
            .map(|(_, v)| v.clone())
            .unwrap_or(admin);
        let ready_at = match w.probe() {
            Some((path, port)) => Some((path, format!("127.0.0.1:{}", ports[&port]))),
            None if program == "koord-device-daemon" => None,
            None if koordlet && ports.contains_key(&9316) => {
                Some(("/readyz".to_string(), format!("127.0.0.1:{}", ports[&9316])))
            }
            None => Some(("/readyz".to_string(), admin_addr)),
        }
        .map(|(p, a)| (p, a.parse().unwrap()));
        Running {
            name: w.name.clone(),
            koord,
            ports,
            ready_at,
        }
    }
}

impl Running {
    /// Waits for the container's readiness probe to answer 200.
    pub fn wait_ready(&self, timeout: Duration) {
        let Some((path, addr)) = &self.ready_at else {
            return;
        };
        let ready = wait_until(timeout, || {
            http_get(*addr, path).is_some_and(|(s, _)| s == 200)
        });
        assert!(
            ready,
            "{}: {path} on {addr} never answered 200:\n{}",
            self.name,
            self.koord.logs()
        );
    }
}

/// Every container's log, headed by its name.
pub fn logs(running: &[Running]) -> String {
    running
        .iter()
        .map(|r| format!("--- {}\n{}", r.name, r.koord.logs()))
        .collect()
}

/// Lines of the containers' logs where a request was refused for RBAC (403) or for its
/// content (422): in a cluster installed as documented there are none.
pub fn refused(running: &[Running]) -> Vec<String> {
    running
        .iter()
        .flat_map(|r| {
            r.koord
                .plain_logs()
                .lines()
                .filter(|l| (l.contains(" WARN ") || l.contains(" ERROR ")) && refusal(l))
                .map(|l| format!("{}: {l}", r.name))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A log line about a 403 or a 422: kube's words for them, or the codes standing alone.
fn refusal(line: &str) -> bool {
    let words = ["Forbidden", "forbidden", "is invalid", "Invalid"];
    words.iter().any(|w| line.contains(w))
        || line
            .split(|c: char| !c.is_ascii_digit())
            .any(|n| n == "403" || n == "422")
}
