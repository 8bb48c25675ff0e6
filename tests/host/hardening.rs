//! `koord --role=all --embedded` as a shared machine meets it (root only; CI is root): a
//! second koord on the same host, a local stranger (`runuser -u nobody`), a full disk.
//! Each test stops what it started and leaves no cgroup or process behind.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Koord, free_port, http_get, is_root, marker, wait_until};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

pub(crate) const NODE: &str = "koord-node";

/// One `koord --role=all --embedded` with default node runtime flags but for the cgroup
/// parent (shared by the instances of one test, so the host's own kubepods is untouched).
pub(crate) struct Instance {
    pub(crate) koord: Koord,
    pub(crate) dir: PathBuf,
    pub(crate) client: kube::Client,
}

impl Instance {
    pub(crate) async fn start(dir: &Path, parent: &str, envs: &[(&str, &str)]) -> Instance {
        let api = free_port();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut all = vec![("KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT", parent)];
        all.extend_from_slice(envs);
        let koord = Koord::start(
            &[
                "--role=all",
                "--embedded",
                "--embedded-addr",
                &format!("127.0.0.1:{api}"),
                "--admin-addr",
                &admin.to_string(),
                "--data-dir",
                dir.to_str().unwrap(),
                "--node-name",
                NODE,
            ],
            &all,
            dir,
        );
        let ready = wait_until(Duration::from_secs(40), || {
            http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
        });
        assert!(ready, "not ready:\n{}", koord.logs());
        let client = koord::kernel::cluster::from_kubeconfig(&dir.join("kubeconfig"))
            .await
            .unwrap()
            .client;
        Instance {
            koord,
            dir: dir.to_path_buf(),
            client,
        }
    }

    pub(crate) fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// The kubelet API's pod list URL, as koord printed it.
    pub(crate) fn pods_url(&self) -> String {
        let logs = self.koord.logs();
        let at = logs.find("kubelet API at ").expect("the kubelet API line") + 15;
        logs[at..].split_whitespace().next().unwrap().to_string()
    }

    pub(crate) fn token(&self) -> String {
        std::fs::read_to_string(self.dir.join("pki/token"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub(crate) fn stop(mut self) {
        self.koord.signal("TERM");
        let status = self.koord.wait_exit(Duration::from_secs(40));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{}",
            self.koord.logs()
        );
    }
}

pub(crate) fn sleeper(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "containers": [{"name": "main", "image": "busybox",
            "command": ["sh", "-c", format!("while true; do sleep 1; done # {}", marker())]}]}}))
    .unwrap()
}

/// The pod once its container runs: (container id, restart count).
pub(crate) async fn running(pods: &Api<Pod>, name: &str) -> (String, i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let last = loop {
        let p = pods.get_opt(name).await.ok().flatten();
        let up = p
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.phase.as_deref() == Some("Running"));
        if up {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} not running: {:?}",
            p.map(|p| p.status)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let s = last.unwrap().status.unwrap().container_statuses.unwrap();
    (
        s[0].container_id.clone().unwrap_or_default(),
        s[0].restart_count,
    )
}

/// Whether the skip applies, printed once per test.
pub(crate) fn needs_root(what: &str) -> bool {
    let ok = is_root()
        && (Path::new("/sys/fs/cgroup/cpu").exists()
            || Path::new("/sys/fs/cgroup/cgroup.controllers").exists());
    if !ok {
        eprintln!("skipping {what}: needs root and a cgroup hierarchy at /sys/fs/cgroup");
    }
    ok
}

/// Runs `python3 -c script args...` as the user nobody; (exit code, stdout).
pub(crate) fn as_nobody(script: &str, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "/usr/bin/python3", "-c", script])
        .args(args)
        .current_dir("/")
        .output()
        .expect("runuser");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// An HTTP(S) request as nobody: the status code it got (0 when nothing answered).
