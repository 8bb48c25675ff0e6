//! Helpers the process-level benches share: ports, /proc readings, readiness, and a child
//! process that is stopped (SIGTERM, then SIGKILL) when dropped.
#![allow(dead_code)]

use std::process::{Child, Command};
use std::time::Duration;

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// (VmRSS in KiB, utime + stime in clock ticks) of a process.
pub fn proc_stat(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .get(stat.rfind(')').map_or(0, |i| i + 1)..)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (rss, field(11) + field(12))
}

/// (VmRSS, VmHWM) of a process in MiB: now and its peak.
pub fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// Clock ticks per second of /proc/PID/stat times (USER_HZ, 100 on Linux).
pub const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_secs(pid: u32) -> f64 {
    proc_stat(pid).1 as f64 / TICKS_PER_SECOND
}

/// `GET /readyz` on a koord admin address answered 200.
pub fn ready(admin: &str) -> bool {
    admin_get(admin, "/readyz").is_some_and(|out| out.starts_with("HTTP/1.1 200"))
}

/// The raw HTTP response to `GET path` on an admin address (None when it cannot connect).
pub fn admin_get(admin: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let addr = admin.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    Some(out)
}

/// A child process, stopped when dropped: SIGTERM, up to 10 s to exit, then SIGKILL.
pub struct Proc(pub Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the release `koord` binary (or `BENCH_KOORD_BIN`) with `args` (warn-level logs, no inherited
/// kubeconfig, a webhook port of its own).
pub fn koord(args: &[String], envs: &[(&str, String)]) -> Proc {
    // BENCH_KOORD_BIN=<path> runs another build (comparing commits with the same bench).
    let bin =
        std::env::var("BENCH_KOORD_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_koord").into());
    let mut cmd = Command::new(bin);
    // BENCH_CHILD_LOG=<filter> shows a child's logs on stderr (finding where time goes).
    let log = std::env::var("BENCH_CHILD_LOG").ok();
    cmd.args(args)
        .args(["--log-level", log.as_deref().unwrap_or("warn")])
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("KOORD_MANAGER__WEBHOOK__PORT", free_port().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(if log.is_some() {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::null()
        });
    for (k, v) in envs {
        cmd.env(k, v);
    }
    Proc(cmd.spawn().expect("start koord"))
}

/// Waits up to 120 s for `ok`, panicking with `what` after that.
pub fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `koord --embedded --sim-nodes=N` (no node runtime; `extra` flags first, e.g.
/// `--role=all`) under `dir/server`, ready, with a client from the kubeconfig it wrote.
pub async fn embedded(
    dir: &std::path::Path,
    extra: &[&str],
    nodes: u32,
    node_memory: &str,
) -> (Proc, std::path::PathBuf, kube::Client) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    args.extend([
        "--embedded".into(),
        "--embedded-addr".into(),
        format!("127.0.0.1:{}", free_port()),
        "--admin-addr".into(),
        admin.clone(),
        "--data-dir".into(),
        dir.join("server").display().to_string(),
        format!("--sim-nodes={nodes}"),
        "--sim-node-cpu=32".into(),
        format!("--sim-node-memory={node_memory}"),
    ]);
    let server = koord(
        &args,
        &[("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false".into())],
    );
    wait("API server ready", || ready(&admin));
    let kubeconfig = dir.join("server/kubeconfig");
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    (server, kubeconfig, kube::Client::try_from(cfg).unwrap())
}
