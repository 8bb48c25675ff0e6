//! The checker of a recorded history (as etcd's `tests/robustness` validation): what every
//! client invoked and got back, and what every watcher saw, against the rules a
//! kube-apiserver backed by etcd keeps.
//!
//! Every write puts a value no other write puts, so an observed value names its write.
//! Updates and deletes carry the resourceVersion they read as a precondition, so each
//! acknowledged one names the version it replaced. From acknowledgements and observations
//! the checker learns "facts" (revision → key, put value or delete) and checks:
//! - one revision names one change, one value one revision, no value nobody wrote;
//! - real time: a write acknowledged before another operation started has a lower
//!   revision than the other's write and is seen by its list or get (linearizable);
//! - preconditions: an update acknowledged from version p has no change of its key
//!   between p and its own revision, no two acknowledged writes replace the same version,
//!   and a create does not land on a live object;
//! - a list at revision R shows exactly the state at R; an `Exact` list at R equals
//!   every other list at R;
//! - each watch delivers, between where it started and its last event, every known change
//!   of its keys once, in order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

pub type Key = String;
/// A list's items: name → (value, resourceVersion).
pub type Listing = BTreeMap<Key, (String, u64)>;

#[derive(Clone, Debug)]
pub enum Call {
    Create { key: Key, value: String },
    Update { key: Key, value: String, from: u64 },
    Delete { key: Key, from: u64 },
    Get { key: Key },
    List,
    ListExact { at: u64 },
}

#[derive(Clone, Debug)]
pub enum Outcome {
    /// A put acknowledged at this revision.
    Wrote(u64),
    /// A delete acknowledged.
    Deleted,
    /// Refused with a 4xx: it changed nothing.
    Refused,
    /// No answer (the server was killed): it may or may not have happened.
    Unknown,
    Got(Option<(String, u64)>),
    Listed {
        rv: u64,
        items: Listing,
    },
    /// 410: the history no longer reaches the revision asked for.
    Gone,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub call: Call,
    pub outcome: Outcome,
    pub invoked: Instant,
    pub returned: Instant,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Put(String),
    Delete,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub key: Key,
    pub change: Change,
    pub rv: u64,
}

/// What one watcher saw from one starting revision until it had to list again.
#[derive(Clone, Debug, Default)]
pub struct Segment {
    pub watcher: usize,
    pub from: u64,
    pub events: Vec<Event>,
}

#[derive(Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
    pub segments: Vec<Segment>,
}

/// Violations, each a sentence naming the operation and revisions; empty when the history
/// is one a correct server could have produced.
pub fn check(h: &History) -> Vec<String> {
    let mut v = Vec::new();
    let facts = Facts::learn(h, &mut v);
    real_time(h, &facts, &mut v);
    preconditions(h, &facts, &mut v);
    lists(h, &facts, &mut v);
    exact_lists(h, &mut v);
    watches(h, &facts, &mut v);
    v
}

/// The changes known to have happened, by revision and by key.
#[derive(Default)]
pub struct Facts {
    by_rv: BTreeMap<u64, (Key, Change)>,
    by_key: HashMap<Key, BTreeMap<u64, Change>>,
    value_rv: HashMap<String, u64>,
    /// Deletes that may have happened (acknowledged or unanswered): key → versions deleted.
    deletes: HashMap<Key, BTreeSet<u64>>,
}

