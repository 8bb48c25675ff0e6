//! ReservationArgs' `reservationSelectorIndex` (Koordinator's reservationSelector white-list
//! index, `reservation/cache.go`): the scheduled reservations by the label keys an operator
//! names (`keyPrefixes`, and `keys` matched exactly by key and value), so a pod whose
//! `reservation-affinity` selector uses such a key is matched only against the
//! reservations on the nodes of the smallest bucket its selector hits. A key-existence
//! pre-filter only: every candidate is still matched in full, so placements are the same
//! with the index on or off.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;

/// `ReservationSelectorIndexArgs`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IndexArgs {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub key_prefixes: Vec<String>,
    #[serde(default)]
    pub keys: Vec<String>,
}

/// Node → reservation names in one bucket.
type Bucket = HashMap<String, BTreeSet<String>>;

/// What one reservation was indexed under: its node, prefixes and (key, value) pairs.
type Entry = (String, Vec<String>, Vec<(String, String)>);

#[derive(Debug, Clone, Default)]
pub struct SelectorIndex {
    prefixes: Vec<String>,
    keys: BTreeSet<String>,
    by_prefix: HashMap<String, Bucket>,
    by_kv: HashMap<(String, String), Bucket>,
    entries: HashMap<String, Entry>,
}

impl SelectorIndex {
    /// The index the args ask for: none when off or naming no key (blank entries dropped,
    /// duplicates once).
    pub fn new(args: &IndexArgs) -> Option<SelectorIndex> {
        if !args.enabled {
            return None;
        }
        let mut prefixes: Vec<String> = Vec::new();
        for p in args.key_prefixes.iter().map(|p| p.trim()) {
            if !p.is_empty() && !prefixes.iter().any(|q| q == p) {
                prefixes.push(p.to_string());
            }
        }
        let keys: BTreeSet<String> = args
            .keys
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        (!prefixes.is_empty() || !keys.is_empty()).then(|| SelectorIndex {
            prefixes,
            keys,
            ..Default::default()
        })
    }

    fn prefix_of(&self, key: &str) -> Option<&String> {
        self.prefixes.iter().find(|p| key.starts_with(p.as_str()))
    }

    /// Indexes reservation `name` on `node` under its labels (replacing what it had).
    pub fn add(&mut self, name: &str, node: Option<&str>, labels: &BTreeMap<String, String>) {
        self.remove(name);
        let Some(node) = node.filter(|n| !n.is_empty()) else {
            return;
        };
        let mut prefixes = Vec::new();
        let mut kvs = Vec::new();
        for (k, v) in labels {
            if self.keys.contains(k) {
                kvs.push((k.clone(), v.clone()));
            }
            if let Some(p) = self.prefix_of(k).filter(|p| !prefixes.contains(*p)) {
                prefixes.push(p.clone());
            }
        }
        if prefixes.is_empty() && kvs.is_empty() {
            return;
        }
        let into = |b: &mut Bucket| {
            b.entry(node.to_string())
                .or_default()
                .insert(name.to_string());
        };
        for p in &prefixes {
            into(self.by_prefix.entry(p.clone()).or_default());
        }
        for kv in &kvs {
            into(self.by_kv.entry(kv.clone()).or_default());
        }
        let entry = (node.to_string(), prefixes, kvs);
        self.entries.insert(name.to_string(), entry);
    }

    pub fn remove(&mut self, name: &str) {
        let Some((node, prefixes, kvs)) = self.entries.remove(name) else {
            return;
        };
        let out = |b: &mut Bucket| {
            if let Some(names) = b.get_mut(&node) {
                names.remove(name);
                if names.is_empty() {
                    b.remove(&node);
                }
            }
            b.is_empty()
        };
        for p in prefixes {
            if self.by_prefix.get_mut(&p).is_some_and(out) {
                self.by_prefix.remove(&p);
            }
        }
        for kv in kvs {
            if self.by_kv.get_mut(&kv).is_some_and(out) {
                self.by_kv.remove(&kv);
            }
        }
    }

    /// The candidates for a pod's `reservationSelector`: `None` when no key of it is
    /// indexed (every reservation is a candidate), else the smallest hit bucket (empty when
    /// some indexed key or value is on no reservation). A key named exactly is looked up by
    /// key and value, not also by prefix.
    pub fn candidates(&self, selector: &BTreeMap<String, String>) -> Option<Candidates<'_>> {
        let mut hit = false;
        let mut smallest: Option<&Bucket> = None;
        let empty = Candidates(None);
        for (k, v) in selector {
            let bucket = if self.keys.contains(k) {
                self.by_kv.get(&(k.clone(), v.clone()))
            } else if let Some(p) = self.prefix_of(k) {
                self.by_prefix.get(p)
            } else {
                continue;
            };
            hit = true;
            let Some(b) = bucket else {
                return Some(empty);
            };
            if smallest.is_none_or(|s| b.len() < s.len()) {
                smallest = Some(b);
            }
        }
        hit.then_some(Candidates(smallest))
    }
}

/// An index hit: the nodes and, on each, the reservations to match.
pub struct Candidates<'a>(Option<&'a Bucket>);

impl<'a> Candidates<'a> {
    /// How many nodes hold a candidate (`scheduler_reservation_selector_index_candidates_count`).
    pub fn nodes(&self) -> usize {
        self.0.map_or(0, HashMap::len)
    }

    pub fn names(&self) -> impl Iterator<Item = &'a String> + 'a {
        self.0.into_iter().flat_map(|b| b.values().flatten())
    }
}

#[cfg(test)]
#[path = "reservation_index_tests.rs"]
mod tests;
