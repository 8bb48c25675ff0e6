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
    Unschedulable(Instant),
    Gated,
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
        }
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Pods per queue, as `scheduler_pending_pods` labels them.
    pub fn counts(&self) -> [(&'static str, usize); 4] {
        let mut c = [0usize; 4];
        for (_, w) in self.pods.values() {
            c[match w {
                Where::Active => 0,
                Where::Backoff(_) => 1,
                Where::Unschedulable(_) => 2,
                Where::Gated => 3,
            }] += 1;
        }
        [
            ("active", c[0]),
            ("backoff", c[1]),
            ("unschedulable", c[2]),
            ("gated", c[3]),
        ]
    }

    pub fn has_active(&self) -> bool {
        self.pods.values().any(|(_, w)| *w == Where::Active)
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
                self.pods.insert(key, (pod.clone(), Where::Active));
                self.active.push(Entry(pod));
            }
            Some(w) => {
                self.pods.insert(key, (pod, w));
            }
        }
    }

    pub fn remove(&mut self, key: &str) {
        if let Some((p, _)) = self.pods.remove(key)
            && let Some(g) = &p.gang
            && let Some(set) = self.by_gang.get_mut(g)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_gang.remove(g);
            }
        }
        self.attempts.remove(key);
    }

    /// The next pod to schedule: an active sibling of the last gang pod first, else the
    /// head of the heap (stale heap entries are skipped).
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        if let Some(p) = self.burst.clone().and_then(|g| self.pop_sibling(&g)) {
            return Some(p);
        }
        while let Some(Entry(p)) = self.active.pop() {
            if let Some((cur, Where::Active)) = self.pods.get(&p.key) {
                let cur = cur.clone();
                // Popped pods leave the queue until they are requeued.
                self.pods.remove(&p.key);
                self.burst = cur.gang.clone();
                return Some(cur);
            }
        }
        None
    }

    fn pop_sibling(&mut self, gang: &str) -> Option<Arc<PodInfo>> {
        let keys = self.by_gang.get(gang)?;
        let key = keys
            .iter()
            .find(|k| matches!(self.pods.get(*k), Some((_, Where::Active))))
            .cloned();
        match key {
            Some(k) => self.pods.remove(&k).map(|(p, _)| p),
            None => {
                self.burst = None;
                None
            }
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
        self.pods
            .insert(pod.key.clone(), (pod, Where::Backoff(until)));
    }

    /// No node fits: wait for a cluster event (or the maximum stay).
    pub fn requeue_unschedulable(&mut self, pod: Arc<PodInfo>, now: Instant) {
        self.bump(&pod.key);
        self.pods
            .insert(pod.key.clone(), (pod, Where::Unschedulable(now)));
    }

    /// PreEnqueue refused it: wait for an update of the pod.
    pub fn gate(&mut self, pod: Arc<PodInfo>) {
        self.pods.insert(pod.key.clone(), (pod, Where::Gated));
    }

    /// Something PreEnqueue reads changed (a gang's members, a PodGroup): gated pods are
    /// checked again.
    pub fn ungate_all(&mut self) {
        let mut activate = Vec::new();
        for (pod, w) in self.pods.values_mut() {
            if *w == Where::Gated {
                *w = Where::Active;
                activate.push(pod.clone());
            }
        }
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// A cluster event that may make unschedulable pods fit: they go back to the active
    /// queue, or to backoff while their backoff lasts.
    pub fn on_cluster_event(&mut self, now: Instant) {
        let mut activate = Vec::new();
        let (cfg, attempts) = (self.backoff, &self.attempts);
        for (key, (pod, w)) in self.pods.iter_mut() {
            if let Where::Unschedulable(since) = *w {
                let until = since + backoff_after(cfg, attempts.get(key).copied());
                if until > now {
                    *w = Where::Backoff(until);
                } else {
                    *w = Where::Active;
                    activate.push(pod.clone());
                }
            }
        }
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// Moves finished backoffs and over-long unschedulable stays to the active queue.
    pub fn flush(&mut self, now: Instant) {
        let mut activate = Vec::new();
        for (pod, w) in self.pods.values_mut() {
            let due = match *w {
                Where::Backoff(until) => until <= now,
                Where::Unschedulable(since) => now.duration_since(since) >= MAX_UNSCHEDULABLE,
                _ => false,
            };
            if due {
                *w = Where::Active;
                activate.push(pod.clone());
            }
        }
        self.active.extend(activate.into_iter().map(Entry));
    }

    /// When the next backoff or maximum stay ends.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.pods
            .values()
            .filter_map(|(_, w)| match *w {
                Where::Backoff(until) => Some(until),
                Where::Unschedulable(since) => Some(since + MAX_UNSCHEDULABLE),
                _ => None,
            })
            .min()
    }
}

/// Initial × 2^(attempts−1), capped at the maximum.
fn backoff_after(cfg: Backoff, attempts: Option<u32>) -> Duration {
    let n = attempts.unwrap_or(1).max(1);
    let secs = (cfg.initial_seconds as u64).saturating_mul(1u64 << (n - 1).min(20));
    Duration::from_secs(secs.min(cfg.max_seconds as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::pod;
    use serde_json::json;

    fn p(name: &str, prio: i32, created: &str) -> Arc<PodInfo> {
        Arc::new(pod(
            json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": created},
            "spec": {"priority": prio, "containers": [{"name": "c"}]}}),
        ))
    }

    #[test]
    fn a_gangs_members_go_back_to_back() {
        let mut q = Queue::new(Backoff {
            initial_seconds: 1,
            max_seconds: 10,
        });
        let member = |name: &str, created: &str| {
            Arc::new(pod(
                json!({"metadata": {"name": name, "namespace": "d", "creationTimestamp": created,
                "annotations": {"gang.scheduling.koordinator.sh/name": "g"}},
                "spec": {"containers": [{"name": "c"}]}}),
            ))
        };
        q.add(member("g-a", "2026-01-01T00:00:00Z"));
        q.add(p("other", 0, "2026-01-01T00:00:01Z"));
        q.add(member("g-b", "2026-01-01T00:00:02Z"));
        let order: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(order, ["g-a", "g-b", "other"], "g-b follows g-a");
    }

    #[test]
    fn order_backoff_and_events() {
        let mut q = Queue::new(Backoff {
            initial_seconds: 1,
            max_seconds: 10,
        });
        q.add(p("low", 1, "2026-01-01T00:00:00Z"));
        q.add(p("late", 5, "2026-01-01T00:00:09Z"));
        q.add(p("early", 5, "2026-01-01T00:00:01Z"));
        let order: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(order, ["early", "late", "low"]);
        let t0 = Instant::now();
        let x = p("x", 1, "2026-01-01T00:00:00Z");
        q.requeue_backoff(x.clone(), t0);
        assert!(q.pop().is_none());
        q.flush(t0 + Duration::from_millis(999));
        assert!(q.pop().is_none(), "1 s backoff");
        q.flush(t0 + Duration::from_secs(1));
        assert_eq!(q.pop().unwrap().name, "x");
        q.requeue_backoff(x.clone(), t0);
        assert_eq!(
            q.next_wakeup(),
            Some(t0 + Duration::from_secs(2)),
            "doubles"
        );
        q.remove("d/x");
        let u = p("u", 1, "2026-01-01T00:00:00Z");
        q.requeue_unschedulable(u.clone(), t0);
        q.on_cluster_event(t0 + Duration::from_secs(5));
        assert_eq!(
            q.pop().unwrap().name,
            "u",
            "a cluster event re-activates it"
        );
        q.requeue_unschedulable(u, t0);
        q.flush(t0 + MAX_UNSCHEDULABLE);
        assert_eq!(q.pop().unwrap().name, "u", "the maximum stay ends");
    }
}
