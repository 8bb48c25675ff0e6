//! A series' recent points in memory: the minute being collected as plain points, earlier
//! minutes compressed (`codec`), in time order. Queries of the recent window (NodeMetric's
//! 5/10/30-minute aggregates, the QoS loops' last seconds) read only this; the store moves
//! minutes out to sled's hour chunks once they are older than the window.

use std::collections::VecDeque;

use super::aggregate::Point;
use super::codec;

pub const CHUNK_MS: i64 = 60_000;

pub fn chunk_of(ts: i64) -> i64 {
    ts.div_euclid(CHUNK_MS) * CHUNK_MS
}

/// One compressed minute.
pub struct Sealed {
    pub chunk: i64,
    pub bytes: Box<[u8]>,
}

impl Sealed {
    fn new(chunk: i64, points: &[Point]) -> Sealed {
        Sealed {
            chunk,
            bytes: codec::encode(points).into_boxed_slice(),
        }
    }

    /// The minute's points; bytes that do not decode (never written by us) read as empty.
    pub fn points(&self) -> Vec<Point> {
        codec::decode(&self.bytes).unwrap_or_default()
    }
}

/// Merges `newer` into `older` (both sorted); newer values win on equal timestamps.
pub fn merge(older: Vec<Point>, newer: &[Point]) -> Vec<Point> {
    let mut out: Vec<Point> = older
        .into_iter()
        .filter(|p| newer.binary_search_by_key(&p.ts, |n| n.ts).is_err())
        .collect();
    out.extend_from_slice(newer);
    out.sort_by_key(|p| p.ts);
    out
}

#[derive(Default)]
pub struct Recent {
    /// Sealed minutes, sorted by `chunk`, all before `open_chunk`.
    sealed: VecDeque<Sealed>,
    /// The newest minute's points, sorted by time.
    open: Vec<Point>,
    open_chunk: i64,
}

impl Recent {
    /// Adds a point; a point for an earlier minute (late) is merged into that minute.
    pub fn insert(&mut self, p: Point) {
        let chunk = chunk_of(p.ts);
        let after_sealed = self.sealed.back().is_none_or(|s| s.chunk < chunk);
        if (self.open.is_empty() && after_sealed)
            || (!self.open.is_empty() && chunk > self.open_chunk)
        {
            self.seal();
            self.open_chunk = chunk;
            self.open.push(p);
            return;
        }
        if !self.open.is_empty() && chunk == self.open_chunk {
            match self.open.binary_search_by_key(&p.ts, |x| x.ts) {
                Ok(i) => self.open[i] = p,
                Err(i) => self.open.insert(i, p),
            }
            return;
        }
        match self.sealed.binary_search_by_key(&chunk, |s| s.chunk) {
            Ok(i) => {
                let merged = merge(self.sealed[i].points(), &[p]);
                self.sealed[i] = Sealed::new(chunk, &merged);
            }
            Err(i) => self.sealed.insert(i, Sealed::new(chunk, &[p])),
        }
    }

    /// Compresses the open minute.
    fn seal(&mut self) {
        if !self.open.is_empty() {
            let s = Sealed::new(self.open_chunk, &self.open);
            self.sealed.push_back(s);
            self.open.clear();
            self.open.shrink_to(64);
        }
    }

    /// Points in `[start, end]`, sorted.
    pub fn query(&self, start: i64, end: i64) -> Vec<Point> {
        let mut out = Vec::new();
        for s in &self.sealed {
            if s.chunk > end || s.chunk + CHUNK_MS <= start {
                continue;
            }
            out.extend(
                s.points()
                    .into_iter()
                    .filter(|p| p.ts >= start && p.ts <= end),
            );
        }
        out.extend(self.open.iter().filter(|p| p.ts >= start && p.ts <= end));
        out
    }

    /// Takes every minute that starts before `cutoff` (the open one too), oldest first.
    pub fn take_before(&mut self, cutoff: i64) -> Vec<Point> {
        if !self.open.is_empty() && self.open_chunk < cutoff {
            self.seal();
        }
        let mut out = Vec::new();
        while self.sealed.front().is_some_and(|s| s.chunk < cutoff) {
            if let Some(s) = self.sealed.pop_front() {
                out.extend(s.points());
            }
        }
        out
    }

    /// Drops points older than `cutoff`; returns how many went.
    pub fn drop_before(&mut self, cutoff: i64) -> usize {
        let mut removed = 0;
        let before = self.open.len();
        self.open.retain(|p| p.ts >= cutoff);
        removed += before - self.open.len();
        let mut kept = VecDeque::with_capacity(self.sealed.len());
        for s in self.sealed.drain(..) {
            if s.chunk + CHUNK_MS <= cutoff {
                removed += s.points().len();
                continue;
            }
            if s.chunk < cutoff {
                let points = s.points();
                let left: Vec<Point> = points.iter().filter(|p| p.ts >= cutoff).copied().collect();
                removed += points.len() - left.len();
                if !left.is_empty() {
                    kept.push_back(Sealed::new(s.chunk, &left));
                }
                continue;
            }
            kept.push_back(s);
        }
        self.sealed = kept;
        removed
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.open.is_empty() && self.sealed.is_empty()
    }

    /// Bytes held for points (compressed minutes and the open minute).
    pub fn bytes(&self) -> usize {
        self.sealed.iter().map(|s| s.bytes.len()).sum::<usize>()
            + self.open.capacity() * std::mem::size_of::<Point>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ts: i64, value: f64) -> Point {
        Point { ts, value }
    }

    #[test]
    fn minutes_seal_in_order_and_late_points_merge_into_theirs() {
        let mut r = Recent::default();
        for s in 0..150 {
            r.insert(p(s * 1000, s as f64));
        }
        assert_eq!(r.sealed.len(), 2, "two whole minutes compressed");
        assert_eq!(r.open.len(), 30);
        r.insert(p(5_500, 99.0));
        r.insert(p(1000, 42.0));
        let all = r.query(0, i64::MAX);
        assert_eq!(all.len(), 151);
        assert!(all.windows(2).all(|w| w[0].ts < w[1].ts));
        assert_eq!(r.query(1000, 1000), [p(1000, 42.0)], "the late value wins");
        // A late point for a minute with nothing yet gets a minute of its own, in order.
        let mut gap = Recent::default();
        gap.insert(p(0, 1.0));
        gap.insert(p(180_000, 3.0));
        gap.insert(p(60_000, 2.0));
        let ts: Vec<i64> = gap.query(0, i64::MAX).iter().map(|p| p.ts).collect();
        assert_eq!(ts, [0, 60_000, 180_000]);
    }

    #[test]
    fn taking_and_dropping_old_minutes() {
        let mut r = Recent::default();
        for s in 0..180 {
            r.insert(p(s * 1000, 1.0));
        }
        let taken = r.take_before(60_000);
        assert_eq!(taken.len(), 60);
        assert_eq!(r.query(0, i64::MAX).len(), 120);
        assert_eq!(r.drop_before(90_000), 30, "half a minute");
        assert_eq!(r.query(0, i64::MAX).first().map(|p| p.ts), Some(90_000));
        assert_eq!(r.take_before(i64::MAX).len(), 90, "the open minute too");
        assert!(r.is_empty());
    }
}
