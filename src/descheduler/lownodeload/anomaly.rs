//! LowNodeLoad's anomaly detectors: a node is acted on only once it has been a source for
//! more than `consecutiveAbnormalities` passes in a row. The Anomaly state ends after
//! `timeout` or after more than `consecutiveNormalities` normal passes; a detector unseen
//! for `detectorCacheTimeout` is forgotten.

use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
struct Detector {
    abnormal: u32,
    normal: u32,
    anomaly_since_ms: Option<i64>,
    seen_ms: i64,
}

#[derive(Debug, Clone, Copy)]
pub struct Condition {
    pub timeout: Duration,
    pub consecutive_abnormalities: u32,
    pub consecutive_normalities: u32,
}

#[derive(Debug, Default)]
pub struct Detectors {
    by_key: HashMap<String, Detector>,
    cache_timeout_ms: i64,
}

impl Detectors {
    pub fn new(cache_timeout: Duration) -> Detectors {
        Detectors {
            by_key: HashMap::new(),
            cache_timeout_ms: cache_timeout.as_millis() as i64,
        }
    }

    fn entry(&mut self, key: &str, now_ms: i64, c: &Condition) -> &mut Detector {
        let ttl = self.cache_timeout_ms;
        self.by_key.retain(|_, d| now_ms - d.seen_ms <= ttl);
        let d = self.by_key.entry(key.to_string()).or_default();
        if let Some(since) = d.anomaly_since_ms
            && now_ms - since > c.timeout.as_millis() as i64
        {
            *d = Detector::default();
        }
        d.seen_ms = now_ms;
        d
    }

    /// Marks `key` abnormal for this pass; whether it is now in the Anomaly state.
    pub fn abnormal(&mut self, key: &str, now_ms: i64, c: &Condition) -> bool {
        if c.consecutive_abnormalities <= 1 {
            return true;
        }
        let d = self.entry(key, now_ms, c);
        d.normal = 0;
        d.abnormal += 1;
        if d.anomaly_since_ms.is_none() && d.abnormal > c.consecutive_abnormalities {
            d.anomaly_since_ms = Some(now_ms);
        }
        d.anomaly_since_ms.is_some()
    }

    /// Marks `key` normal for this pass.
    pub fn normal(&mut self, key: &str, now_ms: i64, c: &Condition) {
        let d = self.entry(key, now_ms, c);
        d.abnormal = 0;
        d.normal += 1;
        if d.normal > c.consecutive_normalities {
            *d = Detector {
                seen_ms: now_ms,
                ..Default::default()
            };
        }
    }

    /// Consecutive abnormal passes of `key` so far.
    pub fn count(&self, key: &str) -> u32 {
        self.by_key.get(key).map_or(0, |d| d.abnormal)
    }

    /// Whether `key` is in the Anomaly state.
    pub fn anomalous(&self, key: &str) -> bool {
        self.by_key
            .get(key)
            .is_some_and(|d| d.anomaly_since_ms.is_some())
    }

    /// Forgets `key` (a node that became a target, or was relieved).
    pub fn reset(&mut self, key: &str) {
        self.by_key.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Condition = Condition {
        timeout: Duration::from_secs(60),
        consecutive_abnormalities: 5,
        consecutive_normalities: 3,
    };

    #[test]
    fn the_sixth_abnormal_pass_acts_and_the_state_expires() {
        let mut d = Detectors::new(Duration::from_secs(300));
        let acted: Vec<bool> = (0..7).map(|i| d.abnormal("n", i * 1000, &C)).collect();
        assert_eq!(acted, [false, false, false, false, false, true, true]);
        // 61 s after the Anomaly began it is over: counting starts again.
        assert!(!d.abnormal("n", 5000 + 61_000, &C));
        // A normal pass breaks the run.
        let mut d = Detectors::new(Duration::from_secs(300));
        for i in 0..4 {
            d.abnormal("n", i, &C);
        }
        d.normal("n", 5, &C);
        assert!(!d.abnormal("n", 6, &C), "consecutive means consecutive");
        let once = Condition {
            consecutive_abnormalities: 1,
            ..C
        };
        assert!(d.abnormal("m", 0, &once), "1: act at once");
    }

    #[test]
    fn normal_passes_end_an_anomaly_and_unseen_detectors_are_forgotten() {
        let mut d = Detectors::new(Duration::from_secs(10));
        for i in 0..6 {
            d.abnormal("n", i, &C);
        }
        for i in 0..4 {
            d.normal("n", 10 + i, &C);
        }
        assert!(
            !d.abnormal("n", 20, &C),
            "4 normal passes (> 3) ended the anomaly"
        );
        for i in 0..6 {
            d.abnormal("k", i, &C);
        }
        assert!(
            !d.abnormal("k", 20_000, &C),
            "unseen for more than 10 s: forgotten"
        );
    }
}
