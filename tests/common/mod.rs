//! Helpers shared by the integration tests: free ports, a raw HTTP client, and a guard
//! that runs the real `koord` binary and kills it (by PID) when dropped.
#![allow(dead_code)]

pub mod burner;
pub mod containerd;
pub mod nvml;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nobody listens on right now, and one this test process has not handed
/// out before: the kernel may return a just-released port again, and a test that asks for
/// two (an admin and a pods address) must not get the same one twice.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// `GET path` over a fresh connection; `None` when nothing answers.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, decode_chunked(&body)))
}

fn decode_chunked(body: &str) -> String {
    // Bodies here are small; if it does not look chunked, return it as is.
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size_line, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(size) = usize::from_str_radix(size_line.trim(), 16) else {
            return body.to_string();
        };
        if size == 0 {
            return out;
        }
        if after.len() < size {
            return body.to_string();
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn koord_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_koord"))
}

/// `koord explain schedule -f SNAPSHOT -o json`, which must succeed, as JSON.
#[allow(dead_code)]
pub fn explain_schedule(snapshot: &str) -> serde_json::Value {
    explain_schedule_with(snapshot, &[])
}

/// `koord explain schedule -f SNAPSHOT -o json ARGS…`, which must succeed, as JSON.
#[allow(dead_code)]
pub fn explain_schedule_with(snapshot: &str, args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(koord_bin())
        .args(["explain", "schedule", "-f", snapshot, "-o", "json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What a test's koord runs under beyond the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildLimits {
    /// Open files, soft and hard limit.
    pub nofile: Option<u64>,
    /// The file mode creation mask (koord must not depend on it).
    pub umask: Option<libc::mode_t>,
    /// A network namespace to run in (an open descriptor of `/var/run/netns/<name>`,
    /// kept open by the caller until koord started).
    pub netns: Option<i32>,
}

/// A running `koord` process, killed by PID on drop. Its stderr goes to a file so a
/// failing test can print it.
pub struct Koord {
    pub child: Option<Child>,
    pub log: PathBuf,
}

impl Koord {
    pub fn start(args: &[&str], envs: &[(&str, &str)], log_dir: &Path) -> Koord {
        Self::start_limited(args, envs, log_dir, ChildLimits::default())
    }

    /// `koord --role=all --embedded` on free loopback ports with its data (and kubeconfig)
    /// in `dir/data`, plus `extra` flags and `envs`.
    #[allow(dead_code)]
    pub fn embedded(dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Koord {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let (api, admin) = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        let mut args = vec![
            "--role=all",
            "--embedded",
            "--embedded-addr",
            &api,
            "--admin-addr",
            &admin,
            "--data-dir",
            data.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Self::start(&args, envs, dir)
    }

    /// Like [`Koord::start`], run under another name (a link to koord in `log_dir`), as
    /// Koordinator's images run `/koord-scheduler`, `/koordlet`, ...
    #[allow(dead_code)]
    pub fn start_as(name: &str, args: &[&str], envs: &[(&str, &str)], log_dir: &Path) -> Koord {
        let link = log_dir.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(koord_bin(), &link).unwrap();
        }
        Self::spawn(&link, args, envs, log_dir, ChildLimits::default())
    }

    /// Like [`Koord::start`], under `limits`.
    pub fn start_limited(
        args: &[&str],
        envs: &[(&str, &str)],
        log_dir: &Path,
        limits: ChildLimits,
    ) -> Koord {
        Self::spawn(&koord_bin(), args, envs, log_dir, limits)
    }

    fn spawn(
        program: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
        log_dir: &Path,
        limits: ChildLimits,
    ) -> Koord {
        guard_strays();
        let log = log_dir.join(format!("koord-{}.log", free_port()));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .env("HOME", log_dir)
            .stdout(Stdio::null())
            .stderr(file)
            // Every manager serves webhooks: give each its own port (on the embedded API
            // server each publishes itself as an endpoint of the webhook Service).
            .env("KOORD_MANAGER__WEBHOOK__PORT", free_port().to_string())
            // The koordlet's hook server listens in the test's directory, not /var/run.
            .env(
                "KOORD_KOORDLET__RUNTIME_HOOKS__SOCKET",
                log_dir.join(format!("koordlet-{}.sock", free_port())),
            );
        for (k, v) in envs {
            cmd.env(k, v);
        }
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit, umask and setns are async-signal-safe and touch only the child.
            unsafe {
                cmd.pre_exec(move || {
                    if let Some(n) = limits.nofile {
                        let lim = libc::rlimit {
                            rlim_cur: n,
                            rlim_max: n,
                        };
                        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if let Some(mask) = limits.umask {
                        libc::umask(mask);
                    }
                    if let Some(fd) = limits.netns
                        && libc::setns(fd, libc::CLONE_NEWNET) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        Koord {
            child: Some(cmd.spawn().expect("start koord")),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig} failed");
    }

    /// Waits for exit up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log without terminal colours (to search for `key=value`).
    #[allow(dead_code)]
    pub fn plain_logs(&self) -> String {
        let mut out = String::new();
        let mut rest = self.logs();
        while let Some(i) = rest.find('\x1b') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            let end = tail.find('m').map_or(tail.len(), |e| e + 1);
            rest = tail[end..].to_string();
        }
        out + &rest
    }
}

impl Drop for Koord {
    /// SIGTERM first so koord stops what it started (pods of the node runtime), then
    /// SIGKILL if it does not exit.
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.pid().to_string()])
                .status();
            if self.wait_exit(Duration::from_secs(15)).is_none()
                && let Some(mut child) = self.child.take()
            {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// An in-process embedded API server and a kube client for it.
pub struct TestApi {
    pub server: Option<koord::apiserver::ApiServer>,
    pub client: kube::Client,
}

impl TestApi {
    pub async fn start() -> TestApi {
        Self::start_with(koord::apiserver::Options::for_tests()).await
    }

    pub async fn start_with(opts: koord::apiserver::Options) -> TestApi {
        guard_strays();
        let server = koord::apiserver::ApiServer::start(opts)
            .await
            .expect("start API server");
        let client = server.client().await.expect("client");
        TestApi {
            server: Some(server),
            client,
        }
    }

    /// A server on a free loopback port (for a `koord` process to reach) with 4-cpu,
    /// 8 GiB nodes of these names; the port.
    #[allow(dead_code)]
    pub async fn with_nodes(names: &[&str]) -> (TestApi, u16) {
        let port = free_port();
        let mut opts = koord::apiserver::Options::for_tests();
        opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
        let api = TestApi::start_with(opts).await;
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(api.client.clone());
        for n in names {
            let node = serde_json::from_value(
                serde_json::json!({"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
            )
            .unwrap();
            nodes.create(&Default::default(), &node).await.unwrap();
        }
        (api, port)
    }

    pub fn server(&self) -> &koord::apiserver::ApiServer {
        self.server.as_ref().expect("server running")
    }

    pub async fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

/// A client of the embedded API server `koord` serves, once it has written `kubeconfig`
/// (30 s at most; the failure prints koord's log).
#[allow(dead_code)]
pub async fn embedded_client(koord: &Koord, kubeconfig: &Path) -> kube::Client {
    assert!(
        eventually(Duration::from_secs(30), || async { kubeconfig.exists() }).await,
        "{}",
        koord.logs()
    );
    koord::kernel::cluster::from_kubeconfig(kubeconfig)
        .await
        .unwrap()
        .client
}

/// Creates `koordinator-system/slo-controller-config` with `data` (key → JSON text) once
/// the API server behind `client` takes it (20 s at most; the failure prints koord's log).
#[allow(dead_code)]
pub async fn create_slo_config(client: &kube::Client, koord: &Koord, data: serde_json::Value) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": data}))
    .unwrap();
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "koordinator-system");
    let pp = kube::api::PostParams::default();
    assert!(
        eventually(Duration::from_secs(20), || async {
            cms.create(&pp, &cm).await.is_ok()
        })
        .await,
        "{}",
        koord.logs()
    );
}

/// Polls an async condition until it holds or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A kubeconfig for a plain-HTTP API server on loopback (no credentials).
pub fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             contexts:\n- name: s\n  context:\n    cluster: s\n    user: s\ncurrent-context: s\nusers:\n- name: s\n  user: {{}}\n"
        ),
    )
    .unwrap();
    path
}

/// A kube API error's HTTP code.
pub fn api_code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Whether this process runs as root (tests that need real cgroups skip otherwise).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Prefix of the marker put into the command lines of test pods.
pub const STRAY_MARKER: &str = "koord-test-marker";

/// This test process's marker, `koord-test-marker-<pid>`: put it into the command line of
/// every process a test starts, and cgroups are named `koord-test-<pid>-...`, so the guard
/// below knows whose they are.
pub fn marker() -> String {
    guard_strays();
    format!("{STRAY_MARKER}-{}", std::process::id())
}

/// Makes this test binary check, as it exits, that nothing it started survives (a process
/// carrying its marker, a cgroup named after its pid) and that no test binary before it
/// left anything (owner no longer alive): the exit status turns to failure otherwise.
/// Independent of the order the binaries run in.
pub fn guard_strays() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function; atexit has no other effect.
        unsafe {
            libc::atexit(check_strays_at_exit);
        }
    });
}

extern "C" fn check_strays_at_exit() {
    let found = strays();
    if !found.is_empty() {
        eprintln!("left behind by the test suite: {found:?}");
        // SAFETY: ends the process at once with a failing status, as intended.
        unsafe { libc::_exit(1) };
    }
}

/// Whether `owner` (a pid parsed from a marker or cgroup name) is this process or gone.
fn stray_owner(owner: Option<u32>) -> bool {
    match owner {
        Some(pid) => pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists(),
        None => true,
    }
}

/// Test cgroups and processes whose owning test process is this one or has exited.
pub fn strays() -> Vec<String> {
    let leading_pid = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let mut out = Vec::new();
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/cpuset",
        "/sys/fs/cgroup/cpuacct",
    ] {
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some(rest) = name.strip_prefix("koord-test-")
                && stray_owner(leading_pid(rest))
            {
                out.push(format!("cgroup {root}/{name}"));
            }
        }
    }
    let needle = format!("{STRAY_MARKER}-");
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        // The guard's own command line (cargo's, a shell's) may quote the prefix alone.
        if let Some(at) = cmdline.find(&needle)
            && stray_owner(leading_pid(&cmdline[at + needle.len()..]))
        {
            out.push(format!(
                "process {}: {}",
                entry.file_name().to_string_lossy(),
                cmdline.replace('\0', " ")
            ));
        }
    }
    out
}

/// Holds the machine's CPU for one test at a time (an exclusive `flock`, across test
/// binaries too) while it burns CPU or needs an idle node: on two cores, a CPU loop of one
/// test leaves no batch capacity for another's BE pod. Released when dropped.
pub fn cpu_exclusive() -> std::fs::File {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("koord-test-cpu.lock"))
        .expect("open the CPU lock file");
    // SAFETY: flock on a descriptor we own; it blocks until the lock is ours.
    unsafe {
        libc::flock(f.as_raw_fd(), libc::LOCK_EX);
    }
    f
}

/// A live scheduler of koord's default configuration that always leads.
#[allow(dead_code)]
pub fn default_scheduler(c: &kube::Client) -> koord::scheduler::live::Scheduler {
    let cfg = koord::scheduler::config::default_config().unwrap();
    koord::scheduler::live::Scheduler::new(
        c.clone(),
        &cfg,
        koord::kernel::lease::Leadership::always(),
    )
    .unwrap()
}
