//! Limits every reader of outside input applies (the API server, `koord explain`): nesting
//! depth, YAML shapes that make the parser slow, and quantities that do not parse.

use serde_json::Value;

use super::quantity;

/// Deepest nesting accepted (serde_json reads up to 128 levels back at start).
pub const MAX_DEPTH: usize = 100;
/// Widest YAML indentation accepted, in columns.
const MAX_YAML_INDENT: usize = 2 * MAX_DEPTH;

/// Nesting depth of a value (a scalar is 0), computed without recursion.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Object(m) => stack.extend(m.values().map(|c| (c, d + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// Refuses YAML whose flow nesting or indentation goes beyond the depth limit, before the
/// parser spends time on it.
pub fn prescan_yaml(bytes: &[u8]) -> Result<(), String> {
    let too_deep = || format!("the YAML is nested deeper than {MAX_DEPTH} levels");
    let mut flow = 0usize;
    let mut quote: Option<u8> = None;
    let mut line_start = true;
    let mut indent = 0usize;
    for &b in bytes {
        if line_start {
            if b == b' ' {
                indent += 1;
                if indent > MAX_YAML_INDENT {
                    return Err(too_deep());
                }
                continue;
            }
            line_start = false;
        }
        match (quote, b) {
            (_, b'\n') => {
                line_start = true;
                indent = 0;
                if quote == Some(b'\'') || quote == Some(b'"') {
                    continue;
                }
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'[' | b'{') => {
                flow += 1;
                if flow > MAX_DEPTH {
                    return Err(too_deep());
                }
            }
            (None, b']' | b'}') => flow = flow.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Keys whose values are maps of resource name to quantity, in every kind koord reads
/// (pod requests and limits, node capacity, NodeMetric usages).
const QUANTITY_MAPS: &[&str] = &[
    "requests",
    "limits",
    "capacity",
    "allocatable",
    "overhead",
    "resources",
];

/// Every quantity under a [`QUANTITY_MAPS`] key that does not parse, as
/// (field path, value, reason).
pub fn invalid_quantities(v: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![(v, String::new())];
    while let Some((v, path)) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if QUANTITY_MAPS.contains(&k.as_str())
                        && let Some(map) = child.as_object()
                        && map.values().all(|q| q.is_string() || q.is_number())
                    {
                        for (res, q) in map {
                            let raw = q.as_str().map_or_else(|| q.to_string(), str::to_string);
                            if let Err(e) = quantity::parse(&raw) {
                                out.push((format!("{p}[{res}]"), raw, e.kube_reason()));
                            }
                        }
                    } else {
                        stack.push((child, p));
                    }
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    stack.push((child, format!("{path}[{i}]")));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_levels() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({"a": [1, {"b": 2}]})), 3);
    }

    #[test]
    fn yaml_prescan() {
        assert!(prescan_yaml(b"a:\n  b: [1, {c: \"[[[[\"}]\n").is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(prescan_yaml(deep.as_bytes()).is_err());
        let indented = format!("a:\n{}b: 1\n", " ".repeat(MAX_YAML_INDENT + 1));
        assert!(prescan_yaml(indented.as_bytes()).is_err());
    }

    #[test]
    fn finds_invalid_quantities_with_their_paths() {
        let pod = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "abc", "memory": "1Gi"}, "limits": {"cpu": 2}}}]}});
        let bad = invalid_quantities(&pod);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, "spec.containers[0].resources.requests[cpu]");
        assert_eq!(bad[0].1, "abc");
        let metric = json!({"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1e400", "memory": "x"}}}}});
        let bad = invalid_quantities(&metric);
        assert_eq!(bad.len(), 1, "1e400 is capped, not invalid: {bad:?}");
        assert_eq!(bad[0].0, "status.nodeMetric.nodeUsage.resources[memory]");
    }
}
