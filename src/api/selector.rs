//! Label selectors: the string form (`app=web,tier in (a,b),!canary`) and `LabelSelector`
//! objects (matchLabels + matchExpressions), with Kubernetes' matching rules.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
}

/// An AND of requirements; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector {input:?}: {reason}")]
pub struct SelectorError {
    pub input: String,
    pub reason: String,
}

fn err(input: &str, reason: impl Into<String>) -> SelectorError {
    SelectorError {
        input: input.to_string(),
        reason: reason.into(),
    }
}

fn valid_key(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && prefix.len() <= 253
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_set(input: &str, key: &str, op: Op, rest: &str) -> Result<Requirement, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| err(input, format!("values of {key:?} must be in parentheses")))?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(err(input, format!("{key:?} needs at least one value")));
    }
    if let Some(bad) = values.iter().find(|v| !valid_value(v)) {
        return Err(err(input, format!("invalid value {bad:?}")));
    }
    Ok(Requirement {
        key: key.to_string(),
        op,
        values,
    })
}

fn parse_requirement(input: &str, part: &str) -> Result<Requirement, SelectorError> {
    let part = part.trim();
    if part.is_empty() {
        return Err(err(input, "empty requirement"));
    }
    let check_key = |k: &str| {
        if valid_key(k) {
            Ok(k.to_string())
        } else {
            Err(err(input, format!("invalid key {k:?}")))
        }
    };
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement {
            key: check_key(key.trim())?,
            op: Op::DoesNotExist,
            values: vec![],
        });
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        for (word, op) in [("notin", Op::NotIn), ("in", Op::In)] {
            if let Some(vals) = rest
                .strip_prefix(word)
                .filter(|r| r.trim_start().starts_with('('))
            {
                return parse_set(input, &check_key(words[0])?, op, vals);
            }
        }
    }
    for (sym, op) in [
        ("!=", Op::NotEq),
        ("==", Op::Eq),
        ("=", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
    ] {
        if let Some((k, v)) = part.split_once(sym) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_value(v) || (matches!(op, Op::Gt | Op::Lt) && v.parse::<i64>().is_err()) {
                return Err(err(input, format!("invalid value {v:?}")));
            }
            return Ok(Requirement {
                key: check_key(k)?,
                op,
                values: vec![v.to_string()],
            });
        }
    }
    Ok(Requirement {
        key: check_key(part)?,
        op: Op::Exists,
        values: vec![],
    })
}

impl Selector {
    /// Parses the string form used in `?labelSelector=`.
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        split_top(s)
            .into_iter()
            .map(|p| parse_requirement(s, p))
            .collect::<Result<_, _>>()
            .map(Selector)
    }

    /// Converts a `LabelSelector` object. An empty object matches everything.
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Selector, SelectorError> {
        let mut reqs = Vec::new();
        for (k, v) in ls.match_labels.iter().flatten() {
            reqs.push(Requirement {
                key: k.clone(),
                op: Op::Eq,
                values: vec![v.clone()],
            });
        }
        for e in ls.match_expressions.iter().flatten() {
            let op = match e.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(err(&e.key, format!("unknown operator {other:?}"))),
            };
            let values = e.values.clone().unwrap_or_default();
            if matches!(op, Op::In | Op::NotIn) && values.is_empty() {
                return Err(err(&e.key, format!("operator {} needs values", e.operator)));
            }
            reqs.push(Requirement {
                key: e.key.clone(),
                op,
                values,
            });
        }
        Ok(Selector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Matches against any label lookup.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| {
            let v = get(&r.key);
            match r.op {
                Op::Eq | Op::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotEq | Op::NotIn => v.is_none_or(|v| r.values.iter().all(|x| x != v)),
                Op::Exists => v.is_some(),
                Op::DoesNotExist => v.is_none(),
                Op::Gt | Op::Lt => {
                    let (Some(v), Some(bound)) = (
                        v.and_then(|v| v.parse::<i64>().ok()),
                        r.values[0].parse::<i64>().ok(),
                    ) else {
                        return false;
                    };
                    if r.op == Op::Gt { v > bound } else { v < bound }
                }
            }
        })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Matches optional labels (an object without labels has none).
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.matches_with(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
    }
}

/// `LabelSelector` semantics for optional selectors: `None` matches nothing, an empty
/// selector everything. An invalid selector matches nothing.
pub fn label_selector_matches(
    sel: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    match sel {
        None => false,
        Some(ls) => Selector::from_label_selector(ls).is_ok_and(|s| s.matches_opt(labels)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn string_selectors() {
        let l = labels(&[("app", "web"), ("tier", "fe"), ("n", "5")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app=web,tier=be", false),
            ("tier in (fe, be)", true),
            ("tier notin (fe)", false),
            ("missing notin (fe)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("n>4", true),
            ("n<5", false),
            ("app=web,tier in (x,fe),!canary", true),
            ("example.com/role=db", false),
        ];
        for (sel, want) in cases {
            assert_eq!(
                Selector::parse(sel).unwrap().matches(&l),
                want,
                "selector {sel:?}"
            );
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "app=web,",
            "a b",
            "tier in fe",
            "tier in ()",
            "=x",
            "app=we b",
            "n>x",
            "a@b=c",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn label_selector_objects() {
        let ls: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]},
                                  {"key": "canary", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert!(label_selector_matches(
            Some(&ls),
            Some(&labels(&[("app", "web"), ("tier", "fe")]))
        ));
        assert!(!label_selector_matches(
            Some(&ls),
            Some(&labels(&[("app", "web")]))
        ));
        assert!(label_selector_matches(
            Some(&LabelSelector::default()),
            None
        ));
        assert!(!label_selector_matches(
            None,
            Some(&labels(&[("app", "web")]))
        ));
        let bad: LabelSelector = serde_json::from_value(
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}),
        )
        .unwrap();
        assert!(Selector::from_label_selector(&bad).is_err());
    }
}