impl Facts {
    fn learn(h: &History, v: &mut Vec<String>) -> Facts {
        let mut f = Facts::default();
        let written: BTreeSet<&str> = h
            .ops
            .iter()
            .filter_map(|op| match &op.call {
                Call::Create { value, .. } | Call::Update { value, .. } => Some(value.as_str()),
                _ => None,
            })
            .collect();
        let put =
            |f: &mut Facts, v: &mut Vec<String>, key: &Key, value: &String, rv: u64, what: &str| {
                if !written.contains(value.as_str()) {
                    v.push(format!("{what}: {key}={value} at {rv} was never written"));
                }
                f.add(rv, key, Change::Put(value.clone()), what, v);
            };
        for op in &h.ops {
            let what = format!("client {} {:?}", op.client, op.call);
            match (&op.call, &op.outcome) {
                (
                    Call::Create { key, value } | Call::Update { key, value, .. },
                    Outcome::Wrote(rv),
                ) => put(&mut f, v, key, value, *rv, &what),
                (Call::Get { key }, Outcome::Got(Some((value, rv)))) => {
                    put(&mut f, v, key, value, *rv, &what)
                }
                (_, Outcome::Listed { items, .. }) => {
                    for (key, (value, rv)) in items {
                        put(&mut f, v, key, value, *rv, &what);
                    }
                }
                (Call::Delete { key, from }, Outcome::Deleted | Outcome::Unknown) => {
                    f.deletes.entry(key.clone()).or_default().insert(*from);
                }
                _ => {}
            }
        }
        for s in &h.segments {
            for e in &s.events {
                let what = format!("watcher {} event {:?}", s.watcher, e);
                match &e.change {
                    Change::Put(value) => put(&mut f, v, &e.key, value, e.rv, &what),
                    Change::Delete => f.add(e.rv, &e.key, Change::Delete, &what, v),
                }
            }
        }
        f
    }

    fn add(&mut self, rv: u64, key: &Key, change: Change, what: &str, v: &mut Vec<String>) {
        if let Change::Put(value) = &change
            && let Some(&seen) = self.value_rv.get(value)
            && seen != rv
        {
            v.push(format!(
                "{what}: value {value} seen at revisions {seen} and {rv}"
            ));
        }
        if let Change::Put(value) = &change {
            self.value_rv.insert(value.clone(), rv);
        }
        match self.by_rv.get(&rv) {
            Some((k, c)) if (k, c) != (key, &change) => v.push(format!(
                "{what}: revision {rv} names two changes: {k} {c:?} and {key} {change:?}"
            )),
            Some(_) => {}
            None => {
                self.by_rv.insert(rv, (key.clone(), change.clone()));
                self.by_key
                    .entry(key.clone())
                    .or_default()
                    .insert(rv, change);
            }
        }
    }

    fn chain(&self, key: &str) -> Option<&BTreeMap<u64, Change>> {
        self.by_key.get(key)
    }

    /// The last known change of `key` at or below `rv`.
    fn at(&self, key: &str, rv: u64) -> Option<(u64, &Change)> {
        self.chain(key)?
            .range(..=rv)
            .next_back()
            .map(|(r, c)| (*r, c))
    }

    /// The first known change of `key` above `rv`.
    fn after(&self, key: &str, rv: u64) -> Option<(u64, &Change)> {
        self.chain(key)?
            .range(rv + 1..)
            .next()
            .map(|(r, c)| (*r, c))
    }

    /// Whether version `p` of `key` may have been deleted by a change no one saw: a delete
    /// of it (or of a later version no one saw) was sent, and the change after `p` is not
    /// a known put or delete.
    fn unseen_delete(&self, key: &str, p: u64) -> bool {
        let sent = self
            .deletes
            .get(key)
            .is_some_and(|d| d.range(p..).next().is_some());
        sent && !matches!(self.after(key, p), Some((_, Change::Delete)))
    }
}

/// The state of `key` a read at revision `rv` must show: `Ok(None)` absent, `Ok(Some(p))`
/// version p, `Err(p)` either version p or absent (deleted by a change no one saw).
fn state_at(f: &Facts, key: &str, rv: u64) -> Result<Option<u64>, u64> {
    match f.at(key, rv) {
        None | Some((_, Change::Delete)) => Ok(None),
        Some((p, Change::Put(_))) if f.unseen_delete(key, p) => Err(p),
        Some((p, Change::Put(_))) => Ok(Some(p)),
    }
}

