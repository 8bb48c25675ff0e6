//! Koordinator users' files and flags, unchanged: the helm chart's ConfigMaps
//! (tests/fixtures/koordinator, rendered from chart v1.8.0) load, what koord does not
//! implement is warned about (refused in strict mode), and each role starts with its
//! Koordinator component's flag set as the chart writes it.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Koord, free_port, http_get, kubeconfig, wait_until};
use koord::config::{self, HostEnv, YamlSource};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/koordinator");

/// One `data` key of a chart ConfigMap fixture.
fn configmap_data(file: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(file)).unwrap();
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_yaml::from_str(&text).unwrap();
    cm.data.unwrap()
}

/// Writes the chart's component configurations where a Deployment would mount them.
pub(crate) fn mount_configs(dir: &Path) -> (PathBuf, PathBuf) {
    let sched = dir.join("koord-scheduler.config");
    let desched = dir.join("koord-descheduler.config");
    let s = configmap_data("koord-scheduler-config.yaml");
    std::fs::write(&sched, &s["koord-scheduler-config"]).unwrap();
    let d = configmap_data("koord-descheduler-config.yaml");
    std::fs::write(&desched, &d["koord-descheduler-config"]).unwrap();
    (sched, desched)
}

fn load(yaml: &str) -> Result<config::Config, config::ConfigError> {
    let host = HostEnv::for_tests("test-node");
    config::load(
        &host,
        Some(YamlSource::Text {
            name: "test",
            text: yaml,
        }),
        Vec::new(),
    )
}

#[test]
fn chart_configmaps_load_and_name_what_koord_skips() {
    let dir = tempfile::tempdir().unwrap();
    let (sched, desched) = mount_configs(dir.path());
    let yaml = format!(
        "scheduler: {{configFile: {}}}\ndescheduler: {{configFile: {}}}\n",
        sched.display(),
        desched.display()
    );
    let cfg = load(&yaml).unwrap_or_else(|e| panic!("{e}"));
    let s = koord::scheduler::load(&cfg.scheduler).unwrap();
    let skipped: Vec<&str> = s.unsupported.iter().map(|u| u.name.as_str()).collect();
    // The chart's job preemption and awareNetworkTopology run: nothing to warn about.
    assert!(skipped.is_empty(), "{skipped:?}");
    let profile = &s.profiles[0];
    assert_eq!(profile.scheduler_name, "koord-scheduler");
    let names = |p| {
        profile.points[&p]
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
    };
    use koord::scheduler::framework::Point;
    assert_eq!(names(Point::Bind), ["DefaultBinder"]);
    assert!(names(Point::Filter).contains(&"LoadAwareScheduling"));
    assert!(names(Point::PreBind).contains(&"DeviceShare"));
    assert!(
        !skipped.contains(&"DeviceShare"),
        "DeviceShare runs: {skipped:?}"
    );
    koord::descheduler::load(&cfg.descheduler).unwrap();

    // Even strict mode takes the chart's configuration as it is.
    let strict = format!("common: {{strict: true}}\n{yaml}");
    load(&strict).unwrap_or_else(|e| panic!("{e}"));

    let gates = "common: {strict: true}\nkoordlet: {featureGates: {Libpfm4: true}}\n";
    let err = load(gates).unwrap_err().to_string();
    assert!(err.contains("koordlet feature gate Libpfm4"), "{err}");
    load("koordlet: {featureGates: {Libpfm4: true, NoSuchGate: true}}\n").unwrap();

    // A descheduler plugin koord lacks: skipped with a warning, refused when strict.
    let custom = dir.path().join("custom-descheduler.config");
    let text = std::fs::read_to_string(&desched).unwrap().replace(
        "    deschedule:\n      disabled:\n        - name: \"*\"\n",
        "    deschedule:\n      disabled:\n        - name: \"*\"\n      enabled:\n        - name: VendorRebalancer\n",
    );
    assert!(text.contains("VendorRebalancer"), "fixture layout changed");
    std::fs::write(&custom, text).unwrap();
    let yaml = format!("descheduler: {{configFile: {}}}\n", custom.display());
    let d = load(&yaml).unwrap_or_else(|e| panic!("{e}"));
    let u = koord::descheduler::unsupported(&koord::descheduler::load(&d.descheduler).unwrap());
    assert_eq!(u[0].name, "VendorRebalancer");
    let err = load(&format!("common: {{strict: true}}\n{yaml}"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("descheduler plugin \"VendorRebalancer\" is unknown"),
        "{err}"
    );

    // One koord has, at an extension point it does not implement: refused as Koordinator
    // refuses it.
    let wrong = std::fs::read_to_string(&custom)
        .unwrap()
        .replace("VendorRebalancer", "RemoveDuplicates");
    std::fs::write(&custom, wrong).unwrap();
    let err = load(&yaml).unwrap_err().to_string();
    assert!(
        err.contains("plugin \"RemoveDuplicates\" does not extend DeschedulePlugin plugin"),
        "{err}"
    );
}

#[test]
fn chart_slo_controller_config_parses_without_errors() {
    let data = configmap_data("slo-controller-config.yaml");
    let (cfg, errors) = koord::api::sloconfig::SloConfig::parse(Some(&data), &Default::default());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(cfg.colocation.cluster.enable, Some(true), "{cfg:?}");
}

async fn chart_slo_config(client: &kube::Client) {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{Api, PostParams};
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "koordinator-system"}}))
            .unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
    let text =
        std::fs::read_to_string(Path::new(FIXTURES).join("slo-controller-config.yaml")).unwrap();
    let cm: ConfigMap = serde_yaml::from_str(&text).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "koordinator-system")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

