//! Rest footprint: CPU and RSS of every role with nothing to do.
//!
//! `cargo bench --bench idle` starts `koord --embedded` (the API server alone, no node
//! runtime), then each role alone against it, then `koord --role=all --embedded` with the
//! node runtime (0 pods). Each process is measured over IDLE_SECONDS (default 60) after
//! it is ready and has had WARMUP_SECONDS (default 10) to settle: CPU time from
//! /proc/PID/stat as % of one core, VmRSS at the end. The koordlet alone reads a temp-dir
//! cgroup tree with no pods; `--role=all --embedded` uses the real host (its node runtime
//! needs root and says so otherwise). Budgets: each role ≤ 0.5 % of a core, `--role=all
//! --embedded` ≤ 2 % and ≤ 60 MiB.

mod common;

use std::path::Path;

use std::time::{Duration, Instant};

use common::{Proc, TICKS_PER_SECOND, free_port, koord, proc_stat, ready};

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Rest {
    cpu_pct: f64,
    rss_mib: f64,
}

/// Waits for readiness and the warm-up, then measures `secs` of rest.
fn measure(p: &Proc, admin: &str, warmup: u64, secs: u64) -> Option<Rest> {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ready(admin) {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(warmup));
    let pid = p.pid();
    let start = Instant::now();
    let (_, t0) = proc_stat(pid);
    std::thread::sleep(Duration::from_secs(secs));
    let (rss, t1) = proc_stat(pid);
    Some(Rest {
        cpu_pct: (t1 - t0) as f64 / TICKS_PER_SECOND / start.elapsed().as_secs_f64() * 100.0,
        rss_mib: rss as f64 / 1024.0,
    })
}

fn report(what: &str, budget: (f64, Option<f64>), rest: Option<Rest>) {
    let Some(r) = rest else {
        println!("{what:<28} never became ready");
        return;
    };
    let cpu_ok = r.cpu_pct <= budget.0;
    let rss_ok = budget.1.is_none_or(|b| r.rss_mib <= b);
    let verdict = if cpu_ok && rss_ok {
        "within budget"
    } else {
        "OVER budget"
    };
    println!(
        "{what:<28} CPU {:>5.2} % of a core  RSS {:>6.1} MiB  ({verdict})",
        r.cpu_pct, r.rss_mib
    );
}

fn fake_cgroups(root: &Path) {
    for s in ["cpu", "cpuacct", "cpuset", "memory"] {
        std::fs::create_dir_all(root.join(s).join("kubepods/besteffort")).unwrap();
    }
    std::fs::write(root.join("cpuset/kubepods/besteffort/cpuset.cpus"), "0-1").unwrap();
    std::fs::write(root.join("cpu/kubepods/besteffort/cpu.cfs_quota_us"), "-1").unwrap();
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("idle: bench");
        return;
    }
    let secs = env_secs("IDLE_SECONDS", 60);
    let warmup = env_secs("WARMUP_SECONDS", 10);
    let dir = tempfile::tempdir().unwrap();
    let addr = |p: u16| format!("127.0.0.1:{p}");
    println!("rest footprint: {warmup} s warm-up, {secs} s measured per process");

    let (api_port, api_admin) = (free_port(), free_port());
    let server = koord(
        &[
            "--embedded".into(),
            "--embedded-addr".into(),
            addr(api_port),
            "--admin-addr".into(),
            addr(api_admin),
            "--data-dir".into(),
            dir.path().join("server").display().to_string(),
            "--node-name".into(),
            "idle-node".into(),
        ],
        &[("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false".into())],
    );
    report(
        "API server (--embedded)",
        (0.5, None),
        measure(&server, &addr(api_admin), warmup, secs),
    );
    let kubeconfig = dir.path().join("server/kubeconfig").display().to_string();
    let cg = dir.path().join("cgroup");
    fake_cgroups(&cg);
    for role in [
        "manager",
        "scheduler",
        "descheduler",
        "koordlet",
        "runtime-proxy",
    ] {
        let role_admin = free_port();
        let p = koord(
            &[
                format!("--role={role}"),
                "--kubeconfig".into(),
                kubeconfig.clone(),
                "--admin-addr".into(),
                addr(role_admin),
                "--data-dir".into(),
                dir.path().join(role).display().to_string(),
                "--node-name".into(),
                "idle-node".into(),
            ],
            &[("KOORD_KOORDLET__CGROUP_ROOT", cg.display().to_string())],
        );
        report(
            &format!("--role={role}"),
            (0.5, None),
            measure(&p, &addr(role_admin), warmup, secs),
        );
    }
    drop(server);

    let all_admin = free_port();
    let all = koord(
        &[
            "--role=all".into(),
            "--embedded".into(),
            "--embedded-addr".into(),
            addr(free_port()),
            "--admin-addr".into(),
            addr(all_admin),
            "--data-dir".into(),
            dir.path().join("all").display().to_string(),
        ],
        &[("KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR", addr(free_port()))],
    );
    report(
        "--role=all --embedded",
        (2.0, Some(60.0)),
        measure(&all, &addr(all_admin), warmup, secs),
    );
}
