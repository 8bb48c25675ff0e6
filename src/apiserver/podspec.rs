//! kube's pod spec validation (`pkg/apis/core/validation`), for the fields the roles and
//! workload controllers rely on: every cause at once, with kube's field paths and messages.

use serde_json::{Map, Value, json};

use super::cause::Cause;
use crate::api::quantity;

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn one_of(out: &mut Vec<Cause>, field: &str, v: Option<&Value>, allowed: &[&str]) {
    if let Some(x) = v
        && !x.as_str().is_some_and(|s| allowed.contains(&s))
    {
        out.push(Cause::not_supported(field, x, &strs(allowed)));
    }
}

/// Every cause a (defaulted) pod spec breaks.
pub fn causes(spec: &Map<String, Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    if containers.is_none() {
        out.push(Cause::required("spec.containers", ""));
    }
    let mut seen = std::collections::HashSet::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            container(&mut out, &format!("spec.{list}[{i}]"), c, &mut seen);
        }
    }
    one_of(
        &mut out,
        "spec.restartPolicy",
        spec.get("restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    one_of(
        &mut out,
        "spec.dnsPolicy",
        spec.get("dnsPolicy"),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    ids(
        &mut out,
        "spec.securityContext",
        spec.get("securityContext"),
    );
    if let Some(node) = spec.get("nodeName").and_then(Value::as_str)
        && !node.is_empty()
    {
        // The node runtime puts nothing of it in a path, but kube refuses such names.
        if node.len() > 253 {
            let why = "must be no more than 253 characters";
            out.push(Cause::invalid("spec.nodeName", &json!(node), why));
        } else if !crate::api::names::dns_subdomain(node) {
            let why = crate::api::names::DNS_SUBDOMAIN;
            out.push(Cause::invalid("spec.nodeName", &json!(node), why));
        }
    }
    for (i, t) in spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.tolerations[{i}]");
        one_of(
            &mut out,
            &format!("{at}.operator"),
            t.get("operator").filter(|o| o.as_str() != Some("")),
            &["Equal", "Exists"],
        );
        one_of(
            &mut out,
            &format!("{at}.effect"),
            t.get("effect").filter(|o| o.as_str() != Some("")),
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
        if t.get("operator").and_then(Value::as_str) == Some("Exists")
            && t.get("value")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        {
            out.push(Cause::invalid(
                format!("{at}.operator"),
                &json!("Exists"),
                "value must be empty when `operator` is 'Exists'",
            ));
        }
    }
    out
}

/// kube's `ValidateNonnegativeField` range for user and group ids: 0…2^31-1 (a larger
/// one wraps to -1 at the kernel, which `setresuid` reads as "unchanged": root).
fn ids(out: &mut Vec<Cause>, at: &str, sc: Option<&Value>) {
    let Some(sc) = sc else { return };
    let check = |out: &mut Vec<Cause>, field: String, v: &Value| {
        if !v
            .as_i64()
            .is_some_and(|n| (0..=i64::from(i32::MAX)).contains(&n))
        {
            let why = "must be between 0 and 2147483647, inclusive";
            out.push(Cause::invalid(field, v, why));
        }
    };
    for k in ["runAsUser", "runAsGroup", "fsGroup"] {
        if let Some(v) = sc.get(k).filter(|v| !v.is_null()) {
            check(out, format!("{at}.{k}"), v);
        }
    }
    let groups = sc.get("supplementalGroups").and_then(Value::as_array);
    for (i, g) in groups.into_iter().flatten().enumerate() {
        check(out, format!("{at}.supplementalGroups[{i}]"), g);
    }
}

fn container(
    out: &mut Vec<Cause>,
    at: &str,
    c: &Value,
    seen: &mut std::collections::HashSet<String>,
) {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        out.push(Cause::required(format!("{at}.name"), ""));
    } else if !seen.insert(name.to_string()) {
        out.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
    }
    if c.get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        out.push(Cause::required(format!("{at}.image"), ""));
    }
    for (j, p) in c
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let pat = format!("{at}.ports[{j}]");
        for (k, required) in [("containerPort", true), ("hostPort", false)] {
            match p.get(k) {
                None if required => out.push(Cause::required(format!("{pat}.{k}"), "")),
                Some(v)
                    if !v.as_i64().is_some_and(|n| (1..=65535).contains(&n))
                        && (v != &json!(0) || required) =>
                {
                    out.push(Cause::invalid(
                        format!("{pat}.{k}"),
                        v,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
                _ => {}
            }
        }
        one_of(
            out,
            &format!("{pat}.protocol"),
            p.get("protocol"),
            &["SCTP", "TCP", "UDP"],
        );
    }
    resources(out, &format!("{at}.resources"), c.get("resources"));
    let env = c.get("env").and_then(Value::as_array);
    for (j, e) in env.into_iter().flatten().enumerate() {
        let field = format!("{at}.env[{j}].name");
        let name = e.get("name").and_then(Value::as_str).unwrap_or("");
        let printable = name.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'=');
        if name.is_empty() {
            out.push(Cause::required(field, ""));
        } else if !printable {
            // kube 1.33's (relaxed) rule: an `=` would make `A=B=c` ambiguous in environ.
            let why = "a valid environment variable name must consist only of printable ASCII characters other than '='";
            out.push(Cause::invalid(field, &json!(name), why));
        }
    }
    ids(
        out,
        &format!("{at}.securityContext"),
        c.get("securityContext"),
    );
}

