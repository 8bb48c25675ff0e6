//! The koordlet's metric store: one time series per (metric kind, labels). The recent
//! window — what the NodeMetric report's aggregates and the QoS loops read, 30 minutes by
//! default — stays in memory, compressed a minute at a time (`recent`); the minute being
//! collected is kept for all series together, a row per sample time (`open`). Older minutes go
//! to sled, one compressed chunk per series and hour, at each GC round (every few
//! minutes) and when the koordlet stops; sled keys are bounded by series × retained hours,
//! and sled sees one write per series per hour chunk and round instead of one per minute.
//! Values are kept to three decimal places (a milli-core, the unit Kubernetes and the
//! NodeMetric report use; byte counts are whole), which the codec stores as small integers:
//! a noisy CPU series costs a byte or two a second instead of three. Data survives a restart; a crash loses what was still
//! in memory (the last 30–35 minutes).

pub mod aggregate;
pub mod codec;
mod open;
mod order;
mod recent;
pub mod series;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use aggregate::{Aggregate, AggregationType, Point, aggregate};
pub use series::{MetricKind, SeriesKey};

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub retention: Duration,
    /// What stays in memory (older minutes go to sled at each GC round).
    pub recent: Duration,
    pub max_disk_bytes: u64,
    pub cache_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(12 * 3600),
            recent: Duration::from_millis(RECENT_MS as u64),
            max_disk_bytes: 100 << 20,
            cache_bytes: 4 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("metric store: {0}")]
    Sled(#[from] sled::Error),
}

use open::OpenMinute;
use order::Order;
use recent::{Recent, chunk_of, merge};

const HOUR_MS: i64 = 3_600_000;
/// What stays in memory by default: NodeMetric's longest default aggregation window.
pub const RECENT_MS: i64 = 30 * 60_000;
/// kv key of the chunk encoding; absent in stores written before compression.
const FORMAT_KEY: &str = "store.format";
const FORMAT_VERSION: &[u8] = b"2";

struct SeriesEntry {
    id: u32,
    /// The newest point time outside the open minute.
    last_ts: i64,
    /// The newest point time in sled (`i64::MIN`: none); queries starting after it stay
    /// in memory.
    stored_until: i64,
    recent: Recent,
}

/// The series and the minute being collected, under one lock.
#[derive(Default)]
struct Index {
    series: HashMap<String, SeriesEntry>,
    /// Every series' points of the newest minute; all of `recent`'s minutes are older.
    open: OpenMinute,
    order: Order,
}

impl Index {
    /// Moves the open minute into each series' sealed minutes.
    fn seal(&mut self) {
        let Some(chunk) = self.open.chunk() else {
            return;
        };
        let cells = self.open.take();
        let mut points = Vec::new();
        for e in self.series.values_mut() {
            let from = cells.partition_point(|c| c.0 < e.id);
            let run = cells[from..].iter().take_while(|c| c.0 == e.id);
            points.clear();
            points.extend(run.map(|c| c.1));
            if let Some(last) = points.last() {
                e.last_ts = e.last_ts.max(last.ts);
                e.recent.push_minute(chunk, &points);
            }
        }
    }

    /// Puts a point of series `id` (named `name`) where its minute is kept.
    fn put(&mut self, id: u32, name: &str, p: Point) {
        let chunk = chunk_of(p.ts);
        match self.open.chunk() {
            Some(open) if chunk < open => {
                if let Some(e) = self.series.get_mut(name) {
                    e.recent.insert(p);
                    e.last_ts = e.last_ts.max(p.ts);
                }
            }
            Some(open) if chunk > open => {
                self.seal();
                self.open.put(id, p);
            }
            _ => self.open.put(id, p),
        }
    }
}

pub struct MetricStore {
    db: sled::Db,
    series: sled::Tree,
    chunks: sled::Tree,
    hours: sled::Tree,
    kv: sled::Tree,
    index: Mutex<Index>,
    next_id: AtomicU32,
    opts: StoreOptions,
}

thread_local! {
    /// The series name a query looks up (a few hundred queries a second).
    static NAME: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn hour_of(ts: i64) -> i64 {
    ts.div_euclid(HOUR_MS) * HOUR_MS
}

/// The chunk start stored in a key.
fn key_time(k: &[u8]) -> i64 {
    let raw = k
        .get(4..12)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes);
    (raw ^ (1 << 63)) as i64
}

fn chunk_key(id: u32, chunk: i64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&id.to_be_bytes());
    // Flipping the sign bit makes negative times sort before positive ones.
    k[4..].copy_from_slice(&((chunk as u64) ^ (1 << 63)).to_be_bytes());
    k
}

