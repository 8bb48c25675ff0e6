//! The NVML stand-in (`tests/nvml/fake_nvml.c`), compiled with the machine's C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the stand-in reporting `gpus` GPUs into `dir`; `None` (test skipped) without `cc`.
pub fn fake_nvml(dir: &Path, gpus: u32) -> Option<PathBuf> {
    fake_nvml_with(dir, gpus, &[])
}

/// [`fake_nvml`] with more `-D` definitions (`FAKE_NVML_XID_FILE="…"`, `FAKE_NVML_NO_EVENTS`).
pub fn fake_nvml_with(dir: &Path, gpus: u32, defines: &[String]) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml/fake_nvml.c");
    let out = dir.join("libnvidia-ml.so.1");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1"])
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(format!("-DFAKE_NVML_DEFAULT_GPUS={gpus}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        other => {
            eprintln!("skipping: cannot build the NVML stand-in: {other:?}");
            None
        }
    }
}
