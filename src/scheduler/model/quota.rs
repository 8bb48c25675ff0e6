//! The runtime quota: how much of its parent's runtime each quota may use now, as
//! Koordinator's group quota manager computes it (`core/runtime_quota_calculator.go`,
//! `core/scale_minquota_when_over_root_res.go`). Per resource and per parent: every child
//! first gets its request up to its min (its min when it does not lend), then what is left
//! is shared among the children asking for more, by shared weight, largest remainder first,
//! none getting more than it asks.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::pod::Amounts;

/// One child of a parent, for one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub name: String,
    /// Its min after scaling (and guarantee, when that feature is on).
    pub min: i64,
    /// Its limited request: min(request, max).
    pub request: i64,
    pub weight: i64,
    /// `allow-lent-resource` (default true): an idle quota gives its min away.
    pub lends: bool,
}

/// Splits `amount` among `members` (index, weight) in proportion to weight, the leftover
/// units going one each to the largest remainders, ties by name ascending (Hamilton).
fn hamilton(amount: i64, members: &[(usize, i64)], names: &[&str]) -> Vec<i64> {
    let total: i128 = members.iter().map(|(_, w)| *w as i128).sum();
    if total <= 0 || amount <= 0 {
        return vec![0; members.len()];
    }
    let mut parts: Vec<(i64, i128)> = members
        .iter()
        .map(|(_, w)| {
            let x = *w as i128 * amount as i128;
            ((x / total) as i64, x % total)
        })
        .collect();
    let mut left = amount - parts.iter().map(|p| p.0).sum::<i64>();
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| {
        parts[*b]
            .1
            .cmp(&parts[*a].1)
            .then_with(|| names[members[*a].0].cmp(names[members[*b].0]))
    });
    for k in order {
        if left == 0 {
            break;
        }
        parts[k].0 += 1;
        left -= 1;
    }
    parts.into_iter().map(|p| p.0).collect()
}

/// Each child's runtime for one resource out of `total`.
pub fn distribute(total: i64, children: &[Share]) -> Vec<i64> {
    let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    let mut runtime: Vec<i64> = Vec::with_capacity(children.len());
    let mut asking: Vec<(usize, i64)> = Vec::new();
    for (i, c) in children.iter().enumerate() {
        if c.request > c.min {
            runtime.push(c.min);
            if c.weight > 0 {
                asking.push((i, c.weight));
            }
        } else {
            runtime.push(if c.lends { c.request } else { c.min });
        }
    }
    let mut remaining = total - runtime.iter().sum::<i64>();
    while remaining > 0 && !asking.is_empty() {
        let shares = hamilton(remaining, &asking, &names);
        remaining = 0;
        let mut still = Vec::new();
        for ((i, w), s) in asking.iter().zip(shares) {
            runtime[*i] += s;
            let want = children[*i].request;
            if runtime[*i] >= want {
                remaining += runtime[*i] - want;
                runtime[*i] = want;
            } else {
                still.push((*i, *w));
            }
        }
        asking = still;
    }
    runtime
}

/// Mins scaled down when together they exceed what the parent has: each becomes
/// ⌊total · min / Σ min⌋ (all children scalable, as with enableMinQuotaScale).
pub fn scale_mins(total: i64, mins: &[i64]) -> Vec<i64> {
    let sum: i128 = mins.iter().map(|m| *m as i128).sum();
    if sum <= total as i128 {
        return mins.to_vec();
    }
    if total <= 0 {
        return vec![0; mins.len()];
    }
    mins.iter()
        .map(|m| ((total as i128 * *m as i128) / sum) as i64)
        .collect()
}

/// A quota as the tree computation reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quota {
    pub name: String,
    /// `None`: a child of the root.
    pub parent: Option<String>,
    pub min: Amounts,
    pub max: Amounts,
    /// Shared weight (default: max).
    pub weight: Option<Amounts>,
    /// Σ requests of its own pods (leaves).
    pub pods_request: Amounts,
    pub lends: bool,
}

