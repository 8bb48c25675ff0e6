//! The scheduling queue: an active heap ordered like PrioritySort (priority, then
//! creation, then name), per-pod exponential backoff, and an unschedulable pool that
//! cluster events (node added/updated, pod deleted, NodeMetric changed) or a 5-minute
//! stay move back.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::Backoff;
use super::framework::PodInfo;
use super::framework::events::Events;

/// Koordinator's reasons for clearing a gang scheduling context.
const GANG_ATTEMPTED: &str = "all pending pods is already been attempted";
const GANG_GONE: &str = "gang is nil, may be already deleted";

/// Observations kept for the metrics between drains (a queue nobody drains stays small).
const UNDRAINED_MAX: usize = 4096;

/// Upstream's maximum stay in the unschedulable pool.
pub const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(300);

struct Entry(Arc<PodInfo>);

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap pops the greatest: higher priority, earlier creation, smaller key.
        (
            self.0.priority,
            std::cmp::Reverse(self.0.created_ms),
            std::cmp::Reverse(&self.0.key),
        )
            .cmp(&(
                o.0.priority,
                std::cmp::Reverse(o.0.created_ms),
                std::cmp::Reverse(&o.0.key),
            ))
    }
}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Active,
    Backoff(Instant),
    /// Since when, the events that may let it fit and the plugins that rejected it (kept
    /// here too: a cluster event passes over the pods it cannot help, and asks the others'
    /// plugins, without a lookup per pod).
    Unschedulable(Instant, Events, Rejectors),
    Gated,
}

/// The plugins that rejected a pod, held inline (a cluster event reads them for each of
/// thousands of unschedulable pods); more than fit are looked up by the pod's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rejectors {
    names: [&'static str; 4],
    len: u8,
}

impl Rejectors {
    const UNKNOWN: u8 = u8::MAX;

