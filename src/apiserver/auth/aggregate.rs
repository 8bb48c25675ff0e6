//! ClusterRole aggregation, as kube-controller-manager's controller computes it: an
//! aggregated ClusterRole holds the rules of every other ClusterRole its `aggregationRule`
//! selects, in name order, each rule once — settled over aggregated roles selecting
//! aggregated roles (`admin` over `edit` over `view`). The authorizer and the controller
//! that writes the rules back share it.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::api::selector::Selector;

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default()
}

fn selectors(v: &Value) -> Option<Vec<Selector>> {
    let sels = v
        .pointer("/aggregationRule/clusterRoleSelectors")?
        .as_array()?;
    let parsed = sels
        .iter()
        .filter_map(|s| serde_json::from_value(s.clone()).ok())
        .filter_map(|ls| Selector::from_label_selector(&ls).ok());
    Some(parsed.collect())
}

/// The rules each aggregated ClusterRole should hold.
pub fn aggregated(all: &[Value]) -> HashMap<String, Vec<Value>> {
    let mut sorted: Vec<&Value> = all.iter().collect();
    sorted.sort_by_key(|v| name_of(v));
    let mut rules: HashMap<String, Vec<Value>> = sorted
        .iter()
        .map(|v| {
            let own = v.get("rules").and_then(Value::as_array).cloned();
            (name_of(v), own.unwrap_or_default())
        })
        .collect();
    let aggregating: Vec<(String, Vec<Selector>)> = sorted
        .iter()
        .filter_map(|v| Some((name_of(v), selectors(v)?)))
        .collect();
    for _ in 0..8 {
        let mut changed = false;
        for (name, sels) in &aggregating {
            let mut union: Vec<Value> = Vec::new();
            for other in sorted.iter().filter(|o| name_of(o) != *name) {
                if !sels.iter().any(|s| s.matches(&labels(other))) {
                    continue;
                }
                for r in rules.get(&name_of(other)).into_iter().flatten() {
                    if !union.contains(r) {
                        union.push(r.clone());
                    }
                }
            }
            if rules.get(name) != Some(&union) {
                rules.insert(name.clone(), union);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let names: Vec<&String> = aggregating.iter().map(|(n, _)| n).collect();
    rules.retain(|n, _| names.contains(&n));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value, agg: Option<&str>) -> Value {
        let mut r = json!({"metadata": {"name": name, "labels": labels}, "rules": rules});
        if let Some(sel) = agg {
            r["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {sel: "true"}}]});
        }
        r
    }

    // After kube's clusterroleaggregation_controller_test.go.
    #[test]
    fn sync_cluster_role_aggregation() {
        let get = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let list = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]});
        let all = vec![
            role("view", json!({}), json!([]), Some("to-view")),
            role(
                "edit",
                json!({"to-view": "true"}),
                json!([]),
                Some("to-edit"),
            ),
            role(
                "b-view-part",
                json!({"to-view": "true"}),
                json!([get]),
                None,
            ),
            role(
                "a-edit-part",
                json!({"to-edit": "true"}),
                json!([list, get]),
                None,
            ),
            role("stale", json!({}), json!([]), Some("to-nothing")),
        ];
        let got = aggregated(&all);
        assert_eq!(
            got["view"],
            vec![get.clone(), list.clone()],
            "view takes edit's aggregated rules too"
        );
        assert_eq!(
            got["edit"],
            vec![list.clone(), get.clone()],
            "name order, each once"
        );
        assert!(got["stale"].is_empty(), "nothing selected: no rules");
        assert!(!got.contains_key("a-edit-part"));
        // A rule taken out of a selected role leaves the aggregate too.
        let mut fewer = all.clone();
        fewer[3]["rules"] = json!([]);
        assert!(aggregated(&fewer)["edit"].is_empty());
        assert_eq!(aggregated(&fewer)["view"], vec![get]);
    }
}