fn encode(points: &[Point]) -> Vec<u8> {
    codec::encode(points)
}

/// A chunk's points; a chunk that does not decode (disk corruption) reads as empty.
fn decode(bytes: &[u8]) -> Vec<Point> {
    codec::decode(bytes).unwrap_or_default()
}

/// Values as the store keeps them: to three decimal places below 10^9 (beyond, byte counts
/// are whole anyway).
fn keep(v: f64) -> f64 {
    if v.abs() >= 1e9 {
        return v;
    }
    let kept = (v * 1e3).round() / 1e3;
    // -0.0 reads as 0.
    if kept == 0.0 { 0.0 } else { kept }
}

impl MetricStore {
    pub fn open(path: &Path, opts: StoreOptions) -> Result<MetricStore, StoreError> {
        // No background flusher: it woke twice a second to fsync a database that changes once
        // a minute; `gc` and `flush` make their own writes durable.
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(opts.cache_bytes)
            .mode(sled::Mode::LowSpace)
            .flush_every_ms(None)
            .open()?;
        Self::from_db(db, opts)
    }

    pub fn temporary(opts: StoreOptions) -> Result<MetricStore, StoreError> {
        let db = sled::Config::new()
            .temporary(true)
            .cache_capacity(opts.cache_bytes)
            .open()?;
        Self::from_db(db, opts)
    }