    fn of(plugins: Option<&[&'static str]>) -> Rejectors {
        let mut r = Rejectors {
            names: [""; 4],
            len: 0,
        };
        match plugins {
            Some(p) if p.len() <= r.names.len() => {
                r.names[..p.len()].copy_from_slice(p);
                r.len = p.len() as u8;
            }
            Some(_) => r.len = Self::UNKNOWN,
            None => {}
        }
        r
    }

    /// The names, unless there were too many to hold.
    fn get(&self) -> Option<&[&'static str]> {
        (self.len != Self::UNKNOWN).then(|| &self.names[..self.len as usize])
    }
}

pub struct Queue {
    active: BinaryHeap<Entry>,
    pods: HashMap<String, (Arc<PodInfo>, Where)>,
    attempts: HashMap<String, u32>,
    backoff: Backoff,
    /// Pod keys by gang (stale keys are skipped), and the gang whose members go next:
    /// once one member is popped its siblings follow back to back, as Koordinator's gang
    /// scheduling context does, whatever else is queued.
    by_gang: HashMap<String, std::collections::BTreeSet<String>>,
    burst: Option<String>,
    /// The burst's start and how many members it took (Koordinator's gang scheduling
    /// context), and for the metrics: bursts ended (reason, members, seconds) and the
    /// time each sibling took to leave the queue, since the last drain.
    burst_started: Option<(Instant, usize)>,
    pub gang_cycles: Vec<(&'static str, usize, f64)>,
    pub next_pod_seconds: Vec<f64>,
    /// Pods per state (Active, Backoff, Unschedulable, Gated), kept with every change so
    /// the loop's per-iteration checks do not walk every pending pod.
    counts: [usize; 4],
    /// No backoff or unschedulable stay ends before this (a lower bound).
    earliest: Option<Instant>,
    /// For the metrics: each pod's first attempt, pods moved in by (queue, event) since
    /// the last drain, the plugins that left each pod unschedulable (profile, plugins),
    /// and a version bumped whenever the unschedulable set changes.
    first_attempt: HashMap<String, Instant>,
    incoming: HashMap<(&'static str, &'static str), u64>,
    unschedulable_by: HashMap<String, (String, Vec<&'static str>)>,
    /// The events the plugins that rejected each unschedulable pod registered for.
    hints: HashMap<String, Events>,
    pub unschedulable_version: u64,
}

impl Where {
    fn slot(self) -> usize {
        match self {
            Where::Active => 0,
            Where::Backoff(_) => 1,
            Where::Unschedulable(..) => 2,
            Where::Gated => 3,
        }
    }

    /// When this stay ends by itself.
    fn due(self) -> Option<Instant> {
        match self {
            Where::Backoff(until) => Some(until),
            Where::Unschedulable(since, ..) => Some(since + MAX_UNSCHEDULABLE),
            _ => None,
        }
    }
}

impl Queue {
    pub fn new(backoff: Backoff) -> Queue {
        Queue {
            active: BinaryHeap::new(),
            pods: HashMap::new(),
            attempts: HashMap::new(),
            backoff,
            by_gang: HashMap::new(),
            burst: None,
            burst_started: None,
            gang_cycles: Vec::new(),
            next_pod_seconds: Vec::new(),
            counts: [0; 4],
            earliest: None,
            first_attempt: HashMap::new(),
            incoming: HashMap::new(),
            unschedulable_by: HashMap::new(),
            hints: HashMap::new(),
            unschedulable_version: 0,
        }
    }

    fn note(&mut self, queue: &'static str, event: &'static str, n: usize) {
        if n > 0 {
            *self.incoming.entry((queue, event)).or_insert(0) += n as u64;
        }
    }

    /// Pods moved in by (queue, event) since the last call.
    pub fn drain_incoming(&mut self) -> Vec<((&'static str, &'static str), u64)> {
        self.incoming.drain().collect()
    }

    /// How many attempts `key` has had (this one counted) and when the first began.
    pub fn history(&self, key: &str) -> (u32, Option<Instant>) {
        let attempts = self.attempts.get(key).copied().unwrap_or(0) + 1;
        (attempts, self.first_attempt.get(key).copied())
    }

    /// Why `key` is unschedulable: its profile and the plugins that rejected it.
    pub fn set_unschedulable_by(&mut self, key: &str, profile: &str, plugins: Vec<&'static str>) {
        if let Some((_, Where::Unschedulable(_, _, r))) = self.pods.get_mut(key) {
            *r = Rejectors::of(Some(&plugins));
        }
        self.unschedulable_by
            .insert(key.to_string(), (profile.to_string(), plugins));
        self.unschedulable_version += 1;
    }

    /// The events that may let `key` fit (its rejecting plugins' registrations).
    pub fn set_hint(&mut self, key: &str, events: Events) {
        self.hints.insert(key.to_string(), events);
        if let Some((_, Where::Unschedulable(_, h, _))) = self.pods.get_mut(key) {
            *h = events;
        }
    }

    /// Unschedulable pods per (plugin, profile) (pods no longer unschedulable forgotten).
    pub fn unschedulable_by_plugin(&mut self) -> HashMap<(&'static str, String), i64> {
        let pods = &self.pods;
        self.unschedulable_by
            .retain(|k, _| matches!(pods.get(k), Some((_, Where::Unschedulable(..)))));
        let mut out = HashMap::new();
        for (profile, plugins) in self.unschedulable_by.values() {
            for p in plugins {
                *out.entry((*p, profile.clone())).or_insert(0) += 1;
            }
        }
        out
    }

    /// Counts a pod moving from `old` (if it was queued) to `new` (if it stays).
    fn moved(&mut self, old: Option<Where>, new: Option<Where>) {
        let unschedulable = |w: Option<Where>| matches!(w, Some(Where::Unschedulable(..)));
        if unschedulable(old) || unschedulable(new) {
            self.unschedulable_version += 1;
        }
        if let Some(o) = old {
            self.counts[o.slot()] -= 1;
        }
        if let Some(n) = new {
            self.counts[n.slot()] += 1;
            if let Some(due) = n.due() {
                self.earliest = Some(self.earliest.map_or(due, |e| e.min(due)));
            }
        }
    }

    fn put(&mut self, pod: Arc<PodInfo>, w: Where) {
        let old = self.pods.insert(pod.key.clone(), (pod, w)).map(|(_, o)| o);
        self.moved(old, Some(w));
    }

    fn take(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let (p, w) = self.pods.remove(key)?;
        self.moved(Some(w), None);
        Some(p)
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Pods per queue, as `scheduler_pending_pods` labels them.
    pub fn counts(&self) -> [(&'static str, usize); 4] {
        let c = self.counts;
        [
            ("active", c[0]),
            ("backoff", c[1]),
            ("unschedulable", c[2]),
            ("gated", c[3]),
        ]
    }

    pub fn has_active(&self) -> bool {
        self.counts[0] > 0
    }

    /// A pending pod from the watch: new pods go to the active queue; known ones keep their
    /// place with the new object (a gated pod is re-checked).
    pub fn add(&mut self, pod: Arc<PodInfo>) {
        let key = pod.key.clone();
        if let Some(g) = &pod.gang {
            self.by_gang
                .entry(g.clone())
                .or_default()
                .insert(key.clone());
        }
        match self.pods.get(&key).map(|(_, w)| *w) {
            None | Some(Where::Gated) => {
                self.note("active", "PodAdd", 1);
                self.put(pod.clone(), Where::Active);
                self.active.push(Entry(pod));
            }
            Some(w) => self.put(pod, w),
        }
    }

    /// A pending pod by key, wherever it waits.
    pub fn get(&self, key: &str) -> Option<&Arc<PodInfo>> {
        self.pods.get(key).map(|(p, _)| p)
    }

    /// Every pending pod, in no order.
    pub fn pending(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.pods.values().map(|(p, _)| p)
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(p) = self.take(key)
            && let Some(g) = &p.gang
            && let Some(set) = self.by_gang.get_mut(g)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_gang.remove(g);
            }
        }
        self.attempts.remove(key);
        self.first_attempt.remove(key);
        self.hints.remove(key);
    }

    /// A gang member scheduled inline with its group's first pod: out of the queue as if
    /// popped, wherever it waited (its attempts kept for its backoff).
    pub fn take_member(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let p = self.take(key)?;
        self.first_attempt
            .entry(p.key.clone())
            .or_insert_with(Instant::now);
        Some(p)
    }

    /// The next pod to schedule: an active sibling of the last gang pod first, else the
    /// head of the heap (stale heap entries are skipped).
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        let p = self.pop_next()?;
        self.first_attempt
            .entry(p.key.clone())
            .or_insert_with(Instant::now);
        Some(p)
    }

    fn pop_next(&mut self) -> Option<Arc<PodInfo>> {
        if let Some(p) = self.burst.clone().and_then(|g| self.pop_sibling(&g)) {
            return Some(p);
        }
        while let Some(Entry(p)) = self.active.pop() {
            if let Some((_, Where::Active)) = self.pods.get(&p.key) {
                // Popped pods leave the queue until they are requeued.
                let cur = self.take(&p.key)?;
                self.end_burst(GANG_ATTEMPTED);
                self.burst = cur.gang.clone();
                if self.burst.is_some() {
                    self.burst_started = Some((Instant::now(), 1));
                }
                return Some(cur);
            }
        }
        None
    }

    fn pop_sibling(&mut self, gang: &str) -> Option<Arc<PodInfo>> {
        let clock = Instant::now();
        let Some(keys) = self.by_gang.get(gang) else {
            self.end_burst(GANG_GONE);
            return None;
        };
        let key = keys
            .iter()
            .find(|k| matches!(self.pods.get(*k), Some((_, Where::Active))))
            .cloned();
        let Some(k) = key else {
            self.end_burst(GANG_ATTEMPTED);
            return None;
        };
        let p = self.take(&k)?;
        if self.next_pod_seconds.len() < UNDRAINED_MAX {
            self.next_pod_seconds.push(clock.elapsed().as_secs_f64());
        }
        if let Some((_, n)) = self.burst_started.as_mut() {
            *n += 1;
        }
        Some(p)
    }

    /// The gang burst is over (Koordinator clears its gang scheduling context).
    fn end_burst(&mut self, reason: &'static str) {
        self.burst = None;
        if let Some((at, n)) = self.burst_started.take()
            && self.gang_cycles.len() < UNDRAINED_MAX
        {
            self.gang_cycles
                .push((reason, n, at.elapsed().as_secs_f64()));
        }
    }

    fn backoff_for(&self, key: &str) -> Duration {
        backoff_after(self.backoff, self.attempts.get(key).copied())
    }

    fn bump(&mut self, key: &str) {
        *self.attempts.entry(key.to_string()).or_insert(0) += 1;
    }

    /// After an error (bind failure, reserve failure): retry after the backoff.
    pub fn requeue_backoff(&mut self, pod: Arc<PodInfo>, now: Instant) {
        self.bump(&pod.key);
        let until = now + self.backoff_for(&pod.key);
        self.note("backoff", "ScheduleAttemptFailure", 1);
        self.put(pod, Where::Backoff(until));
    }

    /// No node fits: wait for a cluster event (or the maximum stay).
    pub fn requeue_unschedulable(&mut self, pod: Arc<PodInfo>, now: Instant) {
        self.bump(&pod.key);
        self.note("unschedulable", "ScheduleAttemptFailure", 1);
        let hint = self.hints.get(&pod.key).copied().unwrap_or(Events::ALL);
        let by = self.unschedulable_by.get(&pod.key);
        let rejectors = Rejectors::of(by.map(|(_, p)| p.as_slice()));
        self.put(pod, Where::Unschedulable(now, hint, rejectors));
    }

    /// PreEnqueue refused it: wait for an update of the pod.
    pub fn gate(&mut self, pod: Arc<PodInfo>) {
        self.put(pod, Where::Gated);
    }

    /// Something PreEnqueue reads changed (a gang's members, a PodGroup): gated pods are
    /// checked again.
    pub fn ungate_all(&mut self) {
        if self.counts[3] == 0 {
            return;
        }
        let mut activate = Vec::new();
        for (pod, w) in self.pods.values_mut() {
            if *w == Where::Gated {
                *w = Where::Active;
                activate.push(pod.clone());
            }
        }
        self.counts[3] -= activate.len();
        self.counts[0] += activate.len();
        self.note("active", "PodUpdate", activate.len());
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// A cluster event that may make unschedulable pods fit: they go back to the active
    /// queue, or to backoff while their backoff lasts.
    pub fn on_cluster_event(&mut self, now: Instant) {
        self.on_event(now, Events::ALL, |_, _| true);
    }

    /// A cluster event of `kind`: the unschedulable pods whose rejecting plugins registered
    /// for it and whose hint (`may_help`, given the pod and those plugins) says it may let
    /// them fit go back, as [`Queue::on_cluster_event`] moves them; the rest stay.
    pub fn on_event(
        &mut self,
        now: Instant,
        kind: Events,
        mut may_help: impl FnMut(&PodInfo, &[&'static str]) -> bool,
    ) {
        if self.counts[2] == 0 {
            return;
        }
        let mut activate = Vec::new();
        let mut backoff = Vec::new();
        let (cfg, attempts) = (self.backoff, &self.attempts);
        let by = &self.unschedulable_by;
        for (key, (pod, w)) in self.pods.iter_mut() {
            if let Where::Unschedulable(since, hint, rejectors) = &*w {
                let since = *since;
                if !hint.contains(kind) {
                    continue;
                }
                let plugins = match rejectors.get() {
                    Some(p) => p,
                    None => by.get(key).map(|(_, p)| p.as_slice()).unwrap_or(&[]),
                };
                if !may_help(pod, plugins) {
                    continue;
                }
                let until = since + backoff_after(cfg, attempts.get(key).copied());
                if until > now {
                    *w = Where::Backoff(until);
                    backoff.push(until);
                } else {
                    *w = Where::Active;
                    activate.push(pod.clone());
                }
            }
        }
        if activate.is_empty() && backoff.is_empty() {
            return;
        }
        self.note("backoff", "ClusterEvent", backoff.len());
        for until in backoff {
            self.moved(
                Some(Where::Unschedulable(now, Events::ALL, Rejectors::of(None))),
                Some(Where::Backoff(until)),
            );
        }
        self.counts[2] -= activate.len();
        self.counts[0] += activate.len();
        self.unschedulable_version += 1;
        self.note("active", "ClusterEvent", activate.len());
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// Moves finished backoffs and over-long unschedulable stays to the active queue.
    /// Walks the pods only when a stay may have ended (`earliest`), so the loop's call on
    /// every iteration is free while nothing is due.
    pub fn flush(&mut self, now: Instant) {
        if self.counts[1] + self.counts[2] == 0 {
            self.earliest = None;
            return;
        }
        if self.earliest.is_some_and(|e| now < e) {
            return;
        }
        let mut activate = Vec::new();
        let mut earliest: Option<Instant> = None;
        let mut moved = [0usize; 4];
        for (pod, w) in self.pods.values_mut() {
            match w.due() {
                Some(due) if due <= now => {
                    moved[w.slot()] += 1;
                    *w = Where::Active;
                    activate.push(pod.clone());
                }
                Some(due) => earliest = Some(earliest.map_or(due, |e| e.min(due))),
                None => {}
            }
        }
        self.counts[1] -= moved[1];
        self.counts[2] -= moved[2];
        self.counts[0] += activate.len();
        self.note("active", "BackoffComplete", moved[1]);
        self.note("active", "UnschedulableTimeout", moved[2]);
        self.unschedulable_version += (moved[2] > 0) as u64;
        self.earliest = earliest;
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// When the next backoff or maximum stay ends.
    pub fn next_wakeup(&self) -> Option<Instant> {
        if self.counts[1] + self.counts[2] == 0 {
            return None;
        }
        self.earliest
    }
}

/// Initial × 2^(attempts−1), capped at the maximum.
fn backoff_after(cfg: Backoff, attempts: Option<u32>) -> Duration {
    let n = attempts.unwrap_or(1).max(1);
    let secs = (cfg.initial_seconds as u64).saturating_mul(1u64 << (n - 1).min(20));
    Duration::from_secs(secs.min(cfg.max_seconds as u64))
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