fn resources(out: &mut Vec<Cause>, at: &str, r: Option<&Value>) {
    let Some(r) = r else { return };
    let parsed = |kind: &str, out: &mut Vec<Cause>| -> Map<String, Value> {
        let mut ok = Map::new();
        for (res, q) in r.get(kind).and_then(Value::as_object).into_iter().flatten() {
            let raw = q.as_str().map_or_else(|| q.to_string(), str::to_string);
            match quantity::milli(&raw) {
                Ok(m) if m < 0 => out.push(Cause::invalid(
                    format!("{at}.{kind}[{res}]"),
                    &json!(raw),
                    "must be greater than or equal to 0",
                )),
                Ok(m) => {
                    ok.insert(res.clone(), json!([m, raw]));
                }
                Err(_) => {}
            }
        }
        ok
    };
    let requests = parsed("requests", out);
    let limits = parsed("limits", out);
    for (res, req) in &requests {
        if let (Some(lim), Some(rm)) = (limits.get(res), req[0].as_i64())
            && lim[0].as_i64().is_some_and(|lm| rm > lm)
        {
            let detail = format!(
                "must be less than or equal to {res} limit of {}",
                lim[1].as_str().unwrap_or("")
            );
            out.push(Cause::invalid(format!("{at}.requests"), &req[1], &detail));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_in_kube_wording() {
        let spec = json!({"restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst", "containers": [
            {"name": "c", "image": "i", "ports": [{"containerPort": 99999}],
             "resources": {"requests": {"cpu": "-1", "memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
            {"name": "c"}],
            "tolerations": [{"operator": "Is", "effect": "Never"}]});
        let got: Vec<String> = causes(spec.as_object().unwrap())
            .iter()
            .map(Cause::message)
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.containers[0].ports[0].containerPort: Invalid value: 99999: must be between 1 and 65535, inclusive",
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
                "spec.containers[1].name: Duplicate value: \"c\"",
                "spec.containers[1].image: Required value",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.tolerations[0].operator: Unsupported value: \"Is\": supported values: \"Equal\", \"Exists\"",
                "spec.tolerations[0].effect: Unsupported value: \"Never\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ]
        );
        for m in &got {
            assert!(!m.contains("Some(") && !m.contains("None"), "{m}");
        }
    }

    #[test]
    fn node_names_and_environment_names() {
        let spec = json!({"nodeName": "../../x", "containers": [{"name": "c", "image": "i",
            "env": [{"name": "A=B", "value": "c"}, {"name": "OK.name-1"}, {"name": ""}]}]});
        let got: Vec<String> = causes(spec.as_object().unwrap())
            .iter()
            .map(Cause::message)
            .collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='"
        );
        assert_eq!(got[1], "spec.containers[0].env[2].name: Required value");
        assert!(got[2].starts_with(
            "spec.nodeName: Invalid value: \"../../x\": a lowercase RFC 1123 subdomain"
        ));
    }

    #[test]
    fn user_and_group_ids_within_kube_range() {
        let spec = json!({"securityContext": {"runAsUser": 4294967295u64, "fsGroup": -1,
                "supplementalGroups": [5, 2147483648u64]},
            "containers": [{"name": "c", "image": "i",
                "securityContext": {"runAsNonRoot": true, "runAsUser": 4294967295u64, "runAsGroup": 2147483647}}]});
        let got: Vec<String> = causes(spec.as_object().unwrap())
            .iter()
            .map(Cause::message)
            .collect();
        let why = "must be between 0 and 2147483647, inclusive";
        assert_eq!(
            got,
            vec![
                format!(
                    "spec.containers[0].securityContext.runAsUser: Invalid value: 4294967295: {why}"
                ),
                format!("spec.securityContext.runAsUser: Invalid value: 4294967295: {why}"),
                format!("spec.securityContext.fsGroup: Invalid value: -1: {why}"),
                format!(
                    "spec.securityContext.supplementalGroups[1]: Invalid value: 2147483648: {why}"
                ),
            ]
        );
    }
}
