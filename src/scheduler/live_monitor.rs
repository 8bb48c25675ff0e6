//! Koordinator's scheduler monitor (`frameworkext/scheduler_monitor.go`): every pod from
//! its attempt's start until it is bound or given up (a Permit wait and the binding
//! included); one in flight longer than `--scheduling-timeout` is logged and counted in
//! `scheduler_scheduling_timeout{profile}` at each check (`--scheduler-monitor-period`)
//! and once more when it completes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Scheduler;

pub struct Monitor {
    timeout: Duration,
    period: Duration,
    /// Pod key → when its attempt started, and its scheduler name.
    in_flight: HashMap<String, (Instant, String)>,
    next_check: Option<Instant>,
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor::new(Duration::from_secs(30), Duration::from_secs(10))
    }
}

impl Monitor {
    pub fn new(timeout: Duration, period: Duration) -> Monitor {
        Monitor {
            timeout,
            period,
            in_flight: HashMap::new(),
            next_check: None,
        }
    }

    pub fn start(&mut self, key: &str, profile: &str, now: Instant) {
        self.in_flight
            .insert(key.to_string(), (now, profile.to_string()));
        self.next_check.get_or_insert(now + self.period);
    }

    /// The pod's scheduling is over: its profile when it took longer than the timeout.
    pub fn complete(&mut self, key: &str, now: Instant) -> Option<(String, Duration)> {
        let (start, profile) = self.in_flight.remove(key)?;
        let took = now.duration_since(start);
        (took > self.timeout).then_some((profile, took))
    }

    /// When due: every pod in flight past the timeout (key, profile, how long so far).
    pub fn check(&mut self, now: Instant) -> Vec<(String, String, Duration)> {
        match self.next_check {
            Some(at) if at <= now => {}
            _ => return Vec::new(),
        }
        self.next_check = (!self.in_flight.is_empty()).then_some(now + self.period);
        let mut late: Vec<_> = self
            .in_flight
            .iter()
            .map(|(k, (start, profile))| (k.clone(), profile.clone(), now.duration_since(*start)))
            .filter(|(.., took)| *took > self.timeout)
            .collect();
        late.sort();
        late
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.next_check
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl Scheduler {
    pub(super) fn monitor_complete(&mut self, key: &str) {
        if let Some((profile, took)) = self.monitor.complete(key, Instant::now()) {
            self.timed_out(key, &profile, took);
        }
    }

    /// Counts the pods in flight past the timeout, when a check is due; the next check.
    pub(super) fn monitor_tick(&mut self, now: Instant) -> Option<Instant> {
        for (key, profile, took) in self.monitor.check(now) {
            self.timed_out(&key, &profile, took);
        }
        self.monitor.next_wakeup()
    }

    fn timed_out(&self, key: &str, profile: &str, took: Duration) {
        tracing::warn!(
            pod = %key,
            took = ?took,
            timeout = ?self.monitor.timeout(),
            "!!!CRITICAL TIMEOUT!!! scheduling pod took longer than the timeout"
        );
        self.metrics.pods.timed_out(profile);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_in_flight_past_the_timeout_counts_at_each_check_and_at_its_end() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut m = Monitor::new(s(30), s(10));
        m.start("d/slow", "koord-scheduler", t0);
        m.start("d/fast", "koord-scheduler", t0);
        assert_eq!(m.complete("d/fast", t0 + s(2)), None);
        assert!(m.check(t0 + s(5)).is_empty(), "not due");
        assert!(
            m.check(t0 + s(10)).is_empty(),
            "due, but within the timeout"
        );
        let late = m.check(t0 + s(31));
        assert_eq!(late, [("d/slow".into(), "koord-scheduler".into(), s(31))]);
        assert!(
            m.check(t0 + s(35)).is_empty(),
            "the next check is 10 s later"
        );
        assert_eq!(m.check(t0 + s(41)).len(), 1);
        let done = m.complete("d/slow", t0 + s(45));
        assert_eq!(done, Some(("koord-scheduler".into(), s(45))));
        assert!(m.complete("d/slow", t0 + s(46)).is_none(), "once");
        assert!(m.check(t0 + s(60)).is_empty());
        assert_eq!(m.next_wakeup(), None, "nothing in flight: no more checks");
    }
}
