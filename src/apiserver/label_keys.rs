//! kube-apiserver's pod `matchLabelKeys` / `mismatchLabelKeys`: merged into the label
//! selectors at creation (the pod strategy), then validated on the merged selectors
//! (`ValidateMatchLabelKeysAndMismatchLabelKeys`), in kube's words and field paths.

use serde_json::{Map, Value};

use super::cause::Cause;

/// kube-apiserver's pod creation strategy (`mutatePodAffinity`,
/// `mutateTopologySpreadConstraints`): each pod affinity and anti-affinity term's
/// `matchLabelKeys` become `key In (the pod's value)` and `mismatchLabelKeys`
/// `key NotIn (the pod's value)` in its label selector, and each topology spread
/// constraint's `matchLabelKeys` `key In (value)`; a key the pod does not carry adds
/// nothing, and a term without a selector (it selects nothing) is left alone.
pub fn merge_label_keys(pod: &mut Value) {
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(spec) = pod.get_mut("spec") else {
        return;
    };
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(a) = spec.pointer_mut(&format!("/affinity/{kind}")) else {
            continue;
        };
        for term in list(a, "requiredDuringSchedulingIgnoredDuringExecution") {
            merge_term(term, &labels);
        }
        for term in list(a, "preferredDuringSchedulingIgnoredDuringExecution") {
            if let Some(t) = term.get_mut("podAffinityTerm") {
                merge_term(t, &labels);
            }
        }
    }
    for c in list(spec, "topologySpreadConstraints") {
        let keys = c.get("matchLabelKeys").cloned();
        merge_into(c, keys.as_ref(), "In", &labels);
    }
}

fn list<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

fn merge_term(term: &mut Value, labels: &Map<String, Value>) {
    let (matching, mismatching) = (
        term.get("matchLabelKeys").cloned(),
        term.get("mismatchLabelKeys").cloned(),
    );
    merge_into(term, matching.as_ref(), "In", labels);
    merge_into(term, mismatching.as_ref(), "NotIn", labels);
}

fn merge_into(
    holder: &mut Value,
    keys: Option<&Value>,
    operator: &str,
    labels: &Map<String, Value>,
) {
    let keys = keys.and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(selector) = holder
        .get_mut("labelSelector")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for key in keys.iter().filter_map(Value::as_str) {
        let Some(value) = labels.get(key) else {
            continue;
        };
        let exprs = selector
            .entry("matchExpressions")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(exprs) = exprs.as_array_mut() {
            exprs.push(serde_json::json!({"key": key, "operator": operator, "values": [value]}));
        }
    }
}

/// kube's validation of the label keys, on a spec whose selectors were merged: keys need a
/// selector and must be label names; a key the user also put in the selector shows twice
/// after the merge ("exists in both matchLabelKeys and labelSelector"); a key may not be
/// both matched and mismatched.
pub fn causes(spec: &Map<String, Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let affinity = spec.get("affinity");
    for kind in ["podAffinity", "podAntiAffinity"] {
        let a = affinity.and_then(|a| a.get(kind));
        let required = "requiredDuringSchedulingIgnoredDuringExecution";
        for (i, t) in items(a, required) {
            term(
                &mut out,
                &format!("spec.affinity.{kind}.{required}[{i}]"),
                t,
            );
        }
        let preferred = "preferredDuringSchedulingIgnoredDuringExecution";
        for (i, t) in items(a, preferred) {
            if let Some(t) = t.get("podAffinityTerm") {
                let path = format!("spec.affinity.{kind}.{preferred}[{i}].podAffinityTerm");
                term(&mut out, &path, t);
            }
        }
    }
    let spread = spec.get("topologySpreadConstraints");
    for (i, c) in spread
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.topologySpreadConstraints[{i}].matchLabelKeys");
        let keys = strings(c.get("matchLabelKeys"));
        let selector = c.get("labelSelector").filter(|s| !s.is_null());
        named(&mut out, &path, &keys, selector);
        in_both(&mut out, &path, &keys, selector);
    }
    out
}

fn items<'a>(v: Option<&'a Value>, key: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    let list = v.and_then(Value::as_array).into_iter().flatten();
    list.filter_map(Value::as_str).collect()
}

/// One pod (anti-)affinity term at `path`.
fn term(out: &mut Vec<Cause>, path: &str, t: &Value) {
    let matching = strings(t.get("matchLabelKeys"));
    let mismatching = strings(t.get("mismatchLabelKeys"));
    let selector = t.get("labelSelector").filter(|s| !s.is_null());
    named(out, &format!("{path}.matchLabelKeys"), &matching, selector);
    named(
        out,
        &format!("{path}.mismatchLabelKeys"),
        &mismatching,
        selector,
    );
    // kube indexes the term's own path here.
    in_both(out, path, &matching, selector);
    for (i, k) in matching.iter().enumerate() {
        if mismatching.contains(k) {
            let detail = "exists in both matchLabelKeys and mismatchLabelKeys";
            out.push(Cause::invalid(
                format!("{path}.matchLabelKeys[{i}]"),
                &(*k).into(),
                detail,
            ));
        }
    }
}

