//! RSS and CPU of a real koordlet process watching 100 fake pods at a 1 s interval.
//!
//! `cargo bench --bench koordlet_footprint` runs 10 minutes (set FOOTPRINT_SECONDS
//! to change). It starts `koord --embedded` (API server only) and `koord --role=koordlet`
//! pointed at a temp-dir cgroup tree with 100 running pods whose counters advance every
//! second, and samples the koordlet's VmRSS and CPU time from /proc. It also reads the
//! same cgroup files once a second itself and prints what that costs (the floor).
//!
//! The koordlet runs from its own copy of the binary whose page cache is dropped first, as
//! on a node where the DaemonSet's image is a file of its own and not (or no longer) cached;
//! `FOOTPRINT_SHARED_BINARY=1` runs it from the API server's file instead, whose pages that
//! process already cached, so every code fault maps a batch of neighbours (the RSS then
//! counts more of the shared, reclaimable page cache — see `RssFile` in the output).
//!
//! `FOOTPRINT_GATES=A=true,B=true` passes the koordlet those feature gates (Koordinator's
//! `-feature-gates`), to measure it with collectors and strategies that are off by default.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};

use common::{Proc, TICKS_PER_SECOND, free_port, proc_stat};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("koordlet_footprint: bench");
        return;
    }
    let seconds: u64 = std::env::var("FOOTPRINT_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let bin = std::env::var("BENCH_KOORD_BIN").unwrap_or(env!("CARGO_BIN_EXE_koord").into());
    let bin = bin.as_str();
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("cgroup");
    for s in ["cpu", "cpuacct", "cpuset", "memory"] {
        std::fs::create_dir_all(cg.join(s).join("kubepods/besteffort")).unwrap();
    }
    std::fs::write(cg.join("cpuset/kubepods/besteffort/cpuset.cpus"), "0-1").unwrap();
    std::fs::write(cg.join("cpu/kubepods/besteffort/cpu.cfs_quota_us"), "-1").unwrap();
    let api_port = free_port();
    let _server = Proc(
        Command::new(bin)
            .args([
                "--embedded",
                "--embedded-addr",
                &format!("127.0.0.1:{api_port}"),
                "--admin-addr",
                &format!("127.0.0.1:{}", free_port()),
                "--data-dir",
            ])
            .arg(dir.path().join("server"))
            .args(["--node-name", "footprint-node", "--log-level", "warn"])
            .env("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let kubeconfig = dir.path().join("server/kubeconfig");
    for _ in 0..300 {
        if kubeconfig.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut dirs = Vec::new();
    for i in 0..100 {
        let name = format!("fake-{i}");
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": name},
            "spec": {"nodeName": "footprint-node", "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}})).unwrap();
        let created = pods.create(&PostParams::default(), &pod).await.unwrap();
        let uid = created.metadata.uid.unwrap();
        let status = serde_json::json!({"status": {"phase": "Running", "qosClass": "Burstable", "containerStatuses": [{"name": "c",
            "containerID": format!("containerd://c{i}"), "image": "i", "imageID": "", "ready": true, "restartCount": 0}]}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
        for rel in [
            format!("kubepods/burstable/pod{uid}"),
            format!("kubepods/burstable/pod{uid}/c{i}"),
        ] {
            for s in ["cpu", "cpuacct", "memory"] {
                std::fs::create_dir_all(cg.join(s).join(&rel)).unwrap();
            }
            std::fs::write(
                cg.join("memory").join(&rel).join("memory.stat"),
                "total_inactive_anon 1000\ntotal_active_anon 2000\ntotal_unevictable 0\n",
            )
            .unwrap();
            std::fs::write(
                cg.join("cpu").join(&rel).join("cpu.stat"),
                "nr_periods 1\nnr_throttled 0\nthrottled_time 0\n",
            )
            .unwrap();
            dirs.push(cg.join("cpuacct").join(&rel));
        }
    }
    let nm = serde_json::json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "footprint-node"}, "spec": {}});
    let nms: Api<koord::api::slo::NodeMetric> = Api::all(client);
    nms.create(&PostParams::default(), &serde_json::from_value(nm).unwrap())
        .await
        .unwrap();
    let koordlet_bin = koordlet_binary(bin, dir.path());
    let koordlet = Proc(
        Command::new(&koordlet_bin)
            .args(["--role=koordlet", "--kubeconfig"])
            .arg(&kubeconfig)
            .args([
                "--node-name",
                "footprint-node",
                "--admin-addr",
                &format!("127.0.0.1:{}", free_port()),
                "--log-level",
                "warn",
                "--data-dir",
            ])
            .arg(dir.path().join("koordlet"))
            .args(
                std::env::var("FOOTPRINT_GATES")
                    .ok()
                    .filter(|g| !g.is_empty())
                    .map(|g| format!("-feature-gates={g}")),
            )
            .env("KOORD_KOORDLET__CGROUP_ROOT", &cg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = koordlet.pid();
    let start = Instant::now();
    let (_, ticks0) = proc_stat(pid);
    let mut samples = Vec::new();
    let mut round = 0u64;
    let mut usage = vec![0u64; dirs.len()];
    let floor_files = floor_files(&cg);
    let mut floor = Duration::ZERO;
    let mut probe = PageProbe::new();
    let mut touched = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        round += 1;
        for (i, d) in dirs.iter().enumerate() {
            // 5 ms a second plus a per-pod wobble, so usage values vary as real ones do
            // (a constant rate would compress to almost nothing).
            let wobble = (round * 7919 + i as u64 * 104_729) % 2_000_000;
            usage[i] += 4_000_000 + wobble;
            let _ = std::fs::write(d.join("cpuacct.usage"), usage[i].to_string());
        }
        floor += read_all(&floor_files);
        probe.touch();
        // Twice a minute after start-up, what the koordlet touches in one second.
        let measure_touch = round > 30 && round % 30 == 15 && clear_refs(pid);
        std::thread::sleep(Duration::from_secs(1));
        if measure_touch && let Some(kib) = touched_anon_kib(pid) {
            touched.push(kib);
        }
        if round.is_multiple_of(30) {
            let (rss, _) = proc_stat(pid);
            samples.push((start.elapsed().as_secs(), rss));
        }
    }
    let (rss_end, ticks1) = proc_stat(pid);
    let cpu_pct =
        (ticks1 - ticks0) as f64 / TICKS_PER_SECOND / start.elapsed().as_secs_f64() * 100.0;
    let max = samples.iter().map(|(_, r)| *r).max().unwrap_or(rss_end);
    let profile: Vec<String> = samples
        .iter()
        .filter(|(t, _)| t % 120 < 30)
        .map(|(t, r)| format!("{}s:{:.1}", t, *r as f64 / 1024.0))
        .collect();
    println!("koordlet footprint, 100 fake pods, 1 s interval, {seconds} s:");
    println!(
        "  RSS now {:.1} MiB, max {:.1} MiB; profile (MiB) {}",
        rss_end as f64 / 1024.0,
        max as f64 / 1024.0,
        profile.join(" ")
    );
    println!("  CPU {cpu_pct:.2} % of one core on average");
    let floor_pct = floor.as_secs_f64() / start.elapsed().as_secs_f64() * 100.0;
    println!(
        "  floor: the {} cgroup files the koordlet reads each second, read once a second by \
         the bench itself: {floor_pct:.2} % of one core on this machine",
        floor_files.len()
    );
    println!(
        "  a page of the bench's own memory touched once a second: {:.2} µs on this machine \
         during the run",
        probe.per_page_us()
    );
    touched.sort_unstable();
    if let (Some(lo), Some(hi)) = (touched.first(), touched.last()) {
        println!(
            "  the koordlet's anonymous memory (heap, stacks) touched in one second, median of \
             {}: {} KiB ({lo}–{hi}); unlike CPU time, this does not depend on the host",
            touched.len(),
            touched[touched.len() / 2]
        );
    }
    println!("  at the end: {}", rss_split(pid));
}

/// Clears the process's page-referenced bits (`/proc/<pid>/clear_refs`); false where the
/// kernel or permissions do not allow it.
fn clear_refs(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "1").is_ok()
}

/// KiB of anonymous mappings (heap, stacks, malloc arenas) referenced since `clear_refs`:
/// the distinct memory the process touched, which is what its CPU follows on this
/// project's VMs (see `PageProbe`).
fn touched_anon_kib(pid: u32) -> Option<u64> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut anon = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let path = fields.nth(4).unwrap_or_default();
            anon = path.is_empty() || path == "[heap]" || path.starts_with("[stack");
        } else if anon && first == "Referenced:" {
            kib += fields
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(kib)
}

/// The fake tree's files the koordlet's collectors read every second (usage, memory,
/// throttling of every pod and container).
fn floor_files(cg: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for (sub, file) in [
        ("cpuacct", "cpuacct.usage"),
        ("memory", "memory.stat"),
        ("cpu", "cpu.stat"),
    ] {
        let pods = cg.join(sub).join("kubepods/burstable");
        for pod in std::fs::read_dir(&pods).into_iter().flatten().flatten() {
            out.push(pod.path().join(file));
            for c in std::fs::read_dir(pod.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if c.path().is_dir() {
                    out.push(c.path().join(file));
                }
            }
        }
    }
    out
}

/// This thread's CPU time for one burst of reads of `files`: what the kernel charges for
/// the reads alone when they come once a second, as the koordlet's do (on a VM this is
/// many times their cost in a tight loop, and it moves with the host).
fn read_all(files: &[std::path::PathBuf]) -> Duration {
    let t0 = thread_cpu();
    for f in files {
        let _ = std::fs::read(f);
    }
    thread_cpu().saturating_sub(t0)
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Pages of the bench's own memory it touches once a second: on a VM, a page last touched a
/// second ago costs many times one touched a moment ago, and how many varies with the host
/// (0.2–25 µs a page measured on this project's VMs). What the koordlet's own work costs
/// follows the pages it touches each second, so the bench prints this too.
struct PageProbe(Vec<u8>, u64, Duration);

impl PageProbe {
    const PAGES: usize = 256;

    fn new() -> PageProbe {
        PageProbe(vec![1u8; Self::PAGES * 4096], 0, Duration::ZERO)
    }

    fn touch(&mut self) {
        let t0 = thread_cpu();
        let mut sum = 0u64;
        for p in 0..Self::PAGES {
            // SAFETY: the index is inside the vector; volatile so the reads stay.
            sum += u64::from(unsafe { std::ptr::read_volatile(&self.0[p * 4096 + 64]) });
        }
        std::hint::black_box(sum);
        self.2 += thread_cpu().saturating_sub(t0);
        self.1 += 1;
    }

    /// Microseconds a page, on average.
    fn per_page_us(&self) -> f64 {
        self.2.as_secs_f64() * 1e6 / (self.1.max(1) as f64 * Self::PAGES as f64)
    }
}

/// Anonymous (heap, stacks) and file-backed (the binary's pages) parts of the RSS.
fn rss_split(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    ["RssAnon:", "RssFile:", "Threads:"]
        .iter()
        .filter_map(|k| status.lines().find(|l| l.starts_with(k)))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The binary the koordlet runs from: a private copy with a cold page cache, or `bin`.
fn koordlet_binary(bin: &str, dir: &std::path::Path) -> std::path::PathBuf {
    if std::env::var("FOOTPRINT_SHARED_BINARY").is_ok_and(|v| v == "1") {
        return bin.into();
    }
    let copy = dir.join("koord-node");
    std::fs::copy(bin, &copy).unwrap();
    let f = std::fs::File::open(&copy).unwrap();
    f.sync_all().unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise takes the open file's descriptor and plain integers.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    copy
}