    fn from_db(db: sled::Db, opts: StoreOptions) -> Result<MetricStore, StoreError> {
        let series = db.open_tree("series")?;
        let chunks = db.open_tree("chunks")?;
        let hours = db.open_tree("hours")?;
        let kv = db.open_tree("kv")?;
        migrate(&chunks, &kv)?;
        fold_minutes(&chunks, &hours)?;
        let mut index = HashMap::new();
        let mut max_id = 0u32;
        for item in series.iter() {
            let (name, id) = item?;
            let Ok(id) = <[u8; 4]>::try_from(id.as_ref()).map(u32::from_be_bytes) else {
                continue;
            };
            max_id = max_id.max(id);
            let newest = hours
                .scan_prefix(id.to_be_bytes())
                .next_back()
                .and_then(|r| r.ok())
                .and_then(|(_, v)| decode(&v).last().map(|p| p.ts))
                .unwrap_or(i64::MIN);
            let entry = SeriesEntry {
                id,
                last_ts: newest,
                stored_until: newest,
                recent: Recent::default(),
            };
            index.insert(String::from_utf8_lossy(&name).to_string(), entry);
        }
        Ok(MetricStore {
            db,
            series,
            chunks,
            hours,
            kv,
            index: Mutex::new(Index {
                series: index,
                ..Index::default()
            }),
            next_id: AtomicU32::new(max_id + 1),
            opts,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves a series' minutes that start before `cutoff` into their sled hour chunks
    /// (merged with what the hour already holds; the moved points win).
    fn spill(&self, e: &mut SeriesEntry, cutoff: i64) -> Result<(), StoreError> {
        let points = e.recent.take_before(cutoff);
        let mut by_hour: BTreeMap<i64, Vec<Point>> = BTreeMap::new();
        for p in points {
            by_hour.entry(hour_of(p.ts)).or_default().push(p);
        }
        for (hour, mut pts) in by_hour {
            pts.sort_by_key(|p| p.ts);
            let key = chunk_key(e.id, hour);
            let stored = self.hours.get(key)?.map(|v| decode(&v)).unwrap_or_default();
            self.hours.insert(key, encode(&merge(stored, &pts)))?;
            if let Some(last) = pts.last() {
                e.stored_until = e.stored_until.max(last.ts);
            }
        }
        Ok(())
    }

    /// Appends samples (values kept to three decimal places; non-finite ones skipped).
    pub fn insert(&self, samples: &[(SeriesKey, Point)]) -> Result<(), StoreError> {
        let mut guard = self.lock();
        let index = &mut *guard;
        let mut name = String::new();
        index.order.start();
        let mut i = 0;
        for (key, p) in samples {
            if !p.value.is_finite() {
                continue;
            }
            key.encode_into(&mut name);
            let p = Point {
                ts: p.ts,
                value: keep(p.value),
            };
            let id = match index.order.hit(i, &name) {
                Some(id) => id,
                None => {
                    let id = self.entry(&mut index.series, &name, p.ts)?;
                    index.order.record(i, &name, id);
                    id
                }
            };
            i += 1;
            index.put(id, &name, p);
        }
        index.order.finish(i);
        Ok(())
    }

    /// The id of series `name`, added (first point at `ts`) when new.
    fn entry(
        &self,
        series: &mut HashMap<String, SeriesEntry>,
        name: &str,
        ts: i64,
    ) -> Result<u32, StoreError> {
        if let Some(e) = series.get(name) {
            return Ok(e.id);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.series.insert(name.as_bytes(), &id.to_be_bytes())?;
        series.insert(
            name.to_string(),
            SeriesEntry {
                id,
                last_ts: ts,
                stored_until: i64::MIN,
                recent: Recent::default(),
            },
        );
        Ok(id)
    }

    /// Points of one series in `[start, end]` (milliseconds), sorted by time.
    pub fn query(&self, key: &SeriesKey, start: i64, end: i64) -> Result<Vec<Point>, StoreError> {
        if end < start {
            return Ok(Vec::new());
        }
        let (id, stored_until, recent) = {
            let index = self.lock();
            let found = NAME.with_borrow_mut(|name| {
                key.encode_into(name);
                index.series.get(name.as_str())
            });
            let Some(e) = found else {
                return Ok(Vec::new());
            };
            // The sealed minutes all precede the open one: a window inside it (the QoS
            // loops' last seconds) leaves them untouched.
            let mut points = match index.open.chunk() {
                Some(open) if start >= open => Vec::new(),
                _ => e.recent.query(start, end),
            };
            index.open.query(e.id, start, end, &mut points);
            (e.id, e.stored_until, points)
        };
        if start > stored_until {
            return Ok(recent);
        }
        let mut stored = Vec::new();
        let last = end.min(stored_until);
        for item in self
            .hours
            .range(chunk_key(id, hour_of(start))..=chunk_key(id, hour_of(last)))
        {
            let (_, v) = item?;
            stored.extend(
                decode(&v)
                    .into_iter()
                    .filter(|p| p.ts >= start && p.ts <= end),
            );
        }
        Ok(merge(stored, &recent))
    }

    /// Aggregates of one series over a window; `None` when it has no samples there.
    pub fn aggregate(
        &self,
        key: &SeriesKey,
        start: i64,
        end: i64,
    ) -> Result<Option<Aggregate>, StoreError> {
        Ok(aggregate(&self.query(key, start, end)?))
    }

    /// The label sets of the live series of `kind` (devices are known only by their series).
    pub fn labels_of(&self, kind: MetricKind) -> Vec<Vec<(String, String)>> {
        let prefix = format!("{}{{", kind.name());
        let mut out: Vec<Vec<(String, String)>> = self
            .lock()
            .series
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix)?.strip_suffix('}'))
            .map(|labels| {
                labels
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect();
        out.sort();
        out
    }

    /// Live series.
    pub fn series_count(&self) -> usize {
        self.lock().series.len()
    }

    /// Moves minutes older than the recent window to sled, then drops points older than
    /// the retention, series without recent points, and the oldest points while the store
    /// exceeds its disk cap, and makes it all durable (with the prediction checkpoints
    /// written since). Returns points removed.
    pub fn gc(&self, now: i64) -> Result<usize, StoreError> {
        {
            let mut index = self.lock();
            let cutoff = chunk_of(now - self.opts.recent.as_millis() as i64);
            if index.open.chunk().is_some_and(|open| open < cutoff) {
                index.seal();
            }
            for e in index.series.values_mut() {
                self.spill(e, cutoff)?;
            }
        }
        let mut removed = self.drop_before(now - self.opts.retention.as_millis() as i64, true)?;
        let mut keep = self.opts.retention.as_millis() as i64;
        for _ in 0..4 {
            // Durable first, so the file's size counts what was just written.
            self.db.flush()?;
            if self.db.size_on_disk()? <= self.opts.max_disk_bytes {
                return Ok(removed);
            }
            keep /= 2;
            removed += self.drop_before(now - keep, false)?;
        }
        self.db.flush()?;
        Ok(removed)
    }

    fn drop_before(&self, cutoff: i64, forget_idle: bool) -> Result<usize, StoreError> {
        let mut guard = self.lock();
        let index = &mut *guard;
        let mut removed = index.open.drop_before(cutoff);
        let mut idle = Vec::new();
        for (name, e) in index.series.iter_mut() {
            removed += e.recent.drop_before(cutoff);
            if e.stored_until > i64::MIN {
                removed += drop_chunks(&self.hours, e.id, hour_of(cutoff), cutoff)?;
            }
            if forget_idle && e.last_ts < cutoff && !index.open.holds(e.id) {
                idle.push(name.clone());
            }
        }
        // An idle series' points were all older than the cutoff: dropped above.
        if !idle.is_empty() {
            index.order.clear();
        }
        for name in idle {
            index.series.remove(&name);
            self.series.remove(name.as_bytes())?;
        }
        Ok(removed)
    }

    /// Bytes the recent windows hold in memory.
    pub fn recent_bytes(&self) -> usize {
        let index = self.lock();
        let sealed: usize = index.series.values().map(|e| e.recent.bytes()).sum();
        sealed + index.open.bytes()
    }

    /// Chunk keys held in sled now, for tests and benches.
    pub fn chunk_keys(&self) -> usize {
        self.chunks.len() + self.hours.len()
    }

    /// Static values and checkpoints (node CPU info, prediction models).
    pub fn kv_put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.kv.insert(key.as_bytes(), value)?;
        Ok(())
    }

    pub fn kv_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.kv.get(key.as_bytes())?.map(|v| v.to_vec()))
    }

    pub fn kv_remove(&self, key: &str) -> Result<(), StoreError> {
        self.kv.remove(key.as_bytes())?;
        Ok(())
    }

    pub fn kv_keys(&self, prefix: &str) -> Vec<String> {
        self.kv
            .scan_prefix(prefix.as_bytes())
            .filter_map(|r| r.ok())
            .map(|(k, _)| String::from_utf8_lossy(&k).to_string())
            .collect()
    }

    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    /// Moves every point in memory to sled and makes it durable (the koordlet stopping).
    pub async fn flush(&self) -> Result<(), StoreError> {
        {
            let mut index = self.lock();
            index.seal();
            for e in index.series.values_mut() {
                self.spill(e, i64::MAX)?;
            }
        }
        self.db.flush_async().await?;
        Ok(())
    }
}

/// Drops points older than `cutoff` from one series' chunks that start at or before
/// `last_start`; returns how many went.
fn drop_chunks(
    tree: &sled::Tree,
    id: u32,
    last_start: i64,
    cutoff: i64,
) -> Result<usize, StoreError> {
    let mut removed = 0;
    let mut batch = sled::Batch::default();
    for item in tree.range(chunk_key(id, i64::MIN)..=chunk_key(id, last_start)) {
        let (k, v) = item?;
        let points = decode(&v);
        let kept: Vec<Point> = points.iter().filter(|p| p.ts >= cutoff).copied().collect();
        removed += points.len() - kept.len();
        if kept.is_empty() {
            batch.remove(k);
        } else if kept.len() != points.len() {
            batch.insert(k, encode(&kept));
        }
    }
    tree.apply_batch(batch)?;
    Ok(removed)
}

/// Folds the minute chunks of a store written before the recent window moved to memory
/// into their hour chunks (once, on open). The hour is written before its minutes are
/// removed, so a crash in between leaves duplicates (merged away on read), never a gap.
fn fold_minutes(chunks: &sled::Tree, hours: &sled::Tree) -> Result<(), StoreError> {
    let mut by_hour: BTreeMap<[u8; 12], (Vec<sled::IVec>, Vec<Point>)> = BTreeMap::new();
    for item in chunks.iter() {
        let (k, v) = item?;
        let id = k.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok());
        let Some(id) = id.map(u32::from_be_bytes) else {
            continue;
        };
        let slot = by_hour
            .entry(chunk_key(id, hour_of(key_time(&k))))
            .or_default();
        slot.0.push(k);
        slot.1.extend(decode(&v));
    }
    for (key, (keys, mut minutes)) in by_hour {
        minutes.sort_by_key(|p| p.ts);
        let folded = hours.get(key)?.map(|v| decode(&v)).unwrap_or_default();
        hours.insert(key, encode(&merge(folded, &minutes)))?;
        let mut batch = sled::Batch::default();
        keys.into_iter().for_each(|k| batch.remove(k));
        chunks.apply_batch(batch)?;
    }
    Ok(())
}

/// Re-encodes the chunks of a store written before compression (16 raw bytes a point).
fn migrate(chunks: &sled::Tree, kv: &sled::Tree) -> Result<(), StoreError> {
    if kv.get(FORMAT_KEY)?.as_deref() == Some(FORMAT_VERSION) {
        return Ok(());
    }
    for item in chunks.iter() {
        let (k, v) = item?;
        chunks.insert(k, encode(&codec::decode_raw(&v)))?;
    }
    kv.insert(FORMAT_KEY, FORMAT_VERSION)?;
    Ok(())
}

#[cfg(test)]
mod tests;
