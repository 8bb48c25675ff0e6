//! The NodeResource controller's CPUNormalization and ResourceAmplification plugins
//! (`pkg/slo-controller/noderesource/plugins/{cpunormalization,resourceamplification}`):
//! the node's `cpu-normalization-ratio` annotation from its CPU model, Hyper-Threading and
//! Turbo (the NodeResourceTopology's `cpu-basic-info`), and its
//! `resource-amplification-ratio` from the config, the cpu ratio times the normalization.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;

use crate::api::extension::keys::{
    ANNOTATION_NODE_AMPLIFICATION_RATIO, ANNOTATION_NODE_CPU_BASIC_INFO,
    ANNOTATION_NODE_CPU_NORMALIZATION_RATIO, LABEL_NODE_CPU_NORMALIZATION_ENABLED,
};
use crate::api::sloconfig::SloConfig;
use crate::api::sloconfig::normalization::CPUNormalizationStrategy;
use crate::api::topology::NodeResourceTopology;

/// Koordinator's bounds and tolerance.
const MIN_RATIO: f64 = 1.0;
const MAX_RATIO: f64 = 5.0;
const EPSILON: f64 = 0.01;

/// The koordlet's `node.koordinator.sh/cpu-basic-info`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CPUBasicInfo {
    #[serde(default, rename = "cpuModel")]
    pub cpu_model: String,
    #[serde(default)]
    pub hyper_thread_enabled: bool,
    #[serde(default)]
    pub turbo_enabled: bool,
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The node's current ratio: None when unset, Err when unreadable.
fn current_ratio(node: &Node) -> Result<Option<f64>, String> {
    let Some(s) = annotation(node, ANNOTATION_NODE_CPU_NORMALIZATION_RATIO) else {
        return Ok(None);
    };
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 => Ok(Some(v)),
        _ => Err(format!("illegal cpu normalization ratio {s:?}")),
    }
}

/// `Calculate`: the ratio annotation to write ("1.00" when disabled), or why none.
pub fn normalization_ratio(
    node: &Node,
    nrt: Option<&NodeResourceTopology>,
    cfg: &SloConfig,
) -> Result<String, String> {
    let strategy = cfg.cpu_normalization.for_node(node);
    let label = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODE_CPU_NORMALIZATION_ENABLED));
    let enabled = match label {
        Some(v) => v
            .parse::<bool>()
            .map_err(|_| format!("label {LABEL_NODE_CPU_NORMALIZATION_ENABLED}={v:?}"))?,
        None => strategy.enable.unwrap_or(false),
    };
    if !enabled {
        return Ok("1.00".into());
    }
    let nrt = nrt.ok_or("no NodeResourceTopology")?;
    let raw = nrt
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_CPU_BASIC_INFO))
        .ok_or("the NodeResourceTopology has no cpu-basic-info")?;
    let info: CPUBasicInfo =
        serde_json::from_str(raw).map_err(|e| format!("cpu-basic-info: {e}"))?;
    let ratio = from_model(&info, strategy).or_else(|e| strategy.default_ratio.ok_or(e))?;
    if !(MIN_RATIO..=MAX_RATIO).contains(&ratio) {
        return Err(format!(
            "ratio {ratio} is outside [{MIN_RATIO}, {MAX_RATIO}]"
        ));
    }
    Ok(format!("{ratio:.2}"))
}

fn from_model(info: &CPUBasicInfo, s: &CPUNormalizationStrategy) -> Result<f64, String> {
    let model = s
        .ratio_model
        .as_ref()
        .and_then(|m| m.get(&info.cpu_model))
        .ok_or_else(|| format!("no ratio for CPU {}", info.cpu_model))?;
    let (ratio, what): (Option<f64>, &str) = match (info.hyper_thread_enabled, info.turbo_enabled) {
        (true, true) => (
            model.hyper_thread_turbo_enabled_ratio,
            "HyperThreadTurboEnabledRatio",
        ),
        (true, false) => (model.hyper_thread_enabled_ratio, "HyperThreadEnabledRatio"),
        (false, true) => (model.turbo_enabled_ratio, "TurboEnabledRatio"),
        (false, false) => (model.base_ratio, "BaseRatio"),
    };
    ratio.ok_or_else(|| format!("missing {what} for CPU {}", info.cpu_model))
}

