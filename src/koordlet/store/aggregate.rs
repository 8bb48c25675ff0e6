//! Aggregations over a window of samples, with Koordinator's percentile rule: sort
//! ascending, index `⌊n·p⌋ − 1` clamped at 0.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Milliseconds since the Unix epoch.
    pub ts: i64,
    pub value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aggregate {
    pub avg: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    /// The value with the newest timestamp.
    pub last: f64,
    pub count: usize,
    /// Newest minus oldest sample time, in milliseconds.
    pub span_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregationType {
    Avg,
    P50,
    P90,
    P95,
    P99,
    Last,
}

impl AggregationType {
    pub fn name(self) -> &'static str {
        match self {
            Self::Avg => "avg",
            Self::P50 => "p50",
            Self::P90 => "p90",
            Self::P95 => "p95",
            Self::P99 => "p99",
            Self::Last => "last",
        }
    }

    pub fn pick(self, a: &Aggregate) -> f64 {
        match self {
            Self::Avg => a.avg,
            Self::P50 => a.p50,
            Self::P90 => a.p90,
            Self::P95 => a.p95,
            Self::P99 => a.p99,
            Self::Last => a.last,
        }
    }
}

/// The percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 * p).floor() as i64 - 1).max(0) as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Every aggregation of `points`; `None` for an empty window.
pub fn aggregate(points: &[Point]) -> Option<Aggregate> {
    if points.is_empty() {
        return None;
    }
    let mut values: Vec<f64> = points.iter().map(|p| p.value).collect();
    values.sort_by(|a, b| a.total_cmp(b));
    let newest = points.iter().max_by_key(|p| p.ts)?;
    let oldest = points.iter().map(|p| p.ts).min().unwrap_or(newest.ts);
    Some(Aggregate {
        avg: values.iter().sum::<f64>() / values.len() as f64,
        p50: percentile(&values, 0.5),
        p90: percentile(&values, 0.9),
        p95: percentile(&values, 0.95),
        p99: percentile(&values, 0.99),
        last: newest.value,
        count: values.len(),
        span_ms: newest.ts - oldest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_rule() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 5.0, "⌊10·0.5⌋−1 = 4");
        assert_eq!(percentile(&v, 0.9), 9.0);
        assert_eq!(percentile(&v, 0.95), 9.0, "⌊9.5⌋−1 = 8");
        assert_eq!(percentile(&v, 0.99), 9.0);
        assert_eq!(percentile(&[7.0], 0.5), 7.0, "clamped at index 0");
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn aggregates() {
        let pts = [
            Point {
                ts: 3000,
                value: 3.0,
            },
            Point {
                ts: 1000,
                value: 1.0,
            },
            Point {
                ts: 2000,
                value: 8.0,
            },
        ];
        let a = aggregate(&pts).unwrap();
        assert_eq!(a.avg, 4.0);
        assert_eq!(a.last, 3.0, "newest, not largest");
        assert_eq!((a.count, a.span_ms), (3, 2000));
        assert_eq!(a.p50, 1.0, "⌊1.5⌋−1 = 0");
        assert!(aggregate(&[]).is_none());
    }
}
