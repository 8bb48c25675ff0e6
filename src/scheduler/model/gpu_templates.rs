//! GPU shared-resource templates (`gpu_shared_resource_templates_cache.go`): some GPU
//! models (Huawei Ascend) can only be shared in fixed slices. The ConfigMap
//! `gpu-shared-resource-templates` (`data.yaml`: `<vendor>-<model>` → template name →
//! resources per device) lists them; DeviceShare places a shared pod asking for a matched
//! resource only on a node whose GPU model has a template equal to its per-device request,
//! and names the template in the allocation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::devices::DevRes;
use crate::api::quantity::q_value;

/// Template name → resources per device.
pub type Templates = BTreeMap<String, DevRes>;

/// `<vendor>-<model>` → that model's templates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuTemplates(pub BTreeMap<String, Templates>);

/// Koordinator's `buildGPUSharedResourceTemplatesKey`.
pub fn key(vendor: &str, model: &str) -> String {
    format!("{vendor}-{model}")
}

impl GpuTemplates {
    /// The ConfigMap's `data.yaml`; what does not parse is named in the error.
    pub fn from_config_map(cm: &ConfigMap) -> Result<GpuTemplates, String> {
        let raw = cm
            .data
            .as_ref()
            .and_then(|d| d.get("data.yaml"))
            .map(String::as_str)
            .unwrap_or_default();
        let parsed: BTreeMap<String, BTreeMap<String, BTreeMap<String, Quantity>>> =
            serde_yaml::from_str(raw).map_err(|e| format!("data.yaml: {e}"))?;
        let models = parsed
            .into_iter()
            .map(|(model, templates)| {
                let templates = templates
                    .into_iter()
                    .map(|(name, list)| {
                        let res = list.iter().map(|(k, q)| (k.clone(), q_value(q))).collect();
                        (name, res)
                    })
                    .collect();
                (model, templates)
            })
            .collect();
        Ok(GpuTemplates(models))
    }

    /// `findMatchedTemplates(resources, strict=true)`: per model, the templates whose
    /// resources equal `per_device` exactly.
    pub fn matching(&self, per_device: &DevRes) -> BTreeMap<String, Vec<String>> {
        self.0
            .iter()
            .filter_map(|(model, templates)| {
                let names: Vec<String> = templates
                    .iter()
                    .filter(|(_, t)| same(t, per_device))
                    .map(|(n, _)| n.clone())
                    .collect();
                (!names.is_empty()).then(|| (model.clone(), names))
            })
            .collect()
    }
}

/// `quotav1.Equals`: the same resources with the same amounts (zeros count as absent).
fn same(a: &DevRes, b: &DevRes) -> bool {
    let nz = |m: &DevRes| -> DevRes {
        m.iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    nz(a) == nz(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(yaml: &str) -> ConfigMap {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "gpu-shared-resource-templates"},
            "data": {"data.yaml": yaml}}),
        )
        .unwrap()
    }

    /// Koordinator's gpu_shared_resource_templates_cache_test: strict matching finds the
    /// template equal to the request per model, nothing for a partial request.
    #[test]
    fn templates_match_the_request_per_device_exactly() {
        let t = GpuTemplates::from_config_map(&cm("huawei-Ascend-310P:\n  vir01:\n    huawei.com/npu-core: \"1\"\n    huawei.com/npu-cpu: \"1\"\n    koordinator.sh/gpu-memory: 3Gi\n  vir02:\n    huawei.com/npu-core: \"2\"\n    huawei.com/npu-cpu: \"2\"\n    koordinator.sh/gpu-memory: 6Gi\nhuawei-Ascend-910:\n  vir02:\n    huawei.com/npu-core: \"2\"\n    huawei.com/npu-cpu: \"1\"\n    koordinator.sh/gpu-memory: 2Gi\n")).unwrap();
        let req = |core: i64, cpu: i64, gib: i64| -> DevRes {
            [
                ("huawei.com/npu-core", core),
                ("huawei.com/npu-cpu", cpu),
                ("koordinator.sh/gpu-memory", gib << 30),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        };
        let m = t.matching(&req(2, 2, 6));
        assert_eq!(m.len(), 1);
        assert_eq!(m["huawei-Ascend-310P"], ["vir02"]);
        assert_eq!(t.matching(&req(2, 1, 2))["huawei-Ascend-910"], ["vir02"]);
        let mut partial = req(2, 2, 6);
        partial.remove("huawei.com/npu-cpu");
        assert!(
            t.matching(&partial).is_empty(),
            "strict: a partial request matches none"
        );
        assert!(
            GpuTemplates::from_config_map(&cm("not: [yaml"))
                .unwrap_err()
                .contains("data.yaml")
        );
        assert_eq!(
            GpuTemplates::from_config_map(&cm("")).unwrap(),
            GpuTemplates::default()
        );
    }
}