pub(crate) fn http_as_nobody(method: &str, url: &str) -> u16 {
    let script = "import sys, ssl, urllib.request, urllib.error\n\
        req = urllib.request.Request(sys.argv[2], method=sys.argv[1], data=b'' if sys.argv[1] == 'POST' else None)\n\
        try:\n    r = urllib.request.urlopen(req, context=ssl._create_unverified_context(), timeout=5); print(r.status)\n\
        except urllib.error.HTTPError as e:\n    print(e.code)\n\
        except Exception as e:\n    print(0)\n";
    let (_, out) = as_nobody(script, &[method, url]);
    out.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_embedded_koords_side_by_side_keep_their_own_pods() {
    // Starting koord processes takes the CPU other tests measure.
    let _cpu = common::cpu_exclusive();
    if !needs_root("the two-instance test") {
        return;
    }
    let parent = format!("koord-test-{}-twins", std::process::id());
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The manager's default webhook port for both, as with default flags.
    let defaults = [("KOORD_MANAGER__WEBHOOK__PORT", "9876")];
    let a = Instance::start(da.path(), &parent, &defaults).await;
    a.pods()
        .create(&PostParams::default(), &sleeper("a-pod"))
        .await
        .unwrap();
    let (a_id, a_restarts) = running(&a.pods(), "a-pod").await;

    // The second koord starts on the same host and the same kubepods tree.
    let b = Instance::start(db.path(), &parent, &defaults).await;
    b.pods()
        .create(&PostParams::default(), &sleeper("b-pod"))
        .await
        .unwrap();
    let b_run = running(&b.pods(), "b-pod").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        running(&a.pods(), "a-pod").await,
        (a_id.clone(), a_restarts),
        "the first koord's pod kept running untouched\n{}",
        b.koord.logs()
    );

    // The second one leaving takes only its own pods with it.
    b.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(running(&a.pods(), "a-pod").await, (a_id, a_restarts));
    assert_ne!(b_run.0, "");
    a.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_api_answers_only_with_the_token() {
    // Starting koord processes takes the CPU other tests measure.
    let _cpu = common::cpu_exclusive();
    if !needs_root("the kubelet API test") {
        return;
    }
    let parent = format!("koord-test-{}-kubelet-auth", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let k = Instance::start(dir.path(), &parent, &[]).await;
    let mut pod = sleeper("secretive");
    pod.spec.as_mut().unwrap().containers[0].env = Some(vec![
        serde_json::from_value(json!({"name": "PASSWORD", "value": "hunter2"})).unwrap(),
    ]);
    k.pods().create(&PostParams::default(), &pod).await.unwrap();
    let (id, restarts) = running(&k.pods(), "secretive").await;
    let url = k.pods_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // A stranger on the machine reads no pod spec and stops no pod.
    assert_eq!(http_as_nobody("GET", &url), 401);
    let stop = format!("{url}/default/secretive/stop");
    assert_eq!(http_as_nobody("POST", &stop), 401);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(running(&k.pods(), "secretive").await, (id, restarts));

    // The holder of the kubeconfig's token does.
    let token = k.token();
    let script = "import sys, ssl, urllib.request\n\
        req = urllib.request.Request(sys.argv[1], headers={'Authorization': 'Bearer ' + sys.argv[2]})\n\
        print(urllib.request.urlopen(req, context=ssl._create_unverified_context(), timeout=5).read().decode())\n";
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script, &url, &token])
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("hunter2"), "{body}");
    assert_private_tree(dir.path());
    k.stop();
}

