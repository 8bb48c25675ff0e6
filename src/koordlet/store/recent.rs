//! A series' recent points in memory: its sealed minutes compressed (`codec`), in time
//! order; the minute being collected is the store's `OpenMinute`. Queries of the recent window (NodeMetric's
//! 5/10/30-minute aggregates, the QoS loops' last seconds) read only this; the store moves
//! minutes out to sled's hour chunks once they are older than the window.

use super::aggregate::Point;
use super::codec;

pub const CHUNK_MS: i64 = 60_000;

pub fn chunk_of(ts: i64) -> i64 {
    ts.div_euclid(CHUNK_MS) * CHUNK_MS
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
    /// The sealed minutes' encodings back to back, oldest first: one allocation a series,
    /// not one a minute plus a queue slot (~40 bytes a series-minute more, measured).
    bytes: Vec<u8>,
    /// Each sealed minute's start and where its bytes end in `bytes`, sorted.
    minutes: Vec<(i64, u32)>,
}

impl Recent {
    /// Adds a sealed minute's points (sorted); a minute it already has takes them merged.
    pub fn push_minute(&mut self, chunk: i64, points: &[Point]) {
        if self.minutes.last().is_none_or(|m| m.0 < chunk) {
            self.put(self.minutes.len(), chunk, points, false);
        } else {
            points.iter().for_each(|&p| self.insert(p));
        }
    }

    /// Adds a point to its sealed minute (a late point), or a minute of its own.
    pub fn insert(&mut self, p: Point) {
        let chunk = chunk_of(p.ts);
        match self.minutes.binary_search_by_key(&chunk, |m| m.0) {
            Ok(i) => {
                let merged = merge(self.points_at(i), &[p]);
                self.put(i, chunk, &merged, true);
            }
            Err(i) => self.put(i, chunk, &[p], false),
        }
    }

    fn start_of(&self, i: usize) -> usize {
        i.checked_sub(1).map_or(0, |j| self.minutes[j].1 as usize)
    }

    /// Minute `i`'s points; bytes that do not decode (never written by us) read as empty.
    fn points_at(&self, i: usize) -> Vec<Point> {
        let range = self.start_of(i)..self.minutes[i].1 as usize;
        codec::decode(&self.bytes[range]).unwrap_or_default()
    }

    /// Writes minute `chunk` as the `i`th, in place of the one there (`replace`) or before it.
    fn put(&mut self, i: usize, chunk: i64, points: &[Point], replace: bool) {
        let start = self.start_of(i);
        let end = if replace {
            self.minutes[i].1 as usize
        } else {
            start
        };
        let enc = codec::encode(points);
        let shift = enc.len() as i64 - (end - start) as i64;
        self.bytes
            .reserve_exact(enc.len().saturating_sub(end - start));
        let new_end = (start + enc.len()) as u32;
        self.bytes.splice(start..end, enc);
        if replace {
            self.minutes[i].1 = new_end;
        } else {
            self.minutes.reserve_exact(1);
            self.minutes.insert(i, (chunk, new_end));
        }
        for m in &mut self.minutes[i + 1..] {
            m.1 = (i64::from(m.1) + shift) as u32;
        }
    }

    /// Drops the first `n` sealed minutes.
    fn remove_front(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let cut = self.minutes[n - 1].1;
        self.bytes.drain(..cut as usize);
        self.minutes.drain(..n);
        for m in &mut self.minutes {
            m.1 -= cut;
        }
        self.bytes.shrink_to_fit();
        self.minutes.shrink_to_fit();
    }

    /// Points in `[start, end]`, sorted.
    pub fn query(&self, start: i64, end: i64) -> Vec<Point> {
        let mut out = Vec::new();
        for (i, &(chunk, _)) in self.minutes.iter().enumerate() {
            if chunk > end || chunk + CHUNK_MS <= start {
                continue;
            }
            out.extend(
                self.points_at(i)
                    .into_iter()
                    .filter(|p| p.ts >= start && p.ts <= end),
            );
        }
        out
    }

    /// Takes every minute that starts before `cutoff`, oldest first.
    pub fn take_before(&mut self, cutoff: i64) -> Vec<Point> {
        let n = self.minutes.partition_point(|m| m.0 < cutoff);
        let out = (0..n).flat_map(|i| self.points_at(i)).collect();
        self.remove_front(n);
        out
    }

    /// Drops points older than `cutoff`; returns how many went.
    pub fn drop_before(&mut self, cutoff: i64) -> usize {
        let mut removed = 0;
        let whole = self.minutes.partition_point(|m| m.0 + CHUNK_MS <= cutoff);
        removed += (0..whole).map(|i| self.points_at(i).len()).sum::<usize>();
        self.remove_front(whole);
        if let Some(&(chunk, _)) = self.minutes.first()
            && chunk < cutoff
        {
            let points = self.points_at(0);
            let left: Vec<Point> = points.iter().filter(|p| p.ts >= cutoff).copied().collect();
            removed += points.len() - left.len();
            if left.is_empty() {
                self.remove_front(1);
            } else if left.len() != points.len() {
                self.put(0, chunk, &left, true);
            }
        }
        removed
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.minutes.is_empty()
    }

    /// Bytes held for points.
    pub fn bytes(&self) -> usize {
        self.bytes.capacity() + self.minutes.capacity() * std::mem::size_of::<(i64, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ts: i64, value: f64) -> Point {
        Point { ts, value }
    }

    fn minute(start: i64, seconds: i64) -> Vec<Point> {
        (0..seconds)
            .map(|s| p(start + s * 1000, s as f64))
            .collect()
    }

    #[test]
    fn minutes_in_order_and_late_points_merge_into_theirs() {
        let mut r = Recent::default();
        r.push_minute(0, &minute(0, 60));
        r.push_minute(60_000, &minute(60_000, 60));
        assert_eq!(r.minutes.len(), 2);
        r.insert(p(5_500, 99.0));
        r.insert(p(1000, 42.0));
        let all = r.query(0, i64::MAX);
        assert_eq!(all.len(), 121);
        assert!(all.windows(2).all(|w| w[0].ts < w[1].ts));
        assert_eq!(r.query(1000, 1000), [p(1000, 42.0)], "the late value wins");
        // A late point for a minute with nothing yet gets a minute of its own, in order;
        // a minute pushed again merges.
        let mut gap = Recent::default();
        gap.push_minute(0, &[p(0, 1.0)]);
        gap.push_minute(180_000, &[p(180_000, 3.0)]);
        gap.insert(p(60_000, 2.0));
        gap.push_minute(60_000, &[p(61_000, 2.5)]);
        let ts: Vec<i64> = gap.query(0, i64::MAX).iter().map(|p| p.ts).collect();
        assert_eq!(ts, [0, 60_000, 61_000, 180_000]);
    }

    #[test]
    fn taking_and_dropping_old_minutes() {
        let mut r = Recent::default();
        for m in 0..3 {
            r.push_minute(m * 60_000, &minute(m * 60_000, 60));
        }
        let taken = r.take_before(60_000);
        assert_eq!(taken.len(), 60);
        assert_eq!(r.query(0, i64::MAX).len(), 120);
        assert_eq!(r.drop_before(90_000), 30, "half a minute");
        assert_eq!(r.query(0, i64::MAX).first().map(|p| p.ts), Some(90_000));
        assert_eq!(r.take_before(i64::MAX).len(), 90);
        assert!(r.is_empty());
    }
}
