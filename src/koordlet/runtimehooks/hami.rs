//! HAMi-core isolation in the GPU hook (Koordinator's `hooks/gpu`): a container of a pod
//! labelled `koordinator.sh/gpu-isolation-provider: HAMi-core` that got part of a GPU
//! (`gpu-memory-ratio` < 100 in its `device-allocated`) runs with HAMi-core's library
//! preloaded and its limits in the environment — `CUDA_DEVICE_MEMORY_LIMIT` (bytes),
//! `CUDA_DEVICE_SM_LIMIT` (percent), `LD_PRELOAD` — with the library and `/tmp/vgpulock`
//! bind-mounted. With gate `HamiCoreVGPUMonitor` the library also writes its usage cache to
//! `<library dir>/<pod uid>_<container>.cache`, kept on the host in
//! `<library dir>/containers/<pod uid>_<container>` for HAMi's monitor. Mounts apply where
//! the runtime takes them (NRI); the runtime proxy's protocol carries only the environment,
//! as Koordinator's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::api::extension::keys::ANNOTATION_DEVICE_ALLOCATED;

/// `extension.LabelGPUIsolationProvider`.
pub const LABEL_GPU_ISOLATION_PROVIDER: &str = "koordinator.sh/gpu-isolation-provider";
const HAMI_CORE: &str = "HAMi-core";
const VGPU_LOCK: &str = "/tmp/vgpulock";

/// `koordlet.runtimeHooks.hamiCoreLibraryPath` and the monitor gate.
#[derive(Debug, Clone, PartialEq)]
pub struct HamiCore {
    pub library: PathBuf,
    pub monitor: bool,
}

/// A bind mount for the container.
#[derive(Debug, Clone, PartialEq)]
pub struct BindMount {
    pub source: String,
    pub destination: String,
}

/// What a container gets: envs, mounts, and the host directory the monitor's cache needs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Isolation {
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<BindMount>,
    pub cache_dir: Option<PathBuf>,
}

fn bind(path: &str) -> BindMount {
    BindMount {
        source: path.into(),
        destination: path.into(),
    }
}

