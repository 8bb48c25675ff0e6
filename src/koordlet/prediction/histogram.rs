//! Decaying histograms with exponential buckets (the VPA design Koordinator reuses): a
//! sample's weight doubles every half-life after the reference time, so recent usage
//! dominates; the reference is shifted in whole half-lives before weights overflow.

use serde::{Deserialize, Serialize};

/// Exponential bucket boundaries: bucket `i` starts at `first·(ratioⁱ − 1)/(ratio − 1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    first: f64,
    ratio: f64,
    count: usize,
}

impl Buckets {
    pub fn exponential(max: f64, first: f64, ratio: f64) -> Buckets {
        let count = ((max * (ratio - 1.0) / first + 1.0).ln() / ratio.ln()).ceil() as usize + 1;
        Buckets {
            first,
            ratio,
            count,
        }
    }

    /// CPU cores: up to 1024, first bucket 0.025, growth 1.05.
    pub fn cpu() -> Buckets {
        Self::exponential(1024.0, 0.025, 1.05)
    }

    /// Memory bytes: up to 2 TiB, first bucket 5 MiB, growth 1.05.
    pub fn memory() -> Buckets {
        Self::exponential((1u64 << 41) as f64, 5.0 * 1024.0 * 1024.0, 1.05)
    }

    pub fn start(&self, i: usize) -> f64 {
        if i == 0 {
            0.0
        } else {
            self.first * (self.ratio.powi(i as i32) - 1.0) / (self.ratio - 1.0)
        }
    }

    pub fn find(&self, v: f64) -> usize {
        if v < self.first {
            return 0;
        }
        let i =
            ((v * (self.ratio - 1.0) / self.first + 1.0).ln() / self.ratio.ln()).floor() as usize;
        i.min(self.count - 1)
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

const MAX_DECAY_EXPONENT: f64 = 100.0;
const EPSILON: f64 = 1e-4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecayingHistogram {
    /// Sparse (bucket, weight) pairs.
    weights: Vec<(usize, f64)>,
    total: f64,
    /// Reference time, seconds.
    reference: i64,
    half_life: i64,
}

impl DecayingHistogram {
    pub fn new(half_life_secs: i64) -> Self {
        DecayingHistogram {
            weights: Vec::new(),
            total: 0.0,
            reference: 0,
            half_life: half_life_secs.max(1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total < EPSILON
    }

    fn shift_reference(&mut self, to: i64) {
        let halves = (to - self.reference) / self.half_life;
        if halves <= 0 {
            return;
        }
        let factor = 2f64.powi(-(halves as i32));
        for (_, w) in &mut self.weights {
            *w *= factor;
        }
        self.total *= factor;
        self.reference += halves * self.half_life;
        self.weights.retain(|(_, w)| *w >= EPSILON * EPSILON);
    }

    pub fn add(&mut self, buckets: &Buckets, value: f64, weight: f64, time: i64) {
        if self.total == 0.0 && self.weights.is_empty() {
            self.reference = time;
        }
        if (time - self.reference) as f64 / self.half_life as f64 > MAX_DECAY_EXPONENT {
            self.shift_reference(time);
        }
        let w = weight * 2f64.powf((time - self.reference) as f64 / self.half_life as f64);
        let b = buckets.find(value.max(0.0));
        match self.weights.iter_mut().find(|(i, _)| *i == b) {
            Some((_, x)) => *x += w,
            None => {
                self.weights.push((b, w));
                self.weights.sort_by_key(|(i, _)| *i);
            }
        }
        self.total += w;
    }

    /// The end of the first bucket whose cumulative weight reaches `p` of the total (the
    /// start of the last bucket if it is the last one); 0 when empty.
    pub fn percentile(&self, buckets: &Buckets, p: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let threshold = p * self.total;
        let mut cum = 0.0;
        for (i, w) in &self.weights {
            cum += w;
            if cum >= threshold {
                return if *i + 1 < buckets.count() {
                    buckets.start(i + 1)
                } else {
                    buckets.start(*i)
                };
            }
        }
        self.weights.last().map_or(0.0, |(i, _)| {
            buckets.start((i + 1).min(buckets.count() - 1))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_range() {
        let b = Buckets::cpu();
        assert_eq!(b.find(0.0), 0);
        assert_eq!(b.find(0.0249), 0);
        assert_eq!(b.find(0.025), 1);
        assert!(b.start(b.find(3.0)) <= 3.0 && b.start(b.find(3.0) + 1) > 3.0);
        assert_eq!(
            b.find(1e9),
            b.count() - 1,
            "values past the maximum land in the last bucket"
        );
    }

    #[test]
    fn percentiles_and_decay() {
        let b = Buckets::cpu();
        let mut h = DecayingHistogram::new(3600);
        assert_eq!(h.percentile(&b, 0.9), 0.0);
        for i in 0..100 {
            h.add(&b, if i < 90 { 1.0 } else { 8.0 }, 1.0, 0);
        }
        let p50 = h.percentile(&b, 0.5);
        assert!((1.0..1.1).contains(&p50), "{p50}");
        assert!(h.percentile(&b, 0.95) >= 8.0);
        // A day later the old samples weigh 2^-24 of new ones: new usage dominates.
        for _ in 0..10 {
            h.add(&b, 4.0, 1.0, 86_400);
        }
        let p50 = h.percentile(&b, 0.5);
        assert!((4.0..4.3).contains(&p50), "{p50}");
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            serde_json::from_str::<DecayingHistogram>(&json).unwrap(),
            h,
            "checkpoints round-trip"
        );
    }

    #[test]
    fn reference_shifts_before_overflow() {
        let b = Buckets::memory();
        let mut h = DecayingHistogram::new(1);
        h.add(&b, 1e9, 1.0, 0);
        h.add(&b, 2e9, 1.0, 1000);
        assert!(h.total.is_finite());
        assert!(h.percentile(&b, 0.5) >= 2e9);
    }
}