fn addr() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

/// Starts koord with one component's flags, waits for its role to be ready, checks the
/// warnings it owes, and stops it.
fn start_with_flags(role: &str, args: &[String], admin: SocketAddr, owed: &[&str]) {
    start_probed(role, args, admin, None, owed)
}

fn start_probed(
    role: &str,
    args: &[String],
    admin: SocketAddr,
    probe: Option<SocketAddr>,
    owed: &[&str],
) {
    let dir = tempfile::tempdir().unwrap();
    // Run as the chart's `command` runs it: under the component's name, no --role.
    let component = match role {
        "koordlet" => "koordlet".to_string(),
        r => format!("koord-{r}"),
    };
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    // This machine is not the chart's container: the koordlet runs in Koordinator's host
    // mode (its DaemonSet paths would be /host-sys, /host-var-run, ...).
    let env: &[(&str, &str)] = match role {
        "koordlet" => &[("agent_mode", "hostMode")],
        _ => &[],
    };
    let mut koord = Koord::start_as(&component, &argv, env, dir.path());
    let ready = wait_until(Duration::from_secs(30), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "{role} never became ready:\n{}", koord.logs());
    if let Some(p) = probe {
        let (status, body) = http_get(p, "/readyz").expect("probe address answers");
        assert_eq!(status, 200, "{body}");
        let (_, metrics) = http_get(admin, "/metrics").unwrap();
        assert!(
            !metrics.contains("koord_manager_slo_config_errors_total{"),
            "the chart's slo-controller-config must parse:\n{metrics}"
        );
    }
    let (_, metrics) = http_get(admin, "/metrics").unwrap();
    for name in owed {
        let series = format!("name=\"{name}\"");
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("koord_unsupported_config{") && l.contains(&series)),
            "{role}: no koord_unsupported_config for {name}:\n{metrics}"
        );
        assert!(koord.logs().contains(name), "{}", koord.logs());
    }
    koord.signal("TERM");
    let status = koord.wait_exit(Duration::from_secs(30)).expect("no exit");
    assert_eq!(status.code(), Some(0), "{}", koord.logs());
}

