//! `/validate-pod`'s device resource rules (`verify_device_resource.go`, gate
//! `ValidatePodDeviceResource`): a container asks for whole GPUs (`koordinator.sh/gpu`, a
//! percentage: ≤ 100 or a multiple of 100) or for shared GPUs (`koordinator.sh/gpu.shared`
//! with either GPU memory or a memory ratio, and core and ratio multiples of the share),
//! never both.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::api::extension::resources as res;
use crate::api::quantity::q_value;

const PATH: &str = "pod.spec.containers[*].resources.requests";

/// Koordinator's errors for the pod, worded as its `field.ErrorList`.
pub fn validate(pod: &Pod) -> Vec<String> {
    let containers = pod.spec.as_ref().map_or(&[][..], |s| &s.containers);
    let mut errs = Vec::new();
    for c in containers {
        let has = |name: &str| requests(c).is_some_and(|r| r.contains_key(name));
        match (has(res::KOORD_GPU), has(res::GPU_SHARED)) {
            (true, true) => errs.push(forbidden(
                "Forbidden declare GPU and GPU share at same time",
            )),
            (true, false) => errs.extend(gpu(c)),
            (false, true) => errs.extend(gpu_share(c)),
            (false, false) => {}
        }
    }
    errs
}

fn requests(
    c: &Container,
) -> Option<
    &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
> {
    c.resources.as_ref()?.requests.as_ref()
}

/// `Value()` of a request, 0 when absent.
fn value(c: &Container, name: &str) -> i64 {
    requests(c).and_then(|r| r.get(name)).map_or(0, q_value)
}

fn forbidden(detail: &str) -> String {
    format!("{PATH}: Forbidden: {detail}")
}

fn invalid(v: i64, detail: &str) -> String {
    format!("{PATH}: Invalid value: \"{v}\": {detail}")
}

fn gpu(c: &Container) -> Vec<String> {
    let v = value(c, res::KOORD_GPU);
    let mut errs = Vec::new();
    if v == 0 {
        errs.push(invalid(v, "the requested GPU must be greater than zero"));
    }
    if v > 100 && v % 100 != 0 {
        errs.push(invalid(v, "the requested GPU must be percentage of 100"));
    }
    errs
}

fn gpu_share(c: &Container) -> Vec<String> {
    let share = value(c, res::GPU_SHARED);
    let mut errs = Vec::new();
    if share == 0 {
        errs.push(invalid(
            share,
            "the requested GPU must be greater than zero",
        ));
    }
    // Huawei NPUs shared by core carry no GPU memory.
    if value(c, res::NPU_CORE) != 0 {
        return errs;
    }
    let (memory, ratio) = (value(c, res::GPU_MEMORY), value(c, res::GPU_MEMORY_RATIO));
    let core = value(c, res::GPU_CORE);
    if memory == 0 && ratio == 0 {
        errs.push(forbidden("GPU memory and GPU memory ratio all is zero"));
    }
    if memory != 0 && ratio != 0 {
        errs.push(forbidden(
            "declare GPU memory and GPU memory ratio at same time",
        ));
    }
    if share != 0 {
        if core % share != 0 {
            errs.push(invalid(
                core,
                "the requested gpuCore must multiple of shared",
            ));
        }
        if ratio % share != 0 {
            errs.push(invalid(
                ratio,
                "the requested gpuMemoryRatio must multiple of shared",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(requests: &[(&str, i64)]) -> Pod {
        let r: serde_json::Map<String, serde_json::Value> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v.to_string())))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": r, "requests": r}}]}
        }))
        .unwrap()
    }

    /// Koordinator's `TestDeviceResourceValidatingPod` (verify_device_resource_test.go),
    /// with its names and reasons; the gate-off case is `handle`'s (see pod_validate_tests).
    #[test]
    fn koordinators_device_resource_cases() {
        type Case<'a> = (&'a str, &'a [(&'a str, i64)], &'a str);
        let cases: &[Case] = &[
            (
                "validate gpu resource is percentage",
                &[(res::KOORD_GPU, 200)],
                "",
            ),
            (
                "validate gpu resource is not percentage",
                &[(res::KOORD_GPU, 70)],
                "",
            ),
            (
                "validate declain gpu memory and memoryRatio at same time",
                &[
                    (res::GPU_MEMORY, 4000),
                    (res::GPU_MEMORY_RATIO, 100),
                    (res::GPU_SHARED, 1),
                ],
                "pod.spec.containers[*].resources.requests: Forbidden: declare GPU memory and GPU memory ratio at same time",
            ),
            (
                "validate declain none gpu memory and memoryRatio",
                &[(res::GPU_SHARED, 2)],
                "pod.spec.containers[*].resources.requests: Forbidden: GPU memory and GPU memory ratio all is zero",
            ),
            (
                "validate gpu gpuCore greater than 100 multiple of shared",
                &[
                    (res::GPU_CORE, 101),
                    (res::GPU_MEMORY_RATIO, 100),
                    (res::GPU_SHARED, 2),
                ],
                "pod.spec.containers[*].resources.requests: Invalid value: \"101\": the requested gpuCore must multiple of shared",
            ),
            (
                "validate gpu memoryRatio greater than 100 multiple of shared",
                &[(res::GPU_MEMORY_RATIO, 101), (res::GPU_SHARED, 2)],
                "pod.spec.containers[*].resources.requests: Invalid value: \"101\": the requested gpuMemoryRatio must multiple of shared",
            ),
            (
                "validate shared huawei npu",
                &[(res::NPU_CORE, 8), (res::GPU_SHARED, 1)],
                "",
            ),
        ];
        for (name, requests, want) in cases {
            assert_eq!(validate(&pod(requests)).join(", "), *want, "{name}");
        }
    }

    #[test]
    fn whole_and_shared_gpus_together_and_zero_gpus() {
        let both = pod(&[(res::KOORD_GPU, 100), (res::GPU_SHARED, 1)]);
        assert_eq!(
            validate(&both),
            vec![
                "pod.spec.containers[*].resources.requests: Forbidden: Forbidden declare GPU and GPU share at same time"
            ]
        );
        let zero = pod(&[(res::KOORD_GPU, 0)]);
        assert_eq!(
            validate(&zero),
            vec![
                "pod.spec.containers[*].resources.requests: Invalid value: \"0\": the requested GPU must be greater than zero"
            ]
        );
        assert!(validate(&pod(&[(res::KOORD_GPU, 150)]))[0].contains("percentage of 100"));
    }
}
