//! Builds koord's RuntimeHookService bindings (`proto/runtime/v1alpha1/api.proto`, tonic
//! client and server), the kubelet's PodResources service (`proto/podresources/v1`, client
//! and server, for the koordlet's proxy), NRI's messages (`proto/nri/v1alpha1/api.proto`, prost only), and compiles Kubernetes' published `.proto` files (v1.33, as shipped in the `k8s-rs-pb`
//! crate's package) into one FileDescriptorSet, which the embedded API server uses to
//! transcode built-in objects between JSON (how it stores them) and protobuf (how kubectl
//! and client-go send them). `protoc` comes from `scripts/deps.sh` (or `$PROTOC`).

use std::path::{Path, PathBuf};
use std::process::Command;

const PROTO_CRATE: &str = "k8s-rs-pb-0.5.0";
const KUBE_VERSION: &str = "v1_33";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=proto/runtime/v1alpha1/api.proto");
    tonic_prost_build::configure()
        .compile_protos(&["proto/runtime/v1alpha1/api.proto"], &["proto"])
        .unwrap_or_else(|e| panic!("koord build: proto/runtime/v1alpha1/api.proto: {e}"));
    println!("cargo:rerun-if-changed=proto/podresources/v1/api.proto");
    tonic_prost_build::configure()
        .compile_protos(&["proto/podresources/v1/api.proto"], &["proto"])
        .unwrap_or_else(|e| panic!("koord build: proto/podresources/v1/api.proto: {e}"));
    println!("cargo:rerun-if-changed=proto/nri/v1alpha1/api.proto");
    // NRI speaks ttrpc, not gRPC: messages only, the transport is koord's own.
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .compile_protos(&["proto/nri/v1alpha1/api.proto"], &["proto"])
        .unwrap_or_else(|e| panic!("koord build: proto/nri/v1alpha1/api.proto: {e}"));
    kubernetes_descriptors();
    symbol_order();
}

/// Links the functions a node agent runs each minute side by side (`link/
/// node-agent.order`, written by `scripts/symbol-order.sh`). Otherwise the ~1.5 MiB of
/// code the koordlet's loops run lies in ~120 of the text's 128 KiB windows, and each
/// costs the process the whole window of mapped pages (the kernel maps a fault's cached
/// neighbours): 14–18 MiB of RSS for 1.5 MiB of code. Only with rust-lld, the linker Rust
/// uses on x86_64 Linux since 1.90 (GNU ld has no such option); names the file lacks, or
/// that changed, are simply placed as before. `KOORDLET_SYMBOL_ORDER=0` turns it off (not
/// a `KOORD_` name: koord reads those from its environment as configuration).
fn symbol_order() {
    println!("cargo:rerun-if-changed=link/node-agent.order");
    println!("cargo:rerun-if-env-changed=KOORDLET_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let lld = env("TARGET") == "x86_64-unknown-linux-gnu"
        && env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_empty()
        && !env("CARGO_ENCODED_RUSTFLAGS").contains("link")
        && rustc_minor().is_some_and(|m| m >= 90);
    let file = Path::new(&env("CARGO_MANIFEST_DIR")).join("link/node-agent.order");
    if env("KOORDLET_SYMBOL_ORDER") == "0" || !lld || !file.exists() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        file.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// The minor version of the compiler building us (`1.95.0` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}

fn kubernetes_descriptors() {
    println!("cargo:rerun-if-env-changed=KOORD_K8S_PROTO_DIR");
    println!("cargo:rerun-if-env-changed=PROTOC");
    let dir = proto_dir().unwrap_or_else(|| {
        panic!(
            "koord build: Kubernetes .proto files not found: expected the {PROTO_CRATE} package \
             (a build-dependency) under $CARGO_HOME/registry/src, or set KOORD_K8S_PROTO_DIR to \
             a folder holding api/, apimachinery/ … as in that package's src/{KUBE_VERSION}"
        )
    });
    let mut files = Vec::new();
    collect(&dir, &dir, &mut files);
    files.retain(|f| !f.contains("testapigroup"));
    files.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("k8s.fds");
    let protoc = std::env::var("PROTOC").unwrap_or_else(|_| "protoc".into());
    let result = Command::new(&protoc)
        .arg("-I")
        .arg(&dir)
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.display()))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("koord build: running {protoc} (run scripts/deps.sh): {e}"));
    if !result.status.success() {
        panic!(
            "koord build: {protoc} failed on {}: {}",
            dir.display(),
            String::from_utf8_lossy(&result.stderr)
        );
    }
}

fn proto_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("KOORD_K8S_PROTO_DIR") {
        return Some(PathBuf::from(d));
    }
    let home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok()?;
    let registries = std::fs::read_dir(home.join("registry/src")).ok()?;
    registries
        .flatten()
        .map(|r| r.path().join(PROTO_CRATE).join("src").join(KUBE_VERSION))
        .find(|p| p.join("api/core/v1/generated.proto").is_file())
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "proto")
            && let Ok(rel) = p.strip_prefix(root)
        {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}
