//! A private, real containerd + runc (Debian packages, installed by `scripts/deps.sh`) as
//! a CRI endpoint for tests: its own config, root, state and
//! socket in a temp dir, a registry-less pause/workload image built with umoci from
//! busybox-static, host-network sandboxes. Everything is stopped by PID and removed on
//! drop: shims, containerd, mounts under the temp dir, the test's cgroup directories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const IMAGE: &str = "localhost/koord-pause:local";

pub struct Containerd {
    child: Child,
    dir: tempfile::TempDir,
    pub socket: PathBuf,
    /// Test-owned cgroup parent, e.g. `/koord-test-123-cri`; removed on drop.
    pub cgroup_parent: String,
}

/// Why a real containerd cannot run here, if it cannot.
pub fn unavailable() -> Option<String> {
    if !super::is_root() {
        return Some("not root".into());
    }
    for bin in [
        "containerd",
        "runc",
        "ctr",
        "umoci",
        "containerd-shim-runc-v2",
    ] {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()));
        if !found {
            return Some(format!("{bin} not installed (run scripts/deps.sh)"));
        }
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("busybox-static not installed (run scripts/deps.sh)".into());
    }
    None
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn config(d: &Path) -> String {
    let d = d.display();
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[debug]
  address = "{d}/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni-conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"#
    )
}

/// An OCI image whose entrypoint sleeps forever, with busybox as `/bin/sh` and `/bin/sleep`.
fn build_image(d: &Path) -> PathBuf {
    let oci = d.join("oci");
    let layout = format!("{}:local", oci.display());
    let bundle = d.join("bundle");
    run(Command::new("umoci").args(["init", "--layout"]).arg(&oci));
    run(Command::new("umoci").args(["new", "--image", &layout]));
    run(Command::new("umoci")
        .args(["unpack", "--image", &layout])
        .arg(&bundle));
    let bin = bundle.join("rootfs/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
    for l in ["sh", "sleep"] {
        std::os::unix::fs::symlink("busybox", bin.join(l)).unwrap();
    }
    run(Command::new("umoci")
        .args(["repack", "--image", &layout])
        .arg(&bundle));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &layout,
        "--config.entrypoint",
        "/bin/sleep",
        "--config.cmd",
        "2147483647",
    ]));
    let tar = d.join("image.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&oci)
        .arg("-cf")
        .arg(&tar)
        .arg("."));
    tar
}

impl Containerd {
    /// Starts containerd and imports the image; `None` (reason printed) when it cannot run.
    pub fn start(what: &str) -> Option<Containerd> {
        if let Some(why) = unavailable() {
            eprintln!("skipping: real containerd unavailable: {why}");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("koord-test-ctrd")
            .tempdir()
            .unwrap();
        let conf = dir.path().join("config.toml");
        std::fs::write(&conf, config(dir.path())).unwrap();
        let log = std::fs::File::create(dir.path().join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let socket = dir.path().join("containerd.sock");
        let c = Containerd {
            child,
            socket: socket.clone(),
            cgroup_parent: format!("/koord-test-{}-{what}", std::process::id()),
            dir,
        };
        assert!(
            super::wait_until(Duration::from_secs(20), || socket.exists()),
            "containerd did not start: {}",
            c.log()
        );
        let tar = build_image(c.dir.path());
        run(Command::new("ctr")
            .arg("--address")
            .arg(&c.socket)
            .args(["-n", "k8s.io", "images", "import", "--base-name"])
            .arg(IMAGE.trim_end_matches(":local"))
            .arg(&tar));
        Some(c)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// PIDs of the shims serving this containerd (their command line names our socket).
    fn shims(&self) -> Vec<i32> {
        let needle = self.socket.display().to_string();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("containerd-shim") && c.contains(&needle)
                })
            })
            .collect()
    }
}

fn unmount_under(dir: &Path) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = dir.display().to_string();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        if let Ok(c) = std::ffi::CString::new(p) {
            // SAFETY: a valid NUL-terminated path; MNT_DETACH cannot touch other memory.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Kills (by PID) every process left in `rel`, then rmdirs it and everything below it in
/// every cgroup hierarchy, deepest first.
pub fn remove_cgroups(rel: &str) {
    fn rm(p: &Path) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rm(&e.path());
            }
        }
        let procs = std::fs::read_to_string(p.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: plain kill(2) of a process inside the test's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for _ in 0..50 {
            if std::fs::remove_dir(p).is_ok() || !p.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let rel = rel.trim_start_matches('/');
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = h.path().join(rel);
        if p.is_dir() {
            rm(&p);
        }
    }
    let v2 = Path::new("/sys/fs/cgroup").join(rel);
    if v2.is_dir() {
        rm(&v2);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for pid in self.shims() {
            // SAFETY: plain kill(2) on a PID we found serving our own socket.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(100));
        unmount_under(self.dir.path());
        remove_cgroups(&self.cgroup_parent);
    }
}