#[test]
fn each_role_starts_with_its_koordinator_flags() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api_port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], api_port));
    let mut api = rt.block_on(common::TestApi::start_with(opts));
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), api_port);
    let (sched, desched) = mount_configs(dir.path());
    let d = dir.path().display();
    let common = |admin: Option<SocketAddr>| {
        let mut v = vec![
            format!("--kubeconfig={}", kc.display()),
            format!("--data-dir={d}/data-{}", free_port()),
            "--node-name=test-node".to_string(),
        ];
        v.extend(admin.map(|a| format!("--admin-addr={a}")));
        v
    };
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // koordlet (DaemonSet args, repo config/manager/koordlet.yaml; paths made private).
    let admin = addr();
    let mut args = common(None);
    args.extend(s(&[
        &format!("-addr={admin}"),
        "-cgroup-root-dir=/sys/fs/cgroup/",
        "-feature-gates=AllAlpha=false,AllBeta=true,Libpfm4=true",
        "-runtime-hooks-network=unix",
        &format!("-runtime-hooks-addr={d}/koordlet.sock"),
        &format!("-runtime-hooks-config-path={d}/hookserver.d/"),
        "-runtime-hooks-host-endpoint=/var/run/koordlet//koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]));
    start_with_flags("koordlet", &args, admin, &["Libpfm4"]);

    // koord-manager (chart Deployment args), with the chart's slo-controller-config.
    rt.block_on(chart_slo_config(&api.client));
    let (metrics_addr, probe) = (addr(), addr());
    let mut args = common(None);
    args.extend(s(&[
        "--enable-leader-election",
        &format!("--metrics-addr={metrics_addr}"),
        &format!("--health-probe-addr={probe}"),
        "--logtostderr=true",
        "--leader-election-namespace=koordinator-system",
        "--v=4",
        "--feature-gates=",
        "--sync-period=0",
        "--config-namespace=koordinator-system",
    ]));
    start_probed("manager", &args, metrics_addr, Some(probe), &[]);

    // koord-scheduler (chart Deployment args, the chart's ConfigMap mounted).
    let port = addr();
    let mut args = common(None);
    args.extend(s(&[
        // A bare number, as the chart writes it: every interface.
        &format!("--port={}", port.port()),
        "--authentication-skip-lookup=true",
        "--v=4",
        "--feature-gates=",
        &format!("--config={}", sched.display()),
        "--enable-network-topology-manager=true",
    ]));
    start_with_flags("scheduler", &args, port, &[]);

    // koord-descheduler (chart Deployment args); its config's healthz/metrics bind address
    // (the chart's 0.0.0.0:10251, here a free loopback port) answers the probe.
    let (admin, bind) = (addr(), addr());
    let text = std::fs::read_to_string(&desched).unwrap();
    assert!(text.contains("0.0.0.0:10251"), "fixture layout changed");
    std::fs::write(&desched, text.replace("0.0.0.0:10251", &bind.to_string())).unwrap();
    let mut args = common(Some(admin));
    args.extend(s(&["--v=4", &format!("--config={}", desched.display())]));
    start_probed("descheduler", &args, admin, Some(bind), &[]);

    // koord-runtime-proxy (systemd unit flags).
    let admin = addr();
    let mut args = common(Some(admin));
    args.extend(s(&[
        &format!("--koord-runtimeproxy-endpoint={d}/runtimeproxy.sock"),
        &format!("--remote-runtime-service-endpoint={d}/containerd.sock"),
        "--backend-runtime-mode=Containerd",
        "--runtime-hook-server-key=runtimeproxy.koordinator.sh/skip-hookserver",
        "--runtime-hook-server-val=true",
    ]));
    start_with_flags("runtime-proxy", &args, admin, &[]);
    rt.block_on(api.stop());
}

/// Under the chart's DaemonSet the koordlet keeps its metric store in `/metric-data` (an
/// emptyDir, which the kubelet makes 0777) and its prediction checkpoints in the hostPath
/// `/prediction-checkpoints` — Koordinator's `-tsdb-path` and
/// `-prediction-checkpoint-filepath`, which koord run as `/koordlet` implies. Here both
/// point into the test's directory; restarted, the koordlet restores its models.
#[test]
fn the_koordlet_keeps_its_history_where_the_chart_mounts_it() {
    use std::os::unix::fs::PermissionsExt;
    assert!(
        koord::kernel::entry::KOORDLET_DS_MODE.contains(&"-tsdb-path=/metric-data/")
            && koord::kernel::entry::KOORDLET_DS_MODE
                .contains(&"-prediction-checkpoint-filepath=/prediction-checkpoints"),
        "dsMode implies the chart's paths"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api_port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], api_port));
    opts.sim = Some(koord::apiserver::sim::SimNodes {
        count: 1,
        cpu: "8".into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    let mut api = rt.block_on(common::TestApi::start_with(opts));
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), api_port);
    let (metric_data, checkpoints) = (dir.path().join("metric-data"), dir.path().join("ckpt"));
    std::fs::create_dir(&metric_data).unwrap();
    std::fs::set_permissions(&metric_data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = |log_dir: &Path| {
        let admin = addr();
        let d = dir.path().display();
        let args = [
            format!("--kubeconfig={}", kc.display()),
            format!("--data-dir={d}/data"),
            "--node-name=sim-node-0".to_string(),
            format!("-addr={admin}"),
            format!("-tsdb-path={}/", metric_data.display()),
            format!("-prediction-checkpoint-filepath={}", checkpoints.display()),
            "-prediction-training-interval=1s".to_string(),
            format!("-runtime-hooks-addr={d}/koordlet.sock"),
            format!("-runtime-hooks-config-path={d}/hookserver.d/"),
        ];
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let koord = Koord::start_as("koordlet", &argv, &[("agent_mode", "hostMode")], log_dir);
        let ready = wait_until(Duration::from_secs(30), || {
            http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
        });
        assert!(ready, "never ready:\n{}", koord.logs());
        koord
    };
    let logs = tempfile::tempdir().unwrap();
    let mut first = run(logs.path());
    // A few trainings, then the checkpoints written on the way out.
    std::thread::sleep(Duration::from_secs(4));
    first.signal("TERM");
    assert_eq!(
        first
            .wait_exit(Duration::from_secs(30))
            .and_then(|s| s.code()),
        Some(0),
        "{}",
        first.logs()
    );
    let mode = std::fs::metadata(&metric_data)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700, "the emptyDir narrowed to the koordlet");
    let stored = std::fs::read_dir(&metric_data).unwrap().count();
    assert!(stored > 0, "the metric store lives in /metric-data");
    assert!(
        !dir.path().join("data/koordlet/metrics").exists(),
        "and not under the data dir"
    );
    let models: Vec<String> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        models.iter().any(|m| m == "__node__.json"),
        "the node's model checkpointed: {models:?}\n{}",
        first.logs()
    );
    let logs = tempfile::tempdir().unwrap();
    let mut second = run(logs.path());
    let restored = wait_until(Duration::from_secs(10), || {
        second
            .plain_logs()
            .contains("prediction models restored from their checkpoints")
    });
    assert!(restored, "{}", second.logs());
    second.signal("TERM");
    second.wait_exit(Duration::from_secs(30));
    rt.block_on(api.stop());
}
