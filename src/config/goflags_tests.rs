use super::*;

fn own() -> Vec<String> {
    [
        "role",
        "config",
        "kubeconfig",
        "admin-addr",
        "only-evict-by-api",
        "embedded",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run(args: &[&str]) -> Translated {
    let argv = std::iter::once("koord")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    translate(argv, &own())
}

fn layer<'a>(t: &'a Translated, key: &str) -> Vec<&'a Value> {
    t.layers
        .iter()
        .filter(|l| l.key == key)
        .map(|l| &l.value)
        .collect()
}

fn gates(v: &Value) -> BTreeMap<String, bool> {
    v.deserialize().unwrap()
}

#[test]
fn koordlet_daemonset_flags_from_the_chart() {
    let t = run(&[
        "--role=koordlet",
        "-addr=:9316",
        "-cgroup-root-dir=/host-cgroup/",
        "-feature-gates=AllAlpha=true,AllBeta=true",
        "-runtime-hooks-network=unix",
        "-runtime-hooks-addr",
        "/host-var-run-koordlet/koordlet.sock",
        "-runtime-hooks-host-endpoint=/var/run/koordlet//koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    assert_eq!(t.argv, ["koord", "--role=koordlet"]);
    assert_eq!(
        layer(&t, "common.adminAddr")[0].as_str(),
        Some("0.0.0.0:9316")
    );
    assert_eq!(
        layer(&t, "koordlet.cgroupRoot")[0].as_str(),
        Some("/host-cgroup/")
    );
    assert_eq!(
        layer(&t, "koordlet.runtimeHooks.socket")[0].as_str(),
        Some("/host-var-run-koordlet/koordlet.sock")
    );
    let g = gates(layer(&t, "koordlet.featureGates")[0]);
    assert_eq!(g.get("AllAlpha"), Some(&true));
    assert_eq!(t.notes.len(), 2, "{:?}", t.notes);
}

#[test]
fn koordinators_nri_flags_land_in_the_nri_section() {
    let t = run(&[
        "--role=koordlet",
        "-enable-nri-runtime-hook=false",
        "-runtime-hooks-nri-socket-path=containerd/nri.sock",
        "-runtime-hooks-nri-connect-timeout=500ms",
        "-runtime-hooks-nri-backoff-factor=1.5",
        "-runtime-hooks-nri-backoff-steps=7",
        "-runtime-hooks-nri-backoff-cap=1m",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    let at = |k: &str| layer(&t, &format!("koordlet.runtimeHooks.nri.{k}"))[0].clone();
    assert_eq!(at("enabled").to_bool(), Some(false));
    assert_eq!(at("socketPath").as_str(), Some("containerd/nri.sock"));
    assert_eq!(at("connectTimeoutMillis").to_u128(), Some(500));
    assert_eq!(at("backoff.factor").to_f64(), Some(1.5));
    assert_eq!(at("backoff.steps").to_u128(), Some(7));
    assert_eq!(at("backoff.capSeconds").to_u128(), Some(60));
    let host = crate::kernel::host::HostEnv::for_tests("node");
    let nri = crate::config::load(&host, None, t.layers)
        .unwrap()
        .koordlet
        .runtime_hooks
        .nri;
    assert!(!nri.enabled);
    assert_eq!(
        (nri.backoff.factor, nri.backoff.cap_seconds),
        (1.5, Some(60))
    );
}

#[test]
fn unknown_and_unsupported_flags_warn_with_the_value_consumed() {
    let t = run(&[
        "-role",
        "koordlet",
        "-no-such-flag",
        "x",
        "-runtime-hooks-network=tcp",
        "-enable-nothing",
    ]);
    assert!(t.errors.is_empty(), "{t:?}");
    assert_eq!(t.argv, ["koord", "--role", "koordlet"]);
    let names: Vec<&str> = t.unsupported.iter().map(|(_, u)| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["no-such-flag", "runtime-hooks-network", "enable-nothing"]
    );
    assert!(t.unsupported[0].1.message.contains("-no-such-flag=x"));
}

#[test]
fn noted_flags_without_a_value_do_not_swallow_the_next_flag() {
    let t = run(&[
        "--role=koordlet",
        "--logtostderr",
        "--v",
        "4",
        "-cgroup-root-dir=/c",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    assert_eq!(layer(&t, "koordlet.cgroupRoot").len(), 1);
    assert_eq!(t.argv, ["koord", "--role=koordlet"]);
    let t = run(&["--role=koordlet", "-cgroup-root-dir"]);
    assert!(t.errors[0].contains("needs a value"), "{t:?}");
}

#[test]
fn role_value_in_a_separate_argument_is_kept() {
    let t = run(&["--role", "koordlet", "-cgroup-root-dir", "/c"]);
    assert_eq!(t.argv, ["koord", "--role", "koordlet"]);
    assert_eq!(layer(&t, "koordlet.cgroupRoot").len(), 1);
}

#[test]
fn manager_flags_and_gates_split_between_roles() {
    let t = run(&[
        "--role=manager,scheduler",
        "--enable-leader-election",
        "--metrics-addr=:8080",
        "--health-probe-addr=:8000",
        "--feature-gates=MultiQuotaTree=true,ResizePod=true,Bogus=true,AllAlpha=false",
        "--sync-period=0",
        "--config-namespace=koordinator-system",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    assert_eq!(
        layer(&t, "manager.leaderElection.enabled")[0].to_bool(),
        Some(true)
    );
    assert!(
        layer(&t, "manager.resyncSeconds").is_empty(),
        "0 keeps the default"
    );
    let m = gates(layer(&t, "manager.featureGates")[0]);
    let s = gates(layer(&t, "scheduler.featureGates")[0]);
    assert!(m.contains_key("MultiQuotaTree") && !m.contains_key("ResizePod"));
    assert!(s.contains_key("ResizePod") && s.contains_key("MultiQuotaTree"));
    assert!(m.contains_key("Bogus") && s.contains_key("Bogus"));
    assert!(m.contains_key("AllAlpha") && s.contains_key("AllAlpha"));
}

#[test]
fn component_config_goes_by_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let sched = dir.path().join("koord-scheduler.config");
    std::fs::write(
        &sched,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
    )
    .unwrap();
    let koord = dir.path().join("koord.yaml");
    std::fs::write(&koord, "common: {}\n").unwrap();
    let s = sched.display().to_string();
    let t = run(&["--role=scheduler", "--config", &s, "--port=10251"]);
    assert_eq!(
        layer(&t, "scheduler.configFile")[0].as_str(),
        Some(s.as_str())
    );
    assert_eq!(t.argv, ["koord", "--role=scheduler"]);
    let k = koord.display().to_string();
    let t = run(&["--role=scheduler", &format!("-config={k}")]);
    assert_eq!(
        t.argv,
        ["koord", "--role=scheduler", &format!("--config={k}")]
    );
}

#[test]
fn the_schedulers_port_is_a_bare_number_on_every_interface() {
    let t = run(&["--role=scheduler", "--port=10251"]);
    assert!(t.errors.is_empty(), "{t:?}");
    let a = layer(&t, "common.adminAddr");
    assert_eq!(a[0].as_str(), Some("0.0.0.0:10251"));
    let t = run(&["--role=scheduler", "--port", "127.0.0.1:9"]);
    assert_eq!(
        layer(&t, "common.adminAddr")[0].as_str(),
        Some("127.0.0.1:9")
    );
    let t = run(&["--role=scheduler", "--port=0"]);
    assert!(layer(&t, "common.adminAddr").is_empty() && t.errors.is_empty());
    let t = run(&["--role=scheduler", "--port=web"]);
    assert!(t.errors[0].contains("web"), "{t:?}");
}

#[test]
fn the_managers_controllers() {
    let t = run(&["--role=manager", "--controllers=*,-nodeslo"]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    assert_eq!(
        layer(&t, "manager.controllers")[0].as_str(),
        Some("*,-nodeslo")
    );
}

#[test]
fn the_managers_binding_admission_flags() {
    let t = run(&[
        "--role=manager",
        "--binding-admission-user-name=koord-scheduler",
        "--binding-admission-dry-run=true",
        "--binding-admission-namespaces=*",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    let at = |k: &str| layer(&t, &format!("manager.webhook.bindingAdmission.{k}"))[0].clone();
    assert_eq!(at("userName").as_str(), Some("koord-scheduler"));
    assert_eq!(at("dryRun").to_bool(), Some(true));
    assert_eq!(at("namespaces").as_str(), Some("*"));
}

#[test]
fn bad_values_and_no_role_lines() {
    let t = run(&["--role=koordlet", "-collect-res-used-interval=soon"]);
    assert_eq!(t.errors.len(), 1);
    assert!(
        t.errors[0].contains("-collect-res-used-interval=soon"),
        "{t:?}"
    );
    let t = run(&["--role=koordlet", "-h"]);
    assert_eq!(t.argv, ["koord", "--role=koordlet", "-h"]);
    let t = run(&["explain", "-x"]);
    assert_eq!(
        t.argv,
        ["koord", "explain", "-x"],
        "subcommands stay clap's"
    );
}

#[test]
fn the_kubelet_root_dir_flag_sets_where_pod_volumes_are() {
    let t = run(&["--role=koordlet", "-var-lib-kubelet-dir=/data/kubelet/"]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    assert_eq!(
        layer(&t, "koordlet.kubelet.rootDir")[0].as_str(),
        Some("/data/kubelet/")
    );
}

#[test]
fn the_kubelet_stub_flags_say_where_configz_is() {
    let t = run(&[
        "--role=koordlet",
        "-kubelet-preferred-address-type=Hostname",
        "-kubelet-insecure-tls=true",
        "-kubelet-read-only-port=10266",
        "-disable-query-kubelet-config=false",
    ]);
    assert!(t.errors.is_empty() && t.unsupported.is_empty(), "{t:?}");
    let k = "koordlet.kubelet";
    assert_eq!(
        layer(&t, &format!("{k}.preferredAddressType"))[0].as_str(),
        Some("Hostname")
    );
    assert_eq!(
        layer(&t, &format!("{k}.insecureTls"))[0].to_bool(),
        Some(true)
    );
    assert_eq!(
        layer(&t, &format!("{k}.readOnlyPort"))[0].to_u128(),
        Some(10266)
    );
    let disabled = layer(&t, &format!("{k}.disableQueryKubeletConfig"));
    assert_eq!(disabled[0].to_bool(), Some(false));
}