/// Operations in the order they started, each checked against the highest revision
/// acknowledged or observed before it started (its floor) and, for reads, the lowest
/// revision written by an operation started after it returned (its ceiling): a read
/// happens at one revision in between.
fn real_time(h: &History, f: &Facts, v: &mut Vec<String>) {
    let ceiling = Ceiling::new(h);
    let mut done: Vec<(Instant, u64)> = h
        .ops
        .iter()
        .filter_map(|op| match &op.outcome {
            Outcome::Wrote(rv) => Some((op.returned, *rv)),
            Outcome::Got(Some((_, rv))) => Some((op.returned, *rv)),
            Outcome::Listed { rv, .. } if matches!(op.call, Call::List) => Some((op.returned, *rv)),
            _ => None,
        })
        .collect();
    done.sort();
    let mut order: Vec<&Op> = h.ops.iter().collect();
    order.sort_by_key(|op| op.invoked);
    let (mut next, mut floor) = (0, 0u64);
    for op in order {
        while next < done.len() && done[next].0 < op.invoked {
            floor = floor.max(done[next].1);
            next += 1;
        }
        let ceil = ceiling.after(op.returned);
        let what = format!("client {} {:?}", op.client, op.call);
        match (&op.call, &op.outcome) {
            (_, Outcome::Wrote(rv)) if *rv <= floor => v.push(format!(
                "{what}: acknowledged at {rv}, not above revision {floor} acknowledged before it started"
            )),
            (Call::List, Outcome::Listed { rv, .. }) if *rv < floor || *rv >= ceil => {
                v.push(format!(
                    "{what}: listed at {rv}, outside [{floor}, {ceil}) (acknowledged before it started, written after it returned)"
                ))
            }
            (Call::Get { key }, Outcome::Got(seen)) => get(f, key, seen, (floor, ceil), &what, v),
            _ => {}
        }
    }
}

/// A get read `key` at some revision in [floor, ceil).
fn get(
    f: &Facts,
    key: &str,
    seen: &Option<(String, u64)>,
    (floor, ceil): (u64, u64),
    what: &str,
    v: &mut Vec<String>,
) {
    match seen {
        Some((_, r)) if *r >= ceil => v.push(format!(
            "{what}: read version {r}, written by an operation started after the read returned (revision {ceil})"
        )),
        Some((_, r)) => {
            if let Some((n, c)) = f.after(key, *r)
                && n <= floor
            {
                v.push(format!(
                    "{what}: read version {r}, but {key} had changed at {n} ({c:?}) before the read started (revision {floor} was acknowledged)"
                ));
            }
        }
        None => {
            let deleted = f
                .chain(key)
                .is_some_and(|c| c.range(floor + 1..ceil).any(|(_, c)| *c == Change::Delete));
            if let Ok(Some(p)) = state_at(f, key, floor)
                && !deleted
            {
                v.push(format!(
                    "{what}: not found, but {key} was at version {p} before the read started and was not deleted before [{floor}, {ceil})"
                ));
            }
        }
    }
}

/// For a time, the lowest revision acknowledged to a write started after it.
struct Ceiling {
    /// (invoked, min rv of writes invoked at or after), sorted by time.
    suffix: Vec<(Instant, u64)>,
}

impl Ceiling {
    fn new(h: &History) -> Ceiling {
        let mut writes: Vec<(Instant, u64)> = h
            .ops
            .iter()
            .filter_map(|op| match op.outcome {
                Outcome::Wrote(rv) => Some((op.invoked, rv)),
                _ => None,
            })
            .collect();
        writes.sort();
        let mut min = u64::MAX;
        for w in writes.iter_mut().rev() {
            min = min.min(w.1);
            w.1 = min;
        }
        Ceiling { suffix: writes }
    }

    fn after(&self, t: Instant) -> u64 {
        let i = self.suffix.partition_point(|(at, _)| *at <= t);
        self.suffix.get(i).map_or(u64::MAX, |w| w.1)
    }
}

