//! The official JavaScript and Python Kubernetes clients against `koord --role=all
//! --embedded` with simulated nodes: each creates a Deployment and watches its pods until
//! they run, as a newcomer would try it (`tests/clients/js_deployment.mjs`,
//! `tests/clients/python_deployment.py`). The clients are installed by the tests themselves
//! (npm, a venv from PyPI) under the target dir; without node/npm or the network they skip
//! with the reason.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `@kubernetes/client-node`, the official JavaScript client, pinned.
const JS_CLIENT: &str = "@kubernetes/client-node@1.4.0";

/// Its `node_modules`, installed once per target dir; `Err` says why not.
fn js_client() -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jsclient");
    let stamp = dir.join(".installed");
    let modules = dir.join("node_modules");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(JS_CLIENT) {
        return Ok(modules);
    }
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(JS_CLIENT)
        .output()
        .map_err(|e| format!("npm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "npm install: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::write(&stamp, JS_CLIENT).map_err(|e| e.to_string())?;
    Ok(modules)
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

fn run_client(cmd: &mut Command, koord: &common::Koord) {
    let out = cmd.output().expect("run the client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("all checks passed"),
        "{text}\n--- koord\n{}",
        koord.logs()
    );
    assert!(
        text.contains("ok: 2 pods of the Deployment Running"),
        "{text}"
    );
    eprintln!("{text}");
}

#[test]
fn the_javascript_client_sees_its_deployments_pods_running() {
    let _cpu = common::cpu_exclusive();
    let modules = match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => js_client(),
        _ => Err("no node on PATH".into()),
    };
    let modules = match modules {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot set up the JavaScript client ({why})");
            return;
        }
    };
    let Some((_dir, koord, k)) = crate::workloads::up() else {
        return;
    };
    run_client(
        Command::new("node")
            .arg(script("js_deployment.mjs"))
            .arg(&k.kubeconfig)
            .env("NODE_PATH", &modules),
        &koord,
    );
    drop(koord);
}

#[test]
fn the_python_client_sees_its_deployments_pods_running() {
    let _cpu = common::cpu_exclusive();
    let python = match crate::second_client::venv() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: cannot set up the Python client ({why})");
            return;
        }
    };
    let Some((_dir, koord, k)) = crate::workloads::up() else {
        return;
    };
    run_client(
        Command::new(python)
            .arg(script("python_deployment.py"))
            .arg(&k.kubeconfig),
        &koord,
    );
    drop(koord);
}
