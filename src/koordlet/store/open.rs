//! The minute being collected, for every series at once: one row per sample time holding
//! each series' value by slot (the series id). A pass's insert then writes one or two
//! contiguous rows instead of one small buffer per series. Why: on the VMs measured for
//! issue 41 the koordlet's CPU follows the distinct memory pages it touches each second,
//! and a buffer per series was most of the ~500 heap pages touched a second at 1,000
//! series. The rows are sealed into each series' compressed minutes (`recent`) once a
//! minute.

use super::aggregate::Point;
use super::recent::chunk_of;

#[derive(Default)]
pub struct OpenMinute {
    chunk: i64,
    /// Sorted by time.
    rows: Vec<Row>,
}

struct Row {
    ts: i64,
    /// Sorted; `values` is parallel.
    slots: Vec<u32>,
    values: Vec<f64>,
}

impl Row {
    fn new(ts: i64, capacity: usize) -> Row {
        Row {
            ts,
            slots: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
        }
    }

    fn find(&self, slot: u32) -> Result<usize, usize> {
        // Slots are handed out in the order series first appear and passes keep their
        // order, so a pass mostly appends.
        match self.slots.last() {
            Some(&last) if last < slot => Err(self.slots.len()),
            _ => self.slots.binary_search(&slot),
        }
    }

    fn get(&self, slot: u32) -> Option<f64> {
        self.find(slot).ok().map(|i| self.values[i])
    }
}

impl OpenMinute {
    /// The minute the rows belong to; `None` while there are none.
    pub fn chunk(&self) -> Option<i64> {
        (!self.rows.is_empty()).then_some(self.chunk)
    }

    /// Puts a point of the open minute (or starts one when there is none); a point at a
    /// time the series already has replaces it. Callers seal before a newer minute and
    /// send an older minute's points to the series' sealed minutes.
    pub fn put(&mut self, slot: u32, p: Point) {
        if self.rows.is_empty() {
            self.chunk = chunk_of(p.ts);
        }
        let i = self.row_at(p.ts);
        let row = &mut self.rows[i];
        match row.find(slot) {
            Ok(j) => row.values[j] = p.value,
            Err(j) => {
                row.slots.insert(j, slot);
                row.values.insert(j, p.value);
            }
        }
    }

    /// The row for `ts`, added when missing; a new last row is sized like the one before.
    fn row_at(&mut self, ts: i64) -> usize {
        let n = self.rows.len();
        match self.rows.last() {
            Some(r) if r.ts == ts => return n - 1,
            Some(r) if r.ts < ts => {
                let capacity = r.slots.len();
                self.rows.push(Row::new(ts, capacity));
                return n;
            }
            None => {
                self.rows.push(Row::new(ts, 0));
                return 0;
            }
            Some(_) => {}
        }
        match self.rows.binary_search_by_key(&ts, |r| r.ts) {
            Ok(i) => i,
            Err(i) => {
                self.rows.insert(i, Row::new(ts, 0));
                i
            }
        }
    }

    /// Appends the series' points in `[start, end]`, in time order.
    pub fn query(&self, slot: u32, start: i64, end: i64, out: &mut Vec<Point>) {
        let first = self.rows.partition_point(|r| r.ts < start);
        for row in self.rows[first..].iter().take_while(|r| r.ts <= end) {
            if let Some(value) = row.get(slot) {
                out.push(Point { ts: row.ts, value });
            }
        }
    }

    /// Whether the series has a point in the open minute.
    pub fn holds(&self, slot: u32) -> bool {
        self.rows.iter().any(|r| r.find(slot).is_ok())
    }

    /// Takes every point, sorted by slot and then time.
    pub fn take(&mut self) -> Vec<(u32, Point)> {
        let mut cells: Vec<(u32, Point)> = Vec::with_capacity(self.len());
        for row in std::mem::take(&mut self.rows) {
            let ts = row.ts;
            cells.extend(
                row.slots
                    .iter()
                    .zip(&row.values)
                    .map(|(&slot, &value)| (slot, Point { ts, value })),
            );
        }
        // Rows were in time order: a stable sort by slot keeps each series' in time order.
        cells.sort_by_key(|c| c.0);
        cells
    }

    /// Drops the rows before `cutoff`; returns the points that went.
    pub fn drop_before(&mut self, cutoff: i64) -> usize {
        let n = self.rows.partition_point(|r| r.ts < cutoff);
        self.rows.drain(..n).map(|r| r.slots.len()).sum()
    }

    fn len(&self) -> usize {
        self.rows.iter().map(|r| r.slots.len()).sum()
    }

    /// Bytes held for points.
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row>()
            + self
                .rows
                .iter()
                .map(|r| r.slots.capacity() * 4 + r.values.capacity() * 8)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ts: i64, value: f64) -> Point {
        Point { ts, value }
    }

    #[test]
    fn rows_keep_each_series_in_time_order_and_late_points_replace() {
        let mut m = OpenMinute::default();
        assert_eq!(m.chunk(), None);
        for s in 0..10 {
            // Series 7 first appeared after series 3 but passes send it first.
            m.put(7, p(s * 1000, s as f64));
            m.put(3, p(s * 1000, -(s as f64)));
        }
        m.put(3, p(4_500, 99.0));
        m.put(7, p(2_000, 42.0));
        assert_eq!(m.chunk(), Some(0));
        let mut out = Vec::new();
        m.query(7, 1_000, 3_000, &mut out);
        assert_eq!(out, [p(1_000, 1.0), p(2_000, 42.0), p(3_000, 3.0)]);
        out.clear();
        m.query(3, 4_000, 5_000, &mut out);
        assert_eq!(out, [p(4_000, -4.0), p(4_500, 99.0), p(5_000, -5.0)]);
        assert!(m.holds(3) && !m.holds(5));
        assert_eq!(m.drop_before(2_000), 4, "two rows of two series");
        let cells = m.take();
        assert_eq!(cells.len(), 17);
        assert!(
            cells
                .windows(2)
                .all(|w| w[0].0 < w[1].0 || w[0].1.ts < w[1].1.ts)
        );
        assert_eq!(m.chunk(), None);
        assert_eq!(m.bytes(), 0);
    }
}