fn preconditions(h: &History, f: &Facts, v: &mut Vec<String>) {
    for op in &h.ops {
        let what = format!("client {} {:?}", op.client, op.call);
        match (&op.call, &op.outcome) {
            (Call::Update { key, from, .. }, Outcome::Wrote(rv)) => {
                if let Some((n, c)) = f.after(key, *from)
                    && n < *rv
                {
                    v.push(format!(
                        "{what}: acknowledged at {rv} from version {from}, but {key} changed between them at {n} ({c:?})"
                    ));
                }
            }
            (Call::Create { key, .. }, Outcome::Wrote(rv)) => {
                if let Ok(Some(p)) = state_at(f, key, rv - 1) {
                    v.push(format!(
                        "{what}: created at {rv} while {key} existed at version {p}"
                    ));
                }
            }
            _ => {}
        }
    }
    replaced_once(h, v);
}

/// Two acknowledged updates or deletes from the same version of a key: one of them was
/// applied to a version that was no longer there (a lost update).
fn replaced_once(h: &History, v: &mut Vec<String>) {
    let mut by: HashMap<(&str, u64), &Op> = HashMap::new();
    for op in &h.ops {
        let (key, from) = match (&op.call, &op.outcome) {
            (Call::Update { key, from, .. }, Outcome::Wrote(_))
            | (Call::Delete { key, from }, Outcome::Deleted) => (key.as_str(), *from),
            _ => continue,
        };
        if let Some(first) = by.insert((key, from), op) {
            v.push(format!(
                "client {} {:?} and client {} {:?}: both acknowledged from version {from} of {key}",
                first.client, first.call, op.client, op.call
            ));
        }
    }
}

/// Every list (plain or `Exact`) shows the state at its revision.
fn lists(h: &History, f: &Facts, v: &mut Vec<String>) {
    let keys: BTreeSet<&Key> = f.by_key.keys().collect();
    for op in &h.ops {
        let Outcome::Listed { rv, items } = &op.outcome else {
            continue;
        };
        let what = format!("client {} {:?} at {rv}", op.client, op.call);
        for key in &keys {
            let shown = items.get(*key).map(|(_, r)| *r);
            match (state_at(f, key, *rv), shown) {
                (Ok(want), got) if want != got => v.push(format!(
                    "{what}: {key} shown at {got:?}, the history has it at {want:?}"
                )),
                (Err(p), Some(got)) if got != p => v.push(format!(
                    "{what}: {key} shown at {got}, the history has it at {p} or deleted"
                )),
                _ => {}
            }
        }
    }
}

/// Lists at the same revision agree, whatever asked for them.
fn exact_lists(h: &History, v: &mut Vec<String>) {
    let mut at: BTreeMap<u64, (&Listing, &Op)> = BTreeMap::new();
    for op in &h.ops {
        let Outcome::Listed { rv, items } = &op.outcome else {
            continue;
        };
        match at.get(rv) {
            Some((seen, first)) if *seen != items => v.push(format!(
                "client {} {:?}: lists at {rv} differ: {:?} (client {} {:?}) and {:?}",
                op.client, op.call, seen, first.client, first.call, items
            )),
            Some(_) => {}
            None => {
                at.insert(*rv, (items, op));
            }
        }
        if let Call::ListExact { at: want } = op.call
            && want != *rv
        {
            v.push(format!(
                "client {} ListExact at {want}: answered at {rv}",
                op.client
            ));
        }
    }
}

/// Each watch segment: revisions strictly increasing, and every known change of the keys
/// in (start, last event] delivered.
fn watches(h: &History, f: &Facts, v: &mut Vec<String>) {
    for s in &h.segments {
        let what = format!("watcher {} from {}", s.watcher, s.from);
        let mut last = s.from;
        for e in &s.events {
            if e.rv <= last {
                v.push(format!(
                    "{what}: event {e:?} not above the previous revision {last}"
                ));
            }
            last = last.max(e.rv);
        }
        let seen: BTreeSet<u64> = s.events.iter().map(|e| e.rv).collect();
        for (rv, (key, change)) in f.by_rv.range(s.from + 1..=last) {
            if !seen.contains(rv) {
                v.push(format!(
                    "{what}: missed {key} {change:?} at {rv} (it saw up to {last})"
                ));
            }
        }
    }
}
