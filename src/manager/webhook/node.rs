//! Node webhooks (`pkg/webhook/node/plugins/`): resource amplification on `nodes/status`, and
//! rejecting label changes that make a node match two node entries of slo-controller-config.

use crate::api::field::FieldError;
use std::collections::BTreeMap;

use serde_json::Value;

use super::Handlers;
use super::json as j;
use super::review::{Operation, Request, Verdict};
use crate::api::extension::keys::*;
use crate::api::extension::resources as res;
use crate::api::quantity;
use crate::api::sloconfig::validate::{multiple_matches, node_entries_of};

/// `/mutate-node-status`.
pub fn mutate_status(_h: &Handlers, req: &Request) -> Verdict {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Verdict::Allow;
    }
    let Some(original) = req.object.as_ref() else {
        return Verdict::Allow;
    };
    let mut node = original.clone();
    match amplify(&mut node, req.old_object.as_ref()) {
        Ok(()) => Verdict::patched(original, &node),
        Err(e) => Verdict::deny(e),
    }
}

fn alloc_of(node: &Value, name: &str) -> Option<String> {
    node.pointer(&format!("/status/allocatable/{name}"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Keeps kubelet's raw cpu/memory in `raw-allocatable` and publishes raw × ratio.
pub fn amplify(node: &mut Value, old: Option<&Value>) -> Result<(), FieldError> {
    let ann = j::annotations(node);
    let Some(ratio_raw) = ann.get(ANNOTATION_NODE_AMPLIFICATION_RATIO) else {
        if ann.contains_key(ANNOTATION_NODE_RAW_ALLOCATABLE)
            && let Some(a) = j::path(node, &["metadata", "annotations"])
        {
            a.remove(ANNOTATION_NODE_RAW_ALLOCATABLE);
        }
        return Ok(());
    };
    let ratios: BTreeMap<String, f64> = serde_json::from_str(ratio_raw).map_err(|e| {
        FieldError::new(
            format!("metadata.annotations[{ANNOTATION_NODE_AMPLIFICATION_RATIO}]"),
            e.to_string(),
        )
    })?;
    let saved: Option<BTreeMap<String, String>> = ann
        .get(ANNOTATION_NODE_RAW_ALLOCATABLE)
        .and_then(|s| serde_json::from_str(s).ok());
    let kubelet_changed =
        |name: &str| old.is_none_or(|o| alloc_of(o, name) != alloc_of(node, name));
    let mut raw = BTreeMap::new();
    for name in [res::CPU, res::MEMORY] {
        let from_saved = saved
            .as_ref()
            .and_then(|s| s.get(name))
            .filter(|_| !kubelet_changed(name));
        if let Some(v) = from_saved.cloned().or_else(|| alloc_of(node, name)) {
            raw.insert(name.to_string(), v);
        }
    }
    let mut amplified = BTreeMap::new();
    for (name, v) in &raw {
        let ratio = ratios.get(name).copied().unwrap_or(1.0);
        if ratio <= 1.0 {
            amplified.insert(name.clone(), v.clone());
            continue;
        }
        let q = if name == res::CPU {
            let m = (quantity::milli(v).unwrap_or(0) as f64 * ratio) as i64;
            if m % 1000 == 0 {
                (m / 1000).to_string()
            } else {
                format!("{m}m")
            }
        } else {
            ((quantity::value(v).unwrap_or(0) as f64 * ratio) as i64).to_string()
        };
        amplified.insert(name.clone(), q);
    }
    if let Some(a) = j::path(node, &["metadata", "annotations"]) {
        a.insert(
            ANNOTATION_NODE_RAW_ALLOCATABLE.into(),
            serde_json::to_string(&raw).unwrap_or_default().into(),
        );
    }
    if let Some(alloc) = j::path(node, &["status", "allocatable"]) {
        for (k, v) in amplified {
            alloc.insert(k, v.into());
        }
    }
    Ok(())
}

/// `/validate-node`: a label change may not make the node match two node entries.
pub fn validate(h: &Handlers, req: &Request) -> Verdict {
    if req.operation != Operation::Update {
        return Verdict::Allow;
    }
    let (Some(new), Some(old)) = (req.object.as_ref(), req.old_object.as_ref()) else {
        return Verdict::Allow;
    };
    let labels = j::labels(new);
    if labels == j::labels(old) {
        return Verdict::Allow;
    }
    let Some(cfg) = h.lookup.slo_config() else {
        return Verdict::Allow;
    };
    match multiple_matches(&node_entries_of(&cfg), &req.name, &labels) {
        Some(e) => Verdict::deny(format!("metadata.labels: Invalid value: {e}")),
        None => Verdict::Allow,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::api::sloconfig::SloConfig;
    use crate::manager::webhook::lookup::Fixed;
    use crate::manager::webhook::test_util::{handlers, request};

    fn node(ann: Value, alloc: Value) -> Value {
        json!({"metadata": {"name": "n", "annotations": ann}, "status": {"allocatable": alloc}})
    }

    #[test]
    fn amplification() {
        let ratio = json!({ANNOTATION_NODE_AMPLIFICATION_RATIO: r#"{"cpu":1.5}"#});
        let mut n = node(
            ratio.clone(),
            json!({"cpu": "4", "memory": "8Gi", "pods": "110"}),
        );
        amplify(&mut n, None).unwrap();
        assert_eq!(n["status"]["allocatable"]["cpu"], "6");
        assert_eq!(
            n["status"]["allocatable"]["memory"], "8Gi",
            "ratio 1 keeps the value"
        );
        let raw: BTreeMap<String, String> = serde_json::from_str(
            n["metadata"]["annotations"][ANNOTATION_NODE_RAW_ALLOCATABLE]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(raw["cpu"], "4");
        // A status update that keeps the amplified value keeps the saved raw value.
        let old = n.clone();
        let mut again = n.clone();
        amplify(&mut again, Some(&old)).unwrap();
        assert_eq!(again["status"]["allocatable"]["cpu"], "6");
        // kubelet writes a new raw value: it is saved and amplified.
        let mut kubelet = n.clone();
        kubelet["status"]["allocatable"]["cpu"] = "3".into();
        amplify(&mut kubelet, Some(&old)).unwrap();
        assert_eq!(kubelet["status"]["allocatable"]["cpu"], "4500m");
        // No ratio: the raw annotation goes away.
        let mut plain = node(
            json!({ANNOTATION_NODE_RAW_ALLOCATABLE: "{}"}),
            json!({"cpu": "4"}),
        );
        amplify(&mut plain, None).unwrap();
        assert!(
            plain["metadata"]["annotations"]
                .get(ANNOTATION_NODE_RAW_ALLOCATABLE)
                .is_none()
        );
        let mut bad = node(json!({ANNOTATION_NODE_AMPLIFICATION_RATIO: "x"}), json!({}));
        assert!(
            amplify(&mut bad, None)
                .unwrap_err()
                .to_string()
                .contains(ANNOTATION_NODE_AMPLIFICATION_RATIO)
        );
    }

    #[test]
    fn label_changes_matching_two_entries_are_denied() {
        let raw = BTreeMap::from([(
            crate::api::sloconfig::KEY_COLOCATION.to_string(),
            json!({"nodeConfigs": [
            {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}},
            {"name": "b", "nodeSelector": {"matchLabels": {"zone": "z"}}}]})
            .to_string(),
        )]);
        let (cfg, _) = SloConfig::parse(Some(&raw), &SloConfig::default());
        let h = handlers(Fixed {
            slo: Some(Arc::new(cfg)),
            ..Fixed::default()
        });
        let old = json!({"metadata": {"name": "n", "labels": {"pool": "a"}}});
        let new = json!({"metadata": {"name": "n", "labels": {"pool": "a", "zone": "z"}}});
        assert!(
            !validate(
                &h,
                &request("Node", "UPDATE", "", Some(new.clone()), Some(old.clone()))
            )
            .is_allowed()
        );
        assert!(validate(&h, &request("Node", "CREATE", "", Some(new), None)).is_allowed());
        assert!(
            validate(
                &h,
                &request("Node", "UPDATE", "", Some(old.clone()), Some(old))
            )
            .is_allowed()
        );
    }
}
