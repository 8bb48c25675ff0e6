//! Colocation on this machine: does koord keep a latency-sensitive pod fast while
//! best-effort pods use the CPU it leaves idle?
//!
//! `koord --role=all --embedded` runs every pod below as a host process in kubelet-style
//! cgroups (root needed; skipped otherwise). The LS pod (`koordinator.sh/qosClass: LS`)
//! does 1 ms of work every 10 ms and records how long each unit took from its scheduled
//! start; three BE pods (`BE`, `kubernetes.io/batch-cpu` 1 core each) and three plain
//! pods (no label, `cpu: 300m` requests — Burstable, as any ordinary workload) burn CPU
//! while their phase is on. The phases run interleaved, `COLOCATION_ROUNDS` times
//! (default 2), each `COLOCATION_SECONDS` long (default 20) after 10 s of settling:
//!
//! - `alone`: no burner; the LS pod's own latency.
//! - `be:cpuset`: BE burners, `slo-controller-config` as Koordinator's default (BE
//!   suppression on at 65 %, `cpuSuppressPolicy: cpuset`).
//! - `be:cfsQuota`: the same with `cpuSuppressPolicy: cfsQuota`.
//! - `be:coreSchedIdle`: cpuset suppression plus `cpuPolicy: coreSched` with the BE
//!   class's `schedIdle: 1` (gate CoreSched on).
//! - `be:cpuIdle`: koord's `cpuSuppressPolicy: cpuIdle` (besteffort runs as SCHED_IDLE).
//! - `be:qosOff`: BE suppression off, no cpuQOS: only what a kubelet does (besteffort at
//!   2 shares).
//! - `plain`: the plain burners instead: no protection at all.
//!
//! Each phase prints the LS pod's p50/p99/p99.9 and their ratio to `alone` in the same
//! round, the CPU the BE (or plain) pods got and its share of what the LS pod left idle
//! (CPUs − the LS pod's own use), and what the besteffort cgroup held (shares, idle,
//! quota, cpuset) — what the policy did. `BENCH_KOORD_BIN` runs another build.

mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use common::{Proc, free_port, koord, ready};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use koord::api::extension::qos::KubeQoS;
use koord::api::slo::NodeSLO;
use koord::os::{Cgroups, Driver, Resource};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "default";
const BURNERS: usize = 3;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("colocation: bench");
        return;
    }
    match std::env::var("COLOCATION_WORKER").as_deref() {
        Ok("probe") => return probe(),
        Ok("burn") => return burn(),
        _ => {}
    }
    if is_root() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(run());
    } else {
        println!("colocation: skipped: the embedded node runtime needs root (pods run in cgroups)");
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Deterministic integer work the compiler cannot drop.
fn work(n: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..n {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
    }
    black_box(x)
}

/// Iterations of `work` that take 1 ms on this machine while it is quiet (best of 50).
fn calibrate() -> u64 {
    let n = 100_000;
    let best = (0..50)
        .map(|_| {
            let t = Instant::now();
            work(n);
            t.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_millis(1));
    (n as f64 / best.as_secs_f64() / 1000.0) as u64
}

fn write_pid(var: &str) {
    if let Ok(p) = std::env::var(var) {
        let _ = std::fs::write(p, std::process::id().to_string());
    }
}

/// The LS pod: a 1 ms work unit every 10 ms; each unit's time from its scheduled start to
/// its end goes to `COLOCATION_OUT` as `unix_ms latency_us` lines.
fn probe() {
    use std::io::Write;
    write_pid("COLOCATION_PID");
    let n = env_u64("COLOCATION_WORK", 100_000);
    let out = std::env::var("COLOCATION_OUT").unwrap_or_default();
    let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
    else {
        eprintln!("probe: cannot open {out}");
        std::process::exit(1);
    };
    let period = Duration::from_millis(10);
    let mut next = Instant::now();
    let mut lines = String::new();
    loop {
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
        work(n);
        let latency = next.elapsed().as_micros();
        lines.push_str(&format!("{} {latency}\n", unix_ms()));
        if lines.len() > 2000 {
            let _ = file.write_all(lines.as_bytes());
            lines.clear();
        }
    }
}

/// A burner: spins while `COLOCATION_CTL` (its phase's) or `COLOCATION_SOLO` (its own)
/// exists, sleeps otherwise.
fn burn() {
    write_pid("COLOCATION_PID");
    let path = |var| PathBuf::from(std::env::var(var).unwrap_or_default());
    let (ctl, solo) = (path("COLOCATION_CTL"), path("COLOCATION_SOLO"));
    loop {
        if ctl.exists() || solo.exists() {
            let until = Instant::now() + Duration::from_millis(50);
            while Instant::now() < until {
                work(10_000);
            }
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One phase: which burners spin and what `slo-controller-config` says.
struct Phase {
    name: &'static str,
    burners: Option<&'static str>,
    threshold: serde_json::Value,
    qos: serde_json::Value,
}

fn threshold(enable: bool, policy: &str) -> serde_json::Value {
    json!({"clusterStrategy": {"enable": enable, "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": policy}})
}

fn phases() -> Vec<Phase> {
    let no_qos = json!({"clusterStrategy": {}});
    let core_sched = json!({"clusterStrategy": {"policies": {"cpuPolicy": "coreSched"},
        "lsClass": {"cpuQOS": {"enable": true}},
        "beClass": {"cpuQOS": {"enable": true, "schedIdle": 1}}}});
    let be = |name, threshold, qos| Phase {
        name,
        burners: Some("be"),
        threshold,
        qos,
    };
    vec![
        Phase {
            name: "alone",
            burners: None,
            threshold: threshold(true, "cpuset"),
            qos: no_qos.clone(),
        },
        be("be:cpuset", threshold(true, "cpuset"), no_qos.clone()),
        be("be:cfsQuota", threshold(true, "cfsQuota"), no_qos.clone()),
        be("be:coreSchedIdle", threshold(true, "cpuset"), core_sched),
        be("be:cpuIdle", threshold(true, "cpuIdle"), no_qos.clone()),
        be("be:qosOff", threshold(false, "cpuset"), no_qos.clone()),
        Phase {
            name: "plain",
            burners: Some("plain"),
            threshold: threshold(false, "cpuset"),
            qos: no_qos,
        },
    ]
}

struct Bench {
    dir: PathBuf,
    client: kube::Client,
    node: String,
    cgroups: Cgroups,
    cpus: f64,
}

/// The bench's own kubepods parent, so a kubelet's tree on the machine is never touched.
fn parent() -> String {
    format!("koord-colocation-{}", std::process::id())
}

fn start_koord(dir: &Path) -> (Proc, String) {
    let config = dir.join("koord.yaml");
    std::fs::write(&config, "koordlet:\n  featureGates: {CoreSched: true}\n").unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let args: Vec<String> = [
        "--role=all",
        "--embedded",
        "--embedded-addr",
        &format!("127.0.0.1:{}", free_port()),
        "--admin-addr",
        &admin,
        "--data-dir",
        &dir.join("koord").display().to_string(),
        "--config",
        &config.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let envs = [
        (
            "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
            format!("127.0.0.1:{}", free_port()),
        ),
        ("KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT", parent()),
    ];
    let p = koord(&args, &envs);
    common::wait("koord ready", || ready(&admin));
    (p, admin)
}

async fn client(dir: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("koord/kubeconfig")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

fn worker_pod(
    b: &Bench,
    name: &str,
    labels: serde_json::Value,
    resources: serde_json::Value,
    env: &[(&str, String)],
) -> Pod {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let mut vars: Vec<serde_json::Value> = env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    let pid = b.dir.join(format!("{name}.pid")).display().to_string();
    vars.push(json!({"name": "COLOCATION_PID", "value": pid}));
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"nodeName": b.node, "restartPolicy": "Always", "containers": [{
            "name": "main", "image": "none", "command": [exe], "env": vars,
            "resources": resources}]}
    }))
    .unwrap()
}

async fn create_pods(b: &Bench, work_per_ms: u64) {
    let pods: Api<Pod> = Api::namespaced(b.client.clone(), NS);
    let ls = worker_pod(
        b,
        "ls-probe",
        json!({"koordinator.sh/qosClass": "LS"}),
        json!({"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}),
        &[
            ("COLOCATION_WORKER", "probe".into()),
            ("COLOCATION_WORK", work_per_ms.to_string()),
            (
                "COLOCATION_OUT",
                b.dir.join("ls.samples").display().to_string(),
            ),
        ],
    );
    let mut all = vec![ls];
    for i in 0..BURNERS {
        let ctl = |kind: &str| b.dir.join(format!("{kind}.on")).display().to_string();
        let mut be = worker_pod(
            b,
            &format!("be-{i}"),
            json!({"koordinator.sh/qosClass": "BE"}),
            json!({"requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "64Mi"},
                   "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "256Mi"}}),
            &[
                ("COLOCATION_WORKER", "burn".into()),
                ("COLOCATION_CTL", ctl("be")),
            ],
        );
        // Koordinator's webhook: BE goes with the koord-batch (or koord-free) class.
        if let Some(spec) = be.spec.as_mut() {
            spec.priority_class_name = Some("koord-batch".into());
        }
        all.push(be);
        all.push(worker_pod(
            b,
            &format!("plain-{i}"),
            json!({}),
            json!({"requests": {"cpu": "300m"}}),
            &[
                ("COLOCATION_WORKER", "burn".into()),
                ("COLOCATION_CTL", ctl("plain")),
                ("COLOCATION_SOLO", ctl(&format!("plain-{i}"))),
            ],
        ));
    }
    for p in &all {
        pods.create(&PostParams::default(), p).await.unwrap();
    }
    let names: Vec<String> = all.iter().filter_map(|p| p.metadata.name.clone()).collect();
    common::wait("every pod started", || {
        names
            .iter()
            .all(|n| b.dir.join(format!("{n}.pid")).exists())
    });
}

/// Applies the phase's `slo-controller-config` and waits for the node's NodeSLO to say it.
async fn configure(b: &Bench, phase: &Phase) {
    let cms: Api<ConfigMap> = Api::namespaced(b.client.clone(), "koordinator-system");
    let data = json!({
        "colocation-config": json!({"enable": true}).to_string(),
        "resource-threshold-config": phase.threshold.to_string(),
        "resource-qos-config": phase.qos.to_string(),
    });
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": data});
    let existing = cms.get_opt("slo-controller-config").await.unwrap();
    if existing.is_some() {
        cms.patch(
            "slo-controller-config",
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": data})),
        )
        .await
        .unwrap();
    } else {
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let slos: Api<NodeSLO> = Api::all(b.client.clone());
    let want_policy = phase.threshold["clusterStrategy"]["cpuSuppressPolicy"].clone();
    let want_enable = phase.threshold["clusterStrategy"]["enable"].clone();
    let want_cpu = phase.qos["clusterStrategy"]["policies"]["cpuPolicy"].clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(slo)) = slos.get_opt(&b.node).await {
            let spec = serde_json::to_value(&slo.spec).unwrap_or_default();
            let t = &spec["resourceUsedThresholdWithBE"];
            let cpu = &spec["resourceQOSStrategy"]["policies"]["cpuPolicy"];
            let cpu_ok = cpu == &want_cpu || (want_cpu.is_null() && cpu == "groupIdentity");
            if t["cpuSuppressPolicy"] == want_policy && t["enable"] == want_enable && cpu_ok {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "NodeSLO never reflected {}",
            phase.name
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// utime + stime of a process, in seconds.
fn cpu_secs_of(pid_file: &Path) -> f64 {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        .map_or(0.0, common::cpu_secs)
}

fn pid_file(b: &Bench, name: &str) -> PathBuf {
    b.dir.join(format!("{name}.pid"))
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

/// The LS pod's latencies (µs) in `[from, to)` (unix ms), sorted.
fn latencies(b: &Bench, from: u64, to: u64) -> Vec<u64> {
    let text = std::fs::read_to_string(b.dir.join("ls.samples")).unwrap_or_default();
    let mut v: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let (t, us) = l.split_once(' ')?;
            let t: u64 = t.parse().ok()?;
            (from..to).contains(&t).then(|| us.parse().ok())?
        })
        .collect();
    v.sort_unstable();
    v
}

/// What the besteffort QoS cgroup holds now.
fn besteffort_state(b: &Bench) -> String {
    let dir = b.cgroups.qos_dir(KubeQoS::BestEffort);
    let read = |r| {
        b.cgroups
            .read(r, &dir)
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|_| "-".into())
    };
    format!(
        "shares {} idle {} quota {} cpus {}",
        read(Resource::CpuShares),
        read(Resource::CpuIdle),
        read(Resource::CfsQuota),
        read(Resource::CpusetCpus)
    )
}

struct Measured {
    p50: f64,
    p99: f64,
    p999: f64,
    samples: usize,
    burner_cores: f64,
    ls_cores: f64,
    cgroup: String,
}

async fn measure(b: &Bench, phase: &Phase, seconds: u64) -> Measured {
    configure(b, phase).await;
    for kind in ["be", "plain"] {
        let ctl = b.dir.join(format!("{kind}.on"));
        if phase.burners == Some(kind) {
            std::fs::write(&ctl, "").unwrap();
        } else {
            let _ = std::fs::remove_file(&ctl);
        }
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let burners: Vec<PathBuf> = (0..BURNERS)
        .map(|i| pid_file(b, &format!("{}-{i}", phase.burners.unwrap_or("be"))))
        .collect();
    let cpu = |files: &[PathBuf]| files.iter().map(|f| cpu_secs_of(f)).sum::<f64>();
    let ls = [pid_file(b, "ls-probe")];
    let (from, t0) = (unix_ms(), Instant::now());
    let (burn0, ls0) = (cpu(&burners), cpu(&ls));
    tokio::time::sleep(Duration::from_secs(seconds / 2)).await;
    let cgroup = besteffort_state(b);
    tokio::time::sleep(Duration::from_secs(seconds - seconds / 2)).await;
    let (burn1, ls1) = (cpu(&burners), cpu(&ls));
    let (to, wall) = (unix_ms(), t0.elapsed().as_secs_f64());
    // The probe flushes every ~2 KB (about 1 s of samples).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lat = latencies(b, from, to);
    Measured {
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        p999: percentile(&lat, 0.999),
        samples: lat.len(),
        burner_cores: if phase.burners.is_some() {
            (burn1 - burn0) / wall
        } else {
            0.0
        },
        ls_cores: (ls1 - ls0) / wall,
        cgroup,
    }
}

/// (cores the burners used, cores the LS pod used) over the next `secs` seconds.
async fn sample(burners: &[PathBuf], ls: &[PathBuf], secs: u64) -> (f64, f64) {
    let cpu = |files: &[PathBuf]| files.iter().map(|f| cpu_secs_of(f)).sum::<f64>();
    let (b0, l0, t0) = (cpu(burners), cpu(ls), Instant::now());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let wall = t0.elapsed().as_secs_f64();
    ((cpu(burners) - b0) / wall, (cpu(ls) - l0) / wall)
}

/// BE suppressed to its floor (cfsQuota at 20 %) beside one plain pod burning a core, then
/// the threshold raised to 100 %: the seconds until the BE pods get 80 % of what the LS
/// and plain pods leave idle.
async fn recovery(b: &Bench, _admin: &str) {
    let mut phase = Phase {
        name: "recovery",
        burners: Some("be"),
        threshold: json!({"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 20,
            "cpuSuppressPolicy": "cfsQuota"}}),
        qos: json!({"clusterStrategy": {}}),
    };
    configure(b, &phase).await;
    let _ = std::fs::remove_file(b.dir.join("plain.on"));
    std::fs::write(b.dir.join("plain-0.on"), "").unwrap();
    std::fs::write(b.dir.join("be.on"), "").unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let burners: Vec<PathBuf> = (0..BURNERS)
        .map(|i| pid_file(b, &format!("be-{i}")))
        .collect();
    let ls = [pid_file(b, "ls-probe"), pid_file(b, "plain-0")];
    let (floor, _) = sample(&burners, &ls, 3).await;
    println!(
        "recovery: cfsQuota at 20 %: BE {floor:4.2} cores, besteffort: {}",
        besteffort_state(b)
    );
    phase.threshold["clusterStrategy"]["cpuSuppressThresholdPercent"] = 100.into();
    let cms: Api<ConfigMap> = Api::namespaced(b.client.clone(), "koordinator-system");
    let raised = Instant::now();
    cms.patch(
        "slo-controller-config",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"resource-threshold-config": phase.threshold.to_string()}})),
    )
    .await
    .unwrap();
    let mut recovered = None;
    while raised.elapsed() < Duration::from_secs(130) {
        let (be, ls) = sample(&burners, &ls, 1).await;
        if std::env::var("COLOCATION_DEBUG").is_ok() {
            let slos: Api<NodeSLO> = Api::all(b.client.clone());
            let slo = slos
                .get(&b.node)
                .await
                .ok()
                .map(|s| serde_json::to_value(&s.spec).unwrap_or_default());
            let t = slo.map(|s| s["resourceUsedThresholdWithBE"].clone());
            let m = common::admin_get(_admin, "/metrics").unwrap_or_default();
            let lines: Vec<&str> = m
                .lines()
                .filter(|l| l.starts_with("koordlet_be_suppress"))
                .collect();
            println!(
                "debug: {:.0}s be {be:.2} {t:?} {lines:?} {}",
                raised.elapsed().as_secs_f64(),
                besteffort_state(b)
            );
        }
        let share = be / (b.cpus - ls).max(0.01);
        if share >= 0.8 {
            recovered = Some((raised.elapsed().as_secs_f64(), be));
            break;
        }
    }
    match recovered {
        Some((s, be)) => println!(
            "recovery: threshold raised to 100 %: BE back at {be:4.2} cores (>= 80 % of idle) after {s:4.1} s; besteffort: {}",
            besteffort_state(b)
        ),
        None => println!(
            "recovery: threshold raised to 100 %: BE NOT back at 80 % of idle after 130 s; besteffort: {}",
            besteffort_state(b)
        ),
    }
    for f in ["be.on", "plain-0.on"] {
        let _ = std::fs::remove_file(b.dir.join(f));
    }
}

async fn run() {
    let rounds = env_u64("COLOCATION_ROUNDS", 2);
    let seconds = env_u64("COLOCATION_SECONDS", 20).max(2);
    let work_per_ms = calibrate();
    let tmp = tempfile::Builder::new()
        .prefix("koord-colocation")
        .tempdir()
        .unwrap();
    let (_koord, _admin) = start_koord(tmp.path());
    let client = client(tmp.path()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let cgroups =
        Cgroups::detect(Path::new("/sys/fs/cgroup"), &parent(), Driver::Cgroupfs).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let b = Bench {
        dir: tmp.path().to_path_buf(),
        client,
        node,
        cgroups,
        cpus,
    };
    println!(
        "colocation: {cpus} CPUs, {BURNERS} burners a phase, {rounds} round(s) of {seconds} s a phase, 1 ms of work = {work_per_ms} iterations"
    );
    create_pods(&b, work_per_ms).await;
    let mut results: BTreeMap<&str, Vec<(Measured, f64)>> = BTreeMap::new();
    let phases = phases();
    for round in 0..rounds {
        let mut alone_p99 = f64::NAN;
        for phase in &phases {
            let m = measure(&b, phase, seconds).await;
            if phase.name == "alone" {
                alone_p99 = m.p99;
            }
            let ratio = m.p99 / alone_p99;
            let idle = (b.cpus - m.ls_cores).max(0.01);
            println!(
                "round {round} {:<17} LS p50 {:6.2} ms  p99 {:6.2} ms ({:4.2}x alone)  p99.9 {:6.2} ms  [{} units]  burners {:4.2} cores = {:5.1} % of the {:4.2} the LS pod leaves idle  besteffort: {}",
                phase.name,
                m.p50,
                m.p99,
                ratio,
                m.p999,
                m.samples,
                m.burner_cores,
                100.0 * m.burner_cores / idle,
                idle,
                m.cgroup
            );
            results.entry(phase.name).or_default().push((m, ratio));
        }
    }
    println!(
        "\nsummary (median over rounds; budget: LS p99 <= 1.2x alone while burners get >= 80 % of the idle CPU):"
    );
    for phase in phases.iter().filter(|_| rounds > 0) {
        let rs = &results[phase.name];
        let med = |f: &dyn Fn(&(Measured, f64)) -> f64| {
            let mut v: Vec<f64> = rs.iter().map(f).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            v[v.len() / 2]
        };
        let share = med(&|(m, _)| m.burner_cores / (b.cpus - m.ls_cores).max(0.01));
        let ratio = med(&|(_, r)| *r);
        let verdict = if phase.burners.is_none() {
            "-"
        } else if ratio <= 1.2 && share >= 0.8 {
            "meets the budget"
        } else {
            "misses the budget"
        };
        println!(
            "  {:<17} LS p99 {:6.2} ms ({:4.2}x)  p99.9 {:6.2} ms  burners {:4.2} cores ({:5.1} % of idle)  {verdict}",
            phase.name,
            med(&|(m, _)| m.p99),
            ratio,
            med(&|(m, _)| m.p999),
            med(&|(m, _)| m.burner_cores),
            100.0 * share,
        );
    }
    recovery(&b, &_admin).await;
    let pods: Api<Pod> = Api::namespaced(b.client.clone(), NS);
    let _ = pods
        .delete_collection(&Default::default(), &ListParams::default())
        .await;
    for kind in ["be", "plain"] {
        let _ = std::fs::remove_file(b.dir.join(format!("{kind}.on")));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
}