/// The first allocated GPU's resource `name` as an integer quantity.
fn gpu_resource(first: &serde_json::Value, name: &str) -> Option<Result<i64, String>> {
    let raw = first.get("resources")?.get(name)?;
    let s = match raw {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(crate::api::quantity::value(&s).map_err(|e| format!("{name}: {e}")))
}

/// HAMi-core's settings for one container; none unless the pod asks for HAMi-core and got
/// part of a GPU.
pub fn isolation(
    h: &HamiCore,
    labels: &HashMap<String, String>,
    annotations: &HashMap<String, String>,
    pod_uid: &str,
    container: &str,
) -> Result<Isolation, String> {
    if labels.get(LABEL_GPU_ISOLATION_PROVIDER).map(String::as_str) != Some(HAMI_CORE) {
        return Ok(Isolation::default());
    }
    let Some(raw) = annotations.get(ANNOTATION_DEVICE_ALLOCATED) else {
        return Ok(Isolation::default());
    };
    let v: serde_json::Value = serde_json::from_str(raw)
        .map_err(|e| format!("annotation {ANNOTATION_DEVICE_ALLOCATED}: {e}"))?;
    let Some(first) = v.get("gpu").and_then(|g| g.get(0)) else {
        return Ok(Isolation::default());
    };
    let ratio = gpu_resource(first, "koordinator.sh/gpu-memory-ratio")
        .ok_or("gpu memory ratio not found in gpu resource")??;
    if ratio >= 100 {
        return Ok(Isolation::default());
    }
    let memory = gpu_resource(first, "koordinator.sh/gpu-memory")
        .ok_or("gpu memory not found in gpu resource")??;
    let library = h.library.to_string_lossy().into_owned();
    let mut out = Isolation::default();
    out.envs
        .push(("CUDA_DEVICE_MEMORY_LIMIT".into(), memory.to_string()));
    if let Some(core) = gpu_resource(first, "koordinator.sh/gpu-core") {
        out.envs
            .push(("CUDA_DEVICE_SM_LIMIT".into(), core?.to_string()));
    }
    out.envs.push(("LD_PRELOAD".into(), library.clone()));
    out.mounts.push(bind(&library));
    out.mounts.push(bind(VGPU_LOCK));
    if h.monitor {
        let dir = h.library.parent().unwrap_or(Path::new("/"));
        let cache = dir.join(format!("{pod_uid}_{container}.cache"));
        out.envs.push((
            "CUDA_DEVICE_MEMORY_SHARED_CACHE".into(),
            cache.to_string_lossy().into_owned(),
        ));
        let host_dir = dir
            .join("containers")
            .join(format!("{pod_uid}_{container}"));
        out.mounts.push(BindMount {
            source: host_dir.to_string_lossy().into_owned(),
            destination: dir.to_string_lossy().into_owned(),
        });
        out.cache_dir = Some(host_dir);
    }
    Ok(out)
}

/// A fresh cache directory for the container. World-writable as Koordinator makes it: the
/// library writes it from inside the container as whatever user the container runs.
pub fn prepare_cache_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(monitor: bool) -> HamiCore {
        HamiCore {
            library: "/usr/local/vgpu/libvgpu.so".into(),
            monitor,
        }
    }

    fn pod(ratio: &str) -> (HashMap<String, String>, HashMap<String, String>) {
        let labels = [(
            LABEL_GPU_ISOLATION_PROVIDER.to_string(),
            HAMI_CORE.to_string(),
        )]
        .into();
        let alloc = format!(
            r#"{{"gpu":[{{"minor":1,"resources":{{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi","koordinator.sh/gpu-memory-ratio":"{ratio}"}}}}]}}"#
        );
        (
            labels,
            [(ANNOTATION_DEVICE_ALLOCATED.to_string(), alloc)].into(),
        )
    }

    #[test]
    fn a_shared_gpu_gets_hami_cores_limits_and_mounts() {
        let (labels, annotations) = pod("50");
        let i = isolation(&h(false), &labels, &annotations, "u1", "main").unwrap();
        assert_eq!(
            i.envs,
            vec![
                (
                    "CUDA_DEVICE_MEMORY_LIMIT".to_string(),
                    (8i64 << 30).to_string()
                ),
                ("CUDA_DEVICE_SM_LIMIT".to_string(), "50".to_string()),
                (
                    "LD_PRELOAD".to_string(),
                    "/usr/local/vgpu/libvgpu.so".to_string()
                ),
            ]
        );
        assert_eq!(
            i.mounts,
            vec![bind("/usr/local/vgpu/libvgpu.so"), bind("/tmp/vgpulock")]
        );
        assert!(i.cache_dir.is_none());
    }

    #[test]
    fn the_monitor_adds_the_shared_cache() {
        let (labels, annotations) = pod("50");
        let i = isolation(&h(true), &labels, &annotations, "u1", "main").unwrap();
        assert!(i.envs.contains(&(
            "CUDA_DEVICE_MEMORY_SHARED_CACHE".into(),
            "/usr/local/vgpu/u1_main.cache".into()
        )));
        let host = PathBuf::from("/usr/local/vgpu/containers/u1_main");
        assert_eq!(i.cache_dir.as_ref(), Some(&host));
        assert_eq!(i.mounts[2].destination, "/usr/local/vgpu");
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("containers/u1_main");
        prepare_cache_dir(&cache).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o777
        );
    }

    #[test]
    fn whole_gpus_other_providers_and_bad_allocations() {
        let (labels, annotations) = pod("100");
        assert_eq!(
            isolation(&h(true), &labels, &annotations, "u", "c"),
            Ok(Isolation::default())
        );
        let (_, annotations) = pod("50");
        let none = HashMap::new();
        assert_eq!(
            isolation(&h(true), &none, &annotations, "u", "c"),
            Ok(Isolation::default())
        );
        let (labels, _) = pod("50");
        let no_ratio = [(
            ANNOTATION_DEVICE_ALLOCATED.to_string(),
            r#"{"gpu":[{"minor":0,"resources":{}}]}"#.to_string(),
        )]
        .into();
        assert_eq!(
            isolation(&h(false), &labels, &no_ratio, "u", "c"),
            Err("gpu memory ratio not found in gpu resource".to_string())
        );
    }

    /// Through the hook server's answer, beside GPUEnvInject's own env.
    #[test]
    fn the_hook_answer_carries_hami_cores_env() {
        use crate::kernel::hookproto::{
            ContainerMetadata, ContainerResourceHookRequest, PodSandboxMetadata,
        };
        use crate::koordlet::informer::{Informer, States};
        use crate::koordlet::runtimehooks::rules::Rules;
        let cgroups = crate::os::Cgroups::new(
            "/nonexistent",
            crate::os::Version::V1,
            crate::os::Driver::Cgroupfs,
            "",
        );
        let rules = Rules {
            gpu_env_inject: true,
            ..Rules::OFF
        };
        let mut hooks = super::super::server::Hooks::new(
            Informer::fixed(States::default()),
            rules,
            cgroups,
            Vec::new(),
        );
        hooks.hami = Some(h(false));
        let (labels, annotations) = pod("25");
        let req = ContainerResourceHookRequest {
            pod_meta: Some(PodSandboxMetadata {
                uid: "u1".into(),
                ..Default::default()
            }),
            container_meta: Some(ContainerMetadata {
                name: "main".into(),
                ..Default::default()
            }),
            pod_labels: labels,
            pod_annotations: annotations,
            ..Default::default()
        };
        let resp = hooks
            .container_response(&req, "PreCreateContainer")
            .unwrap();
        let env = &resp.container_envs;
        assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], "1");
        assert_eq!(env["CUDA_DEVICE_MEMORY_LIMIT"], (8i64 << 30).to_string());
        assert_eq!(env["LD_PRELOAD"], "/usr/local/vgpu/libvgpu.so");
    }
}
