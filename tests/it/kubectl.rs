//! The machine's real kubectl against the embedded API server: apply (with validation
//! on), get with JSON and label selectors, patch, a second apply changing fields
//! (strategic merge on ConfigMap and Pod, JSON merge on a CRD), delete.

use crate::common;

use std::path::{Path, PathBuf};

use common::TestApi;
use serde_json::Value;

pub(crate) fn kubectl_path() -> Option<PathBuf> {
    on_path("kubectl")
}

/// The program `name` as the shell would find it on `PATH`.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

pub(crate) struct Kubectl {
    pub(crate) bin: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cache: PathBuf,
}

impl Kubectl {
    pub(crate) async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().expect("run kubectl");
        if let (Some(mut input), Some(text)) = (child.stdin.take(), stdin) {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        let out = child.wait_with_output().await.unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    pub(crate) async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin).await;
        assert!(ok, "kubectl {args:?} failed:\n{err}\n{out}");
        out
    }

    async fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args, None).await).unwrap()
    }
}

/// kubectl against an embedded API server as `--embedded` serves it: HTTPS with its own
/// CA, and a token. `None` without kubectl.
async fn kubectl_against_embedded() -> Option<(TestApi, tempfile::TempDir, Kubectl)> {
    let bin = kubectl_path()?;
    let mut opts = koord::apiserver::Options::for_tests();
    opts.tls = true;
    let api = TestApi::start_with(opts).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.server().write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl {
        bin,
        kubeconfig,
        cache: dir.path().join("cache"),
    };
    Some((api, dir, k))
}

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: demo
  labels: {koordinator.sh/enable-colocation: "true"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: demo
  labels: {app: web}
data:
  mode: "fast"
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: demo
  labels: {app: web}
spec:
  containers:
  - name: main
    image: busybox:1.36
    command: [sleep, "3600"]
---
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata:
  name: colocation-profile-example
spec:
  namespaceSelector:
    matchLabels: {koordinator.sh/enable-colocation: "true"}
  qosClass: BE
  priorityClassName: koord-batch
  koordinatorPriority: 1000
  schedulerName: koord-scheduler
---
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeSLO
metadata:
  name: node-1
spec:
  resourceUsedThresholdWithBE:
    enable: true
    cpuSuppressThresholdPercent: 65
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_patch_delete() {
    let Some((_api, _dir, k)) = kubectl_against_embedded().await else {
        eprintln!("skipping: kubectl is not on PATH");
        return;
    };

    let out = k.ok(&["apply", "-f", "-"], Some(MANIFESTS)).await;
    for line in [
        "namespace/demo created",
        "configmap/settings created",
        "pod/web created",
        "clustercolocationprofile.config.koordinator.sh/colocation-profile-example created",
        "nodeslo.slo.koordinator.sh/node-1 created",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let cm = k
        .json(&["get", "configmap", "settings", "-n", "demo", "-o", "json"])
        .await;
    assert_eq!(cm["data"]["mode"], "fast");
    assert!(cm["metadata"]["creationTimestamp"].is_string());
    let pods = k
        .json(&["get", "pods", "-n", "demo", "-l", "app=web", "-o", "json"])
        .await;
    assert_eq!(pods["items"].as_array().unwrap().len(), 1);
    let none = k
        .json(&[
            "get",
            "pods",
            "-n",
            "demo",
            "-l",
            "app in (db,cache)",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(none["items"].as_array().unwrap().len(), 0);
    let table = k.ok(&["get", "cm", "-n", "demo"], None).await;
    assert!(table.contains("settings"), "{table}");
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "DATA", "AGE"],
        "kubectl's ConfigMap columns: {table}"
    );
    let ns = k.ok(&["get", "ns", "demo"], None).await;
    assert!(
        ns.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("Active")),
        "{ns}"
    );

    k.ok(
        &[
            "patch",
            "configmap",
            "settings",
            "-n",
            "demo",
            "-p",
            r#"{"data":{"extra":"1"}}"#,
        ],
        None,
    )
    .await;
    k.ok(
        &[
            "patch",
            "nodeslo",
            "node-1",
            "--type=merge",
            "-p",
            r#"{"spec":{"cpuBurstStrategy":{"policy":"auto"}}}"#,
        ],
        None,
    )
    .await;

    let changed = MANIFESTS
        .replace("mode: \"fast\"", "mode: \"safe\"")
        .replace(
            "labels: {app: web}\nspec:",
            "labels: {app: web, version: v2}\nspec:",
        )
        .replace(
            "cpuSuppressThresholdPercent: 65",
            "cpuSuppressThresholdPercent: 70",
        );
    let out = k.ok(&["apply", "-f", "-"], Some(&changed)).await;
    assert!(
        out.contains("configmap/settings configured") && out.contains("pod/web configured"),
        "{out}"
    );
    let cm = k
        .json(&["get", "configmap", "settings", "-n", "demo", "-o", "json"])
        .await;
    assert_eq!(cm["data"]["mode"], "safe");
    assert_eq!(
        cm["data"]["extra"], "1",
        "kubectl's three-way merge kept the patched key"
    );
    let pod = k
        .json(&["get", "pod", "web", "-n", "demo", "-o", "json"])
        .await;
    assert_eq!(pod["metadata"]["labels"]["version"], "v2");
    let slo = k.json(&["get", "nodeslo", "node-1", "-o", "json"]).await;
    assert_eq!(
        slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"],
        70
    );
    assert_eq!(slo["spec"]["cpuBurstStrategy"]["policy"], "auto");

    k.ok(&["delete", "configmap", "settings", "-n", "demo"], None)
        .await;
    k.ok(&["delete", "pod", "web", "-n", "demo"], None).await;
    let (ok, _, err) = k
        .run(&["get", "configmap", "settings", "-n", "demo"], None)
        .await;
    assert!(!ok && err.contains("NotFound"), "{err}");
    let ccp = k
        .json(&["get", "clustercolocationprofiles", "-o", "json"])
        .await;
    assert_eq!(ccp["items"][0]["spec"]["qosClass"], "BE");
}

/// `kubectl apply -k manifests/ --dry-run=server` against the embedded API server: every
/// object of the base and the single-replica overlay is accepted; the monitoring overlay
/// builds (its ServiceMonitors need the Prometheus Operator's CRDs, which a bare server
/// lacks, so it is rendered with `kustomize`, not applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_dry_run_accepts_every_manifest() {
    let Some((_api, _dir, k)) = kubectl_against_embedded().await else {
        eprintln!("skipping: kubectl is not on PATH");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    // Namespaced objects need their namespace to exist, dry run or not.
    let ns = root.join("base/namespace.yaml");
    k.ok(&["apply", "-f", ns.to_str().unwrap()], None).await;
    let expected: usize = koord::manifests::all()
        .iter()
        .filter(|m| m.path.starts_with("base/") && m.path.ends_with(".yaml"))
        .filter(|m| m.path != "base/kustomization.yaml")
        .map(|m| {
            m.text.matches("\napiVersion:").count() + usize::from(m.text.starts_with("apiVersion:"))
        })
        .sum();
    for (target, extra) in [
        (root.clone(), 0),
        (root.join("overlays/single-replica"), 0),
        (root.join("overlays/device-daemon"), 1),
    ] {
        let t = target.to_str().unwrap();
        let out = k
            .ok(&["apply", "-k", t, "--dry-run=server", "-o", "name"], None)
            .await;
        let applied: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(applied.len(), expected + extra, "{t}: {out}");
        if extra == 1 {
            assert!(
                applied.contains(&"daemonset.apps/koord-device-daemon"),
                "{out}"
            );
        }
        for kind in [
            "deployment.apps/koord-manager",
            "deployment.apps/koord-scheduler",
            "daemonset.apps/koordlet",
            "clusterrole.rbac.authorization.k8s.io/koordlet-role",
            "clusterrolebinding.rbac.authorization.k8s.io/koord-scheduler-rolebinding-custom",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/koordinator-mutating-webhook-configuration",
            "customresourcedefinition.apiextensions.k8s.io/nodeslos.slo.koordinator.sh",
        ] {
            assert!(applied.contains(&kind), "{t}: {kind} missing:\n{out}");
        }
    }
    let monitoring = root.join("overlays/monitoring");
    let out = k
        .ok(&["kustomize", monitoring.to_str().unwrap()], None)
        .await;
    assert!(out.contains("kind: ServiceMonitor"), "{out}");
    assert!(
        out.contains("koord-colocation.json"),
        "dashboards ConfigMap missing"
    );
    // Dry run wrote nothing.
    let (ok, _, _) = k
        .run(
            &[
                "get",
                "deployment",
                "-n",
                "koordinator-system",
                "koord-manager",
            ],
            None,
        )
        .await;
    assert!(!ok, "a dry run must not create the Deployment");
}