/// `validateLabelKeys`: keys need a selector, and each must be a label name.
fn named(out: &mut Vec<Cause>, path: &str, keys: &[&str], selector: Option<&Value>) {
    if keys.is_empty() {
        return;
    }
    if selector.is_none() {
        let detail = "must not be specified when labelSelector is not set";
        out.push(Cause::forbidden(path, detail));
        return;
    }
    for (i, k) in keys.iter().enumerate() {
        for e in crate::api::names::qualified_name(k) {
            out.push(Cause::invalid(format!("{path}[{i}]"), &(*k).into(), &e));
        }
    }
}

/// A selector expression on a key of `keys` that the selector already had (in
/// `matchLabels` or an earlier expression).
fn in_both(out: &mut Vec<Cause>, path: &str, keys: &[&str], selector: Option<&Value>) {
    let Some(selector) = selector else {
        return;
    };
    let mut seen: Vec<&str> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for e in strings_of(selector.get("matchExpressions"), "key") {
        if let Some(i) = keys.iter().position(|k| *k == e)
            && seen.contains(&e)
        {
            let detail = "exists in both matchLabelKeys and labelSelector";
            out.push(Cause::invalid(format!("{path}[{i}]"), &e.into(), detail));
        }
        seen.push(e);
    }
}

fn strings_of<'a>(list: Option<&'a Value>, field: &str) -> Vec<&'a str> {
    let list = list.and_then(Value::as_array).into_iter().flatten();
    list.filter_map(|v| v.get(field)?.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// kube's pod strategy cases (TestApplyLabelKeysToLabelSelector / the
    /// MatchLabelKeysInPodAffinity and SelectorMerge creation cases).
    #[test]
    fn match_and_mismatch_label_keys_merge_into_the_selectors() {
        let mut pod = json!({"metadata": {"labels": {"app": "web", "version": "v1"}},
            "spec": {"affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone",
                     "matchLabelKeys": ["version", "absent"], "mismatchLabelKeys": ["app"]}]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone",
                        "mismatchLabelKeys": ["version"]}}]}},
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["version"]}]}});
        super::merge_label_keys(&mut pod);
        let req = &pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(
            req["labelSelector"]["matchExpressions"],
            json!([{"key": "version", "operator": "In", "values": ["v1"]},
                {"key": "app", "operator": "NotIn", "values": ["web"]}])
        );
        let pref = &pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert!(
            pref["podAffinityTerm"].get("labelSelector").is_none(),
            "no selector: selects nothing, left so"
        );
        assert_eq!(
            pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"],
            json!([{"key": "version", "operator": "In", "values": ["v1"]}])
        );
    }
}

#[cfg(test)]
mod validation_tests {
    //! kube's `TestValidatePod` cases on matchLabelKeys / mismatchLabelKeys (names kept),
    //! run as the API server does: merge, then validate.

    use serde_json::{Value, json};

    fn causes(spec: Value) -> Vec<String> {
        let mut pod = json!({"metadata": {"name": "123", "namespace": "ns",
            "labels": {"key": "value1", "key2": "value2"}}, "spec": spec});
        super::merge_label_keys(&mut pod);
        let spec = pod["spec"].as_object().unwrap();
        super::causes(spec).iter().map(|c| c.message()).collect()
    }

    fn affinity(term: Value, soft: bool) -> Value {
        let terms = if soft {
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term}]})
        } else {
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]})
        };
        json!({"affinity": {"podAffinity": terms}})
    }

    fn not_in(key: &str) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": "NotIn", "values": ["value1", "value2"]}]})
    }

    #[test]
    fn invalid_soft_pod_affinity_key_exists_in_both_match_label_keys_and_label_selector() {
        let t = json!({"labelSelector": not_in("key"), "topologyKey": "k8s.io/zone",
            "matchLabelKeys": ["key"]});
        assert_eq!(
            causes(affinity(t, true)),
            [
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm[0]: Invalid value: \"key\": exists in both matchLabelKeys and labelSelector"
            ]
        );
    }

    #[test]
    fn invalid_hard_pod_affinity_key_exists_in_both_match_label_keys_and_mismatch_label_keys() {
        let t = json!({"labelSelector": not_in("other"), "topologyKey": "k8s.io/zone",
            "matchLabelKeys": ["samekey"], "mismatchLabelKeys": ["samekey"]});
        assert_eq!(
            causes(affinity(t, false)),
            [
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[0]: Invalid value: \"samekey\": exists in both matchLabelKeys and mismatchLabelKeys"
            ]
        );
    }

    #[test]
    fn invalid_soft_pod_affinity_match_label_key_is_not_a_label_name_or_has_no_selector() {
        let t = json!({"labelSelector": not_in("key"), "topologyKey": "k8s.io/zone",
            "mismatchLabelKeys": ["/simple"]});
        let got = causes(affinity(t, true));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.mismatchLabelKeys[0]: Invalid value: \"/simple\": prefix part must be non-empty"),
            "{got:?}"
        );
        let none = json!({"topologyKey": "k8s.io/zone", "matchLabelKeys": ["key"]});
        assert_eq!(
            causes(affinity(none, false)),
            [
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ]
        );
    }

    #[test]
    fn topology_spread_match_label_keys_in_the_selector() {
        let c = |keys: Value| {
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k8s.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"key": "value1"}}, "matchLabelKeys": keys}]})
        };
        assert_eq!(
            causes(c(json!(["key"]))),
            [
                "spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: \"key\": exists in both matchLabelKeys and labelSelector"
            ]
        );
        assert!(
            causes(c(json!(["key2"]))).is_empty(),
            "a distinct key is merged"
        );
    }
}
