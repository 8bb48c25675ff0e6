//! A second client stack besides kube-rs and kubectl: the official Kubernetes Python client
//! and Google's protobuf runtime, installed from PyPI into a venv under the target dir by
//! this test's own setup, against the embedded API server over TLS with its token
//! (`tests/clients/python_client.py`: JSON, watch, patch, protobuf bodies, lists and watch
//! frames).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::TestApi;

const PACKAGES: &[&str] = &["kubernetes==37.0.2", "protobuf==7.36.2"];

/// The venv with the pinned packages, made once per target dir; `Err` says why not.
pub(crate) fn venv() -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pyclient-venv");
    let python = dir.join("bin/python");
    let stamp = dir.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(&PACKAGES.join(" ")) {
        return Ok(python);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&dir),
        "python3 -m venv",
    )?;
    run(
        Command::new(dir.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .args(PACKAGES),
        "pip install",
    )?;
    std::fs::write(&stamp, PACKAGES.join(" ")).map_err(|e| e.to_string())?;
    Ok(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_speaks_json_watch_patch_and_protobuf() {
    let python = match tokio::task::spawn_blocking(venv).await.unwrap() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: cannot set up the Python client ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.tls = true;
    opts.data_dir = Some(dir.path().join("data"));
    let mut api = TestApi::start_with(opts).await;
    let kubeconfig = dir.path().join("kubeconfig");
    api.server().write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python_client.py");
    let descriptors = concat!(env!("OUT_DIR"), "/k8s.fds");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .arg(&kubeconfig)
        .arg(descriptors)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut r: Box<dyn tokio::io::AsyncRead + Unpin + Send>| async move {
        let mut s = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut r, &mut s)
            .await
            .ok();
        s
    };
    let (out, err) = (
        tokio::spawn(read(Box::new(stdout))),
        tokio::spawn(read(Box::new(stderr))),
    );
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("the Python client finishes within 2 minutes")
        .unwrap();
    let (out, err) = (out.await.unwrap(), err.await.unwrap());
    assert!(status.success(), "python client failed:\n{out}\n{err}");
    assert!(out.contains("all checks passed"), "{out}");
    assert!(out.contains("ok: protobuf watch frames"), "{out}");
    api.stop().await;
}
