//! A Job's `successPolicy` (Indexed Jobs; kube's `matchSuccessPolicy`): the first rule met
//! by the succeeded indexes declares the Job a success — `succeededIndexes` all succeeded,
//! or `succeededCount` of them (of all indexes without `succeededIndexes`). The Job then
//! gets `SuccessCriteriaMet` and `Complete` (reason `SuccessPolicy`, "Matched rules at
//! index N") and its remaining pods are stopped.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;

/// `0-2,5` → {0, 1, 2, 5}, indexes below `completions` only; `None` when it does not parse.
fn parse(indexes: &str, completions: i32) -> Option<BTreeSet<i32>> {
    let mut out = BTreeSet::new();
    for part in indexes.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?),
            None => {
                let i: i32 = part.trim().parse().ok()?;
                (i, i)
            }
        };
        if a > b || a < 0 {
            return None;
        }
        out.extend((a..=b.min(completions - 1)).filter(|i| *i < completions));
    }
    Some(out)
}

/// The message of the first rule the succeeded indexes meet, if one does.
pub fn matched(job: &Job, succeeded: &BTreeSet<i32>) -> Option<String> {
    let spec = job.spec.as_ref()?;
    let rules = &spec.success_policy.as_ref()?.rules;
    let completions = spec.completions.unwrap_or(0);
    if succeeded.is_empty() {
        return None;
    }
    rules.iter().enumerate().find_map(|(i, rule)| {
        let met = match &rule.succeeded_indexes {
            Some(listed) => {
                let want = parse(listed, completions).filter(|w| !w.is_empty())?;
                let done = want.intersection(succeeded).count();
                done >= rule
                    .succeeded_count
                    .map_or(want.len(), |c| c.max(0) as usize)
            }
            None => rule
                .succeeded_count
                .is_some_and(|c| succeeded.len() >= c.max(0) as usize),
        };
        met.then(|| format!("Matched rules at index {i}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_parse_within_the_completions() {
        let set = |v: &[i32]| v.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(parse("0-2,5", 10), Some(set(&[0, 1, 2, 5])));
        assert_eq!(
            parse("1,3-9", 4),
            Some(set(&[1, 3])),
            "beyond completions: dropped"
        );
        assert_eq!(parse("3-1", 10), None);
        assert_eq!(parse("x", 10), None);
    }
}