/// `Calculate` of ResourceAmplification: the ratios (cpu times the node's current
/// normalization ratio), None when the node needs none or they are invalid.
pub fn amplification(node: &Node, cfg: &SloConfig) -> Option<String> {
    let s = cfg.amplification.for_node(node);
    let mut ratios: BTreeMap<String, f64> = match s.enable {
        Some(true) => s.resource_amplification_ratio.clone().unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    let normalization = match current_ratio(node) {
        Ok(r) => r.unwrap_or(1.0),
        Err(_) => return None,
    };
    let cpu = ratios
        .get("cpu")
        .copied()
        .filter(|r| *r > 0.0)
        .unwrap_or(1.0)
        * normalization;
    if cpu > 1.0 {
        ratios.insert("cpu".into(), cpu);
    }
    if ratios.is_empty() || ratios.values().any(|v| *v < 1.0) {
        return None;
    }
    let body: Vec<String> = ratios
        .iter()
        .map(|(k, v)| format!("{}:{}", serde_json::json!(k), go_float(*v)))
        .collect();
    Some(format!("{{{}}}", body.join(",")))
}

/// Go's `encoding/json` float: the shortest representation, integers without ".0".
fn go_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e21 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The annotation changes for the node's metadata patch: a value to set, or None to
/// remove (`NeedSyncMeta` with Koordinator's tolerance for the normalization ratio).
pub fn meta_changes(
    node: &Node,
    nrt: Option<&NodeResourceTopology>,
    cfg: &SloConfig,
) -> BTreeMap<&'static str, Option<String>> {
    let mut out = BTreeMap::new();
    match normalization_ratio(node, nrt, cfg) {
        Ok(want) => {
            let same = match (current_ratio(node), want.parse::<f64>()) {
                (Ok(Some(old)), Ok(new)) => (old - new).abs() <= EPSILON,
                _ => false,
            };
            if !same {
                out.insert(ANNOTATION_NODE_CPU_NORMALIZATION_RATIO, Some(want));
            }
        }
        Err(e) => {
            tracing::debug!(node = ?node.metadata.name, reason = %e, "cpu normalization ratio left as is")
        }
    }
    let want = amplification(node, cfg);
    if annotation(node, ANNOTATION_NODE_AMPLIFICATION_RATIO) != want.as_deref() {
        out.insert(ANNOTATION_NODE_AMPLIFICATION_RATIO, want);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, annotations: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "labels": labels,
            "annotations": annotations}}))
        .unwrap()
    }

    fn nrt(info: serde_json::Value) -> NodeResourceTopology {
        serde_json::from_value(json!({"apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": "n1", "annotations": {ANNOTATION_NODE_CPU_BASIC_INFO: info.to_string()}},
            "topologyPolicies": ["None"], "zones": []}))
        .unwrap()
    }

    fn cfg(normalization: serde_json::Value, amplification: serde_json::Value) -> SloConfig {
        let data = std::collections::BTreeMap::from([
            (
                "cpu-normalization-config".to_string(),
                normalization.to_string(),
            ),
            (
                "resource-amplification-config".to_string(),
                amplification.to_string(),
            ),
        ]);
        let (c, errors) = SloConfig::parse(Some(&data), &SloConfig::default());
        assert!(errors.is_empty(), "{errors:?}");
        c
    }

    const MODEL: &str = "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.90GHz";

    fn models() -> serde_json::Value {
        json!({MODEL: {"baseRatio": 1.5, "hyperThreadEnabledRatio": 1.0,
            "turboEnabledRatio": 1.8, "hyperThreadTurboEnabledRatio": 1.2}})
    }

    #[test]
    fn disabled_nodes_get_one() {
        let c = cfg(json!({}), json!({}));
        let n = node(json!({}), json!({}));
        assert_eq!(normalization_ratio(&n, None, &c).unwrap(), "1.00");
        let changes = meta_changes(&n, None, &c);
        assert_eq!(
            changes.get(ANNOTATION_NODE_CPU_NORMALIZATION_RATIO),
            Some(&Some("1.00".into()))
        );
        assert!(!changes.contains_key(ANNOTATION_NODE_AMPLIFICATION_RATIO));
        let already = node(
            json!({}),
            json!({ANNOTATION_NODE_CPU_NORMALIZATION_RATIO: "1.005"}),
        );
        let changes = meta_changes(&already, None, &c);
        assert!(
            !changes.contains_key(ANNOTATION_NODE_CPU_NORMALIZATION_RATIO),
            "within 0.01"
        );
    }

    #[test]
    fn the_ratio_follows_the_model_ht_and_turbo() {
        let c = cfg(json!({"enable": true, "ratioModel": models()}), json!({}));
        let n = node(json!({}), json!({}));
        let info = |ht, turbo| {
            nrt(json!({"cpuModel": MODEL, "hyperThreadEnabled": ht, "turboEnabled": turbo}))
        };
        for (ht, turbo, want) in [
            (false, false, "1.50"),
            (true, false, "1.00"),
            (false, true, "1.80"),
            (true, true, "1.20"),
        ] {
            let got = normalization_ratio(&n, Some(&info(ht, turbo)), &c).unwrap();
            assert_eq!(got, want, "HT {ht} turbo {turbo}");
        }
        let other = nrt(json!({"cpuModel": "other"}));
        assert!(
            normalization_ratio(&n, Some(&other), &c)
                .unwrap_err()
                .contains("no ratio for CPU other")
        );
        assert!(
            normalization_ratio(&n, None, &c).is_err(),
            "no NodeResourceTopology"
        );
        let with_default = cfg(json!({"enable": true, "defaultRatio": 2.5}), json!({}));
        assert_eq!(
            normalization_ratio(&n, Some(&other), &with_default).unwrap(),
            "2.50"
        );
        let too_big = cfg(json!({"enable": true, "defaultRatio": 6.0}), json!({}));
        assert!(normalization_ratio(&n, Some(&other), &too_big).is_err());
        // The node's label wins over the config.
        let off = node(
            json!({LABEL_NODE_CPU_NORMALIZATION_ENABLED: "false"}),
            json!({}),
        );
        assert_eq!(
            normalization_ratio(&off, Some(&info(true, true)), &c).unwrap(),
            "1.00"
        );
        // A node config picks its nodes.
        let scoped = cfg(
            json!({"enable": false, "ratioModel": models(),
                "nodeConfigs": [{"name": "pool", "nodeSelector": {"matchLabels": {"pool": "a"}}, "enable": true}]}),
            json!({}),
        );
        let in_pool = node(json!({"pool": "a"}), json!({}));
        assert_eq!(
            normalization_ratio(&in_pool, Some(&info(true, true)), &scoped).unwrap(),
            "1.20"
        );
        assert_eq!(
            normalization_ratio(&n, Some(&info(true, true)), &scoped).unwrap(),
            "1.00"
        );
    }

    #[test]
    fn amplification_multiplies_cpu_by_the_normalization() {
        let n = |ratio: Option<&str>| match ratio {
            Some(r) => node(
                json!({}),
                json!({ANNOTATION_NODE_CPU_NORMALIZATION_RATIO: r}),
            ),
            None => node(json!({}), json!({})),
        };
        let on = cfg(
            json!({}),
            json!({"enable": true, "resourceAmplificationRatio": {"cpu": 1.5, "memory": 2}}),
        );
        assert_eq!(
            amplification(&n(Some("1.20")), &on).as_deref(),
            Some(r#"{"cpu":1.7999999999999998,"memory":2}"#)
        );
        assert_eq!(
            amplification(&n(None), &on).as_deref(),
            Some(r#"{"cpu":1.5,"memory":2}"#)
        );
        let off = cfg(json!({}), json!({}));
        assert_eq!(
            amplification(&n(Some("1.50")), &off).as_deref(),
            Some(r#"{"cpu":1.5}"#)
        );
        assert_eq!(amplification(&n(Some("1.00")), &off), None);
        let bad = cfg(
            json!({}),
            json!({"enable": true, "resourceAmplificationRatio": {"memory": 0.5}}),
        );
        assert_eq!(
            amplification(&n(None), &bad),
            None,
            "a ratio under 1 is refused"
        );
        // An annotation no longer wanted is removed.
        let had = node(
            json!({}),
            json!({ANNOTATION_NODE_AMPLIFICATION_RATIO: r#"{"cpu":2}"#}),
        );
        assert_eq!(
            meta_changes(&had, None, &off).get(ANNOTATION_NODE_AMPLIFICATION_RATIO),
            Some(&None)
        );
    }
}