/// Every directory under `dir` is 0700 and every file or socket 0600, links none — but
/// inside a pod's projected volume (`noderuntime/volumes/<uid>/<volume>`, below a 0700
/// directory, reached by the pod only through its bind mount) directories are 0755 and
/// files 0644, so a container of any user reads its token.
fn assert_private_tree(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let m = std::fs::symlink_metadata(entry.path()).unwrap();
        let name = entry.path();
        // The test harness's own files (koord's stderr log) are not koord's.
        if name.extension().is_some_and(|e| e == "log") && name.parent() == Some(dir) {
            continue;
        }
        let in_volume = name
            .ancestors()
            .nth(2)
            .is_some_and(|a| a.ends_with("noderuntime/volumes"))
            || name
                .ancestors()
                .skip(3)
                .any(|a| a.ends_with("noderuntime/volumes"));
        let want = match (m.is_dir(), in_volume) {
            (true, true) => 0o755,
            (false, true) => 0o644,
            (true, false) => 0o700,
            (false, false) => 0o600,
        };
        assert_eq!(m.mode() & 0o7777, want, "{}", name.display());
        if m.is_dir() {
            assert_private_tree(&name);
        }
    }
}

/// `koord --embedded` (the API server alone) on `data`: its exit code (`None` when it
/// keeps running) and its output.
fn embedded_exit(data: &Path) -> (Option<i32>, String) {
    let logs = tempfile::tempdir().unwrap();
    let mut k = Koord::start(
        &[
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--admin-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[],
        logs.path(),
    );
    let code = k.wait_exit(Duration::from_secs(15)).and_then(|s| s.code());
    (code, k.logs())
}

#[test]
fn a_data_dir_a_stranger_controls_is_refused() {
    if !is_root() {
        eprintln!("skipping the data dir test: needs root (chown, runuser)");
        return;
    }
    // A shared, sticky directory like /tmp, where anyone may create names.
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();

    // A data dir pre-created by nobody, with a token of theirs in it.
    let planted = shared.join("planted");
    let make = "import os, sys\nd = sys.argv[1]\nos.makedirs(d + '/pki', 0o755)\nopen(d + '/pki/token', 'w').write('strangers-token')\n";
    let (code, out) = as_nobody(make, &[planted.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (code, err) = embedded_exit(&planted);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
    assert!(
        !planted.join("kubeconfig").exists(),
        "nothing is written into it"
    );

    // A data dir path that is nobody's link to a directory of root's.
    let target = t.path().join("roots");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let link = shared.join("link");
    let (code, out) = as_nobody(
        "import os, sys\nos.symlink(sys.argv[1], sys.argv[2])",
        &[target.to_str().unwrap(), link.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    let (code, err) = embedded_exit(&link);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(&target).unwrap());
    assert_eq!(mode & 0o777, 0o755, "the link's target is not chmodded");
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nor written into"
    );

    // A pki folder of nobody's inside root's own data dir.
    let mine = t.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::create_dir(mine.join("pki")).unwrap();
    std::fs::write(mine.join("pki/token"), "strangers-token").unwrap();
    std::os::unix::fs::chown(mine.join("pki"), Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(mine.join("pki/token"), Some(65534), Some(65534)).unwrap();
    let (code, err) = embedded_exit(&mine);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");

    // root's own data dir, but anyone may write into it, and someone did (an empty one, as
    // a pod's emptyDir is made, is narrowed to 0700 instead: nothing can have been put in).
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::write(open.join("planted"), "").unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let (code, err) = embedded_exit(&open);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("can be written by other users"), "{err}");
}

/// CPU seconds a process has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    f.get(10)
        .zip(f.get(11))
        .map_or(0.0, |(u, s)| (u + s) as f64 / hz)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_socket_bounds_its_connections() {
    // Starting koord processes takes the CPU other tests measure.
    let _cpu = common::cpu_exclusive();
    if !needs_root("the socket bound test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let parent = format!("koord-test-{}-sockcap", std::process::id());
    let socket = dir.path().join("hooks.sock");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let koord = Koord::start_limited(
        &[
            "--role=koordlet",
            "--embedded",
            "--embedded-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            NODE,
        ],
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            (
                "KOORD_KOORDLET__RUNTIME_HOOKS__SOCKET",
                socket.to_str().unwrap(),
            ),
        ],
        dir.path(),
        common::ChildLimits {
            nofile: Some(256),
            umask: Some(0),
            ..Default::default()
        },
    );
    let ready = wait_until(Duration::from_secs(40), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "not ready:\n{}", koord.logs());
    let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(&socket).unwrap());
    assert_eq!(mode & 0o777, 0o600, "the hook socket is root's alone");

    // Far more idle connections than the process has file descriptors.
    let conns: Vec<_> = (0..600)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(&socket).ok())
        .collect();
    assert!(conns.len() >= 300, "{} connections", conns.len());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cpu_seconds(koord.pid());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let used = cpu_seconds(koord.pid()) - before;
    let fds = std::fs::read_dir(format!("/proc/{}/fd", koord.pid()))
        .unwrap()
        .count();
    let logs = koord.logs();
    assert!(
        used < 0.5,
        "{used} CPU seconds in 3 s while holding connections"
    );
    assert!(fds < 250, "{fds} descriptors open");
    assert!(
        logs.matches("accept failed").count() < 5,
        "{}",
        &logs[logs.len().saturating_sub(2000)..]
    );
    assert!(
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200),
        "the admin endpoint still answers"
    );
    drop(conns);
    let mut koord = koord;
    koord.signal("TERM");
    assert_eq!(
        koord
            .wait_exit(Duration::from_secs(30))
            .and_then(|s| s.code()),
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_stops_its_pods_gracefully() {
    // Starting koord processes takes the CPU other tests measure.
    let _cpu = common::cpu_exclusive();
    if !needs_root("the namespace deletion test") {
        return;
    }
    let parent = format!("koord-test-{}-nsdelete", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let k = Instance::start(dir.path(), &parent, &[]).await;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(k.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
    )
    .await
    .unwrap();
    let seen = dir.path().join("term-seen");
    let script = format!(
        "trap 'echo TERM > {}; exit 0' TERM; while true; do sleep 0.2; done # {}",
        seen.display(),
        marker()
    );
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "graceful"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 10, "containers": [{"name": "main", "image": "busybox",
            "command": ["sh", "-c", script]}]}}))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "team");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    running(&pods, "graceful").await;
    nss.delete("team", &Default::default()).await.unwrap();
    let gone = wait_until(Duration::from_secs(30), || {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .args([
                "get",
                "namespace",
                "team",
                "--ignore-not-found",
                "-o",
                "name",
            ])
            .output();
        out.is_ok_and(|o| o.status.success() && o.stdout.is_empty())
    });
    assert!(gone, "namespace never went\n{}", k.koord.logs());
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap_or_default().trim(),
        "TERM",
        "the pod got SIGTERM and its grace period, not SIGKILL"
    );
    k.stop();
}

#[test]
fn device_scan_never_writes_through_a_planted_link() {
    if !is_root() {
        eprintln!("skipping the device-scan link test: needs root (runuser)");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let t = tempfile::tempdir().unwrap();
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A stranger plants links where the daemon writes: its old temp name and the file.
    let plant = "import os, sys\nos.symlink(sys.argv[1], sys.argv[2] + '/.ic-device.tmp')\nos.symlink(sys.argv[1], sys.argv[2] + '/ic-device')\n";
    let (code, out) = as_nobody(plant, &[victim.to_str().unwrap(), shared.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let sys = tempfile::tempdir().unwrap();
    let out_file = shared.join("ic-device");
    let status = std::process::Command::new(common::koord_bin())
        .args(["device-scan", "--oneshot", "--prints-output-file"])
        .arg(&out_file)
        .arg("--sys-root")
        .arg(sys.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious",
        "the link's target is untouched"
    );
    let m = std::fs::symlink_metadata(&out_file).unwrap();
    assert!(
        m.file_type().is_file(),
        "the link itself was replaced by the daemon's file"
    );
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600));
}
