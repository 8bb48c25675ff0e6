//! Extended resource names and their translation by priority class.

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Batch CPU, an integer number of milli-cores (`8` cores are written `8000`).
pub const BATCH_CPU: &str = "kubernetes.io/batch-cpu";
/// Batch memory in bytes.
pub const BATCH_MEMORY: &str = "kubernetes.io/batch-memory";
/// Mid CPU, an integer number of milli-cores.
pub const MID_CPU: &str = "kubernetes.io/mid-cpu";
/// Mid memory in bytes.
pub const MID_MEMORY: &str = "kubernetes.io/mid-memory";

pub const GPU_CORE: &str = "koordinator.sh/gpu-core";
pub const GPU_MEMORY: &str = "koordinator.sh/gpu-memory";
pub const GPU_MEMORY_RATIO: &str = "koordinator.sh/gpu-memory-ratio";
pub const GPU_SHARED: &str = "koordinator.sh/gpu.shared";
pub const KOORD_GPU: &str = "koordinator.sh/gpu";
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RDMA: &str = "koordinator.sh/rdma";
pub const FPGA: &str = "koordinator.sh/fpga";
pub const NPU_CORE: &str = "huawei.com/npu-core";
pub const NPU_CPU: &str = "huawei.com/npu-cpu";
pub const NPU_DVPP: &str = "huawei.com/npu-dvpp";

/// The GPU plugin's resources, in upstream's order (the noderesource GPU plugin).
pub const GPU_RESOURCES: [&str; 8] = [
    KOORD_GPU,
    GPU_CORE,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
];

/// Whether the resource is one of Koordinator's CPU-like resources (milli-core integers).
pub fn is_cpu_like(name: &str) -> bool {
    matches!(name, CPU | BATCH_CPU | MID_CPU)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_like_resources() {
        assert!(is_cpu_like(BATCH_CPU) && !is_cpu_like(BATCH_MEMORY));
    }
}