fn get(a: &Amounts, r: &str) -> i64 {
    a.get(r).copied().unwrap_or(0)
}

/// Limited requests of every quota: a leaf's pod requests, a parent's Σ children's
/// limited requests (at least its min when it does not lend), each capped at its max and
/// kept to the resources its max names.
fn limited_requests(
    quotas: &[Quota],
    children: &BTreeMap<Option<&str>, Vec<usize>>,
) -> Vec<Amounts> {
    fn walk(
        i: usize,
        quotas: &[Quota],
        children: &BTreeMap<Option<&str>, Vec<usize>>,
        out: &mut Vec<Option<Amounts>>,
    ) -> Amounts {
        if let Some(a) = &out[i] {
            return a.clone();
        }
        let q = &quotas[i];
        let kids = children.get(&Some(q.name.as_str()));
        let mut req = match kids {
            Some(k) if !k.is_empty() => {
                let mut sum = Amounts::new();
                for c in k {
                    for (r, v) in walk(*c, quotas, children, out) {
                        *sum.entry(r).or_default() += v;
                    }
                }
                if !q.lends {
                    for (r, m) in &q.min {
                        let e = sum.entry(r.clone()).or_default();
                        *e = (*e).max(*m);
                    }
                }
                sum
            }
            _ => q.pods_request.clone(),
        };
        req.retain(|r, _| q.max.contains_key(r));
        for (r, v) in req.iter_mut() {
            *v = (*v).clamp(0, get(&q.max, r));
        }
        out[i] = Some(req.clone());
        req
    }
    let mut out = vec![None; quotas.len()];
    for i in 0..quotas.len() {
        walk(i, quotas, children, &mut out);
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// Every quota's runtime (mins scaled when `scale_min`, enableMinQuotaScale), given what the root may distribute, walking from the root down:
/// each parent's runtime is its children's total.
pub fn runtime_tree(
    quotas: &[Quota],
    root_total: &Amounts,
    scale_min: bool,
) -> BTreeMap<String, Amounts> {
    let names: BTreeSet<&str> = quotas.iter().map(|q| q.name.as_str()).collect();
    let mut children: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
    for (i, q) in quotas.iter().enumerate() {
        // An unknown parent (or none) hangs the quota off the root.
        let p = q.parent.as_deref().filter(|p| names.contains(p));
        children.entry(p).or_default().push(i);
    }
    let limited = limited_requests(quotas, &children);
    let mut out = BTreeMap::new();
    let mut stack: Vec<(Option<&str>, Amounts)> = vec![(None, root_total.clone())];
    while let Some((parent, total)) = stack.pop() {
        let Some(kids) = children.get(&parent) else {
            continue;
        };
        let resources: BTreeSet<&String> =
            kids.iter().flat_map(|k| quotas[*k].max.keys()).collect();
        let mut runtime: Vec<Amounts> = vec![Amounts::new(); kids.len()];
        for r in resources {
            let t = get(&total, r);
            let mins: Vec<i64> = kids.iter().map(|k| get(&quotas[*k].min, r)).collect();
            let shares: Vec<Share> = kids
                .iter()
                .zip(if scale_min {
                    scale_mins(t, &mins)
                } else {
                    mins
                })
                .map(|(k, min)| {
                    let q = &quotas[*k];
                    Share {
                        name: q.name.clone(),
                        min,
                        request: get(&limited[*k], r),
                        weight: get(q.weight.as_ref().unwrap_or(&q.max), r),
                        lends: q.lends,
                    }
                })
                .collect();
            for (j, v) in distribute(t, &shares).into_iter().enumerate() {
                if quotas[kids[j]].max.contains_key(r.as_str()) {
                    runtime[j].insert(r.clone(), v);
                }
            }
        }
        for (j, k) in kids.iter().enumerate() {
            let name = quotas[*k].name.as_str();
            stack.push((Some(name), runtime[j].clone()));
            out.insert(name.to_string(), std::mem::take(&mut runtime[j]));
        }
    }
    out
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
