//! The embedded API server's store on a full disk (root only: a small tmpfs).

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{TestApi, is_root};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn resize(&self, size: &str) {
        let ok = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn cm(name: &str, kb: usize) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "data": {"v": "x".repeat(kb * 1024)}}),
    )
    .unwrap()
}

/// The API server's own `/readyz` status.
async fn readyz(api: &TestApi) -> u16 {
    let addr = api.server().addr();
    tokio::task::spawn_blocking(move || common::http_get(addr, "/readyz").map_or(0, |r| r.0))
        .await
        .unwrap()
}

async fn start(data: &Path) -> TestApi {
    let mut opts = koord::apiserver::Options::for_tests();
    opts.data_dir = Some(data.to_path_buf());
    TestApi::start_with(opts).await
}

/// Whether a small write succeeds again within 15 s, without a restart.
async fn writes_resume(cms: &Api<ConfigMap>) -> bool {
    for _ in 0..150 {
        if cms
            .create(&PostParams::default(), &cm("after", 1))
            .await
            .is_ok()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A 20 MiB tmpfs, or `None` (with the reason printed) where one cannot be mounted.
fn small_disk() -> Option<Tmpfs> {
    if !is_root() {
        eprintln!("skipping the full disk test: needs root (mount)");
        return None;
    }
    let fs = Tmpfs::mount("20m");
    if fs.is_none() {
        eprintln!("skipping the full disk test: cannot mount a tmpfs");
    }
    fs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_at_once_and_recovers_by_itself() {
    let Some(fs) = small_disk() else {
        return;
    };
    let data: PathBuf = fs.path().join("data");
    let mut api = start(&data).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let pp = PostParams::default();
    let mut acked = Vec::new();
    let mut refused = Vec::new();
    for i in 0..400 {
        let name = format!("c{i}");
        let t = Instant::now();
        let r =
            tokio::time::timeout(Duration::from_secs(30), cms.create(&pp, &cm(&name, 200))).await;
        match r.expect("every write is answered, none hangs") {
            Ok(_) => acked.push(name),
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 507, "{s:?}");
                assert!(
                    s.message.contains("No space left on device"),
                    "{}",
                    s.message
                );
                assert!(
                    t.elapsed() < Duration::from_secs(25),
                    "answered within the flush deadline"
                );
                refused.push(name);
                if refused.len() >= 3 {
                    break;
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        acked.len() > 20 && !refused.is_empty(),
        "{} acked",
        acked.len()
    );
    // Failed: not ready, and every further write refused at once.
    assert_eq!(readyz(&api).await, 503);
    let t = Instant::now();
    let again = cms.create(&pp, &cm("small", 1)).await;
    assert!(
        matches!(again, Err(kube::Error::Api(ref s)) if s.code == 507),
        "{again:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    // What was acknowledged is served; what was refused never is.
    for name in &acked {
        assert!(cms.get_opt(name).await.unwrap().is_some(), "{name}");
    }
    for name in &refused {
        assert!(
            cms.get_opt(name).await.unwrap().is_none(),
            "{name} was never acknowledged"
        );
    }

    // More room: the store takes writes again by itself.
    fs.resize("200m");
    assert!(writes_resume(&cms).await, "writes never resumed");
    assert_eq!(readyz(&api).await, 200);

    // A restart serves exactly the acknowledged objects.
    api.stop().await;
    let mut api = start(&data).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    for name in acked.iter().chain(std::iter::once(&"after".to_string())) {
        assert!(
            cms.get_opt(name).await.unwrap().is_some(),
            "{name} after a restart"
        );
    }
    for name in &refused {
        assert!(
            cms.get_opt(name).await.unwrap().is_none(),
            "{name} after a restart"
        );
    }
    api.stop().await;
}

/// Fills the rest of the file system at `dir` with one file; returns it.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}

/// The disk filled by something else (not by koord's own writes): a write is answered
/// with a 507 Status at once, not a dropped connection, and once the space is given back
/// writes succeed again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_by_another_file_answers_507_and_recovers() {
    let Some(fs) = small_disk() else {
        return;
    };
    let data: PathBuf = fs.path().join("data");
    let mut api = start(&data).await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let pp = PostParams::default();
    cms.create(&pp, &cm("before", 1)).await.unwrap();
    let filler = fill(fs.path());
    let mut codes = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            cms.create(&pp, &cm(&format!("full-{i}"), 50)),
        )
        .await
        .expect("every write is answered, none hangs");
        match r {
            Ok(_) => codes.push(201),
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 507, "{s:?}");
                assert!(t.elapsed() < Duration::from_secs(25));
                codes.push(507);
            }
            Err(e) => panic!("write {i}: not an HTTP Status but {e}"),
        }
    }
    assert!(codes.contains(&507), "{codes:?}");
    std::fs::remove_file(&filler).unwrap();
    assert!(
        writes_resume(&cms).await,
        "writes never resumed once the space was back"
    );
    assert_eq!(readyz(&api).await, 200);
    api.stop().await;
}
