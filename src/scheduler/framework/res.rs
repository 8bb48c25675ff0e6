//! Interned resource names and dense amount vectors. A scheduling cycle reads the same
//! handful of resources (cpu, memory, pods, batch-cpu, …) thousands of times per pod;
//! looking them up by string in a map per node was a third of the scheduler's time. Names
//! are interned once, when an object enters the cache, into small integers that index a
//! plain vector. Ids are per process and never reused; the table only grows with distinct
//! resource names, which a cluster has few of.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use crate::api::extension::resources::{
    BATCH_CPU, BATCH_MEMORY, CPU, EPHEMERAL_STORAGE, MEMORY, PODS,
};
use crate::api::pod::Amounts;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResId(pub u16);

/// Well-known ids, registered first in this order.
pub const R_CPU: ResId = ResId(0);
pub const R_MEMORY: ResId = ResId(1);
pub const R_PODS: ResId = ResId(2);
pub const R_EPHEMERAL_STORAGE: ResId = ResId(3);
pub const R_BATCH_CPU: ResId = ResId(4);
pub const R_BATCH_MEMORY: ResId = ResId(5);
const WELL_KNOWN: [&str; 6] = [
    CPU,
    MEMORY,
    PODS,
    EPHEMERAL_STORAGE,
    BATCH_CPU,
    BATCH_MEMORY,
];

#[derive(Default)]
struct Table {
    ids: HashMap<String, u16>,
    names: Vec<String>,
}

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Table::default();
        for n in WELL_KNOWN {
            t.ids.insert(n.to_string(), t.names.len() as u16);
            t.names.push(n.to_string());
        }
        RwLock::new(t)
    })
}

/// The id of `name`, registering it on first sight.
pub fn intern(name: &str) -> ResId {
    if let Some(id) = lookup(name) {
        return id;
    }
    let mut t = table().write().unwrap_or_else(|p| p.into_inner());
    if let Some(id) = t.ids.get(name) {
        return ResId(*id);
    }
    // More than 65,535 distinct resource names cannot come from a real cluster; the last
    // id is shared rather than panicking.
    let id = u16::try_from(t.names.len()).unwrap_or(u16::MAX);
    t.ids.insert(name.to_string(), id);
    t.names.push(name.to_string());
    ResId(id)
}

/// The id of a name already seen.
pub fn lookup(name: &str) -> Option<ResId> {
    let t = table().read().unwrap_or_else(|p| p.into_inner());
    t.ids.get(name).map(|i| ResId(*i))
}

/// The name behind an id (for messages).
/// The name of a well-known resource without a lookup (None for the others).
pub fn well_known_name(id: ResId) -> Option<&'static str> {
    WELL_KNOWN.get(id.0 as usize).copied()
}

pub fn name(id: ResId) -> String {
    let t = table().read().unwrap_or_else(|p| p.into_inner());
    t.names.get(id.0 as usize).cloned().unwrap_or_default()
}

/// Amounts indexed by [`ResId`]; a missing entry is 0.
/// Entries kept inline: the well-known resources every pod and node has. A filter pass
/// reads them for hundreds of nodes per pod; inline, that is no pointer to chase (and no
/// cache miss) per node.
const INLINE: usize = WELL_KNOWN.len();

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResVec {
    small: [i64; INLINE],
    /// Extended resources (ids ≥ INLINE); empty (no allocation) for most objects.
    rest: Vec<i64>,
}

impl ResVec {
    pub fn from_amounts(a: &Amounts) -> ResVec {
        let mut v = ResVec::default();
        for (k, q) in a {
            v.set(intern(k), *q);
        }
        v
    }

    #[inline]
    pub fn get(&self, id: ResId) -> i64 {
        let i = id.0 as usize;
        match self.small.get(i) {
            Some(v) => *v,
            None => self.rest.get(i - INLINE).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, id: ResId, value: i64) {
        let i = id.0 as usize;
        if i < INLINE {
            self.small[i] = value;
            return;
        }
        let j = i - INLINE;
        if self.rest.len() <= j {
            self.rest.resize(j + 1, 0);
        }
        self.rest[j] = value;
    }

    fn zip_with(&mut self, other: &ResVec, f: impl Fn(i64, i64) -> i64) {
        for (a, b) in self.small.iter_mut().zip(&other.small) {
            *a = f(*a, *b);
        }
        if self.rest.len() < other.rest.len() {
            self.rest.resize(other.rest.len(), 0);
        }
        for (a, b) in self.rest.iter_mut().zip(&other.rest) {
            *a = f(*a, *b);
        }
    }

    /// Adds `other` entry by entry, saturating.
    pub fn add(&mut self, other: &ResVec) {
        self.zip_with(other, i64::saturating_add);
    }

    /// Subtracts `other` entry by entry, saturating.
    pub fn sub(&mut self, other: &ResVec) {
        self.zip_with(other, i64::saturating_sub);
    }

    /// Subtracts `other` entry by entry, floored at 0.
    pub fn sub_floored(&mut self, other: &ResVec) {
        self.zip_with(other, |a, b| a.saturating_sub(b).max(0));
    }

    /// Non-zero entries.
    pub fn iter(&self) -> impl Iterator<Item = (ResId, i64)> + '_ {
        self.small
            .iter()
            .chain(&self.rest)
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| (ResId(i as u16), *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_ids_are_fixed_and_names_round_trip() {
        assert_eq!(intern(CPU), R_CPU);
        assert_eq!(intern(PODS), R_PODS);
        let gpu = intern("nvidia.com/gpu");
        assert_eq!(intern("nvidia.com/gpu"), gpu);
        assert_eq!(name(gpu), "nvidia.com/gpu");
        assert_eq!(lookup("never-seen-resource"), None);
    }

    #[test]
    fn vectors_add_subtract_and_skip_zeroes() {
        let a: Amounts = [("cpu".into(), 500), ("example.com/x".into(), 2)].into();
        let mut v = ResVec::from_amounts(&a);
        v.add(&ResVec::from_amounts(&[("memory".into(), 7)].into()));
        assert_eq!((v.get(R_CPU), v.get(R_MEMORY)), (500, 7));
        v.sub(&ResVec::from_amounts(&[("cpu".into(), 600)].into()));
        assert_eq!(v.get(R_CPU), -100);
        v.set(R_MEMORY, 0);
        let names: Vec<String> = v.iter().map(|(id, _)| name(id)).collect();
        assert_eq!(names, ["cpu", "example.com/x"]);
        assert_eq!(v.get(ResId(999)), 0);
    }
}
