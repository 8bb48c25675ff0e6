//! The koordlet's metric store on sled: one time series per (metric kind, labels). Points
//! are grouped per series into one-minute chunks, one sled value each, compressed
//! (`codec`); once an hour is over, its minute chunks are folded into one hour chunk, so a
//! series holds at most ~two hours of minute keys plus one key per retained hour. A
//! series' newest points wait in memory and are merged into their chunk every few samples,
//! at a minute boundary and on flush, so sled sees a few writes per series per minute. Keys
//! are bounded by series × retention hours and bytes by compressed history, not uptime.
//! Data survives restarts.

pub mod aggregate;
pub mod codec;
pub mod series;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use aggregate::{Aggregate, AggregationType, Point, aggregate};
pub use series::{MetricKind, SeriesKey};

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub retention: Duration,
    pub max_disk_bytes: u64,
    pub cache_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(12 * 3600),
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

const CHUNK_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;
/// An hour is folded this long after it ends (late samples still land in minute chunks,
/// and a later fold merges them too).
const FOLD_DELAY_MS: i64 = 120_000;
/// kv key of the chunk encoding; absent in stores written before compression.
const FORMAT_KEY: &str = "store.format";
const FORMAT_VERSION: &[u8] = b"2";
/// Open points per series before they are merged into their chunk (bounds what a crash
/// can lose to about this many samples).
const OPEN_LIMIT: usize = 15;

struct SeriesEntry {
    id: u32,
    last_ts: i64,
    /// Points not yet merged into sled, sorted by time, all in the chunk `open_chunk`.
    open: Vec<Point>,
    open_chunk: i64,
}

pub struct MetricStore {
    db: sled::Db,
    series: sled::Tree,
    chunks: sled::Tree,
    hours: sled::Tree,
    kv: sled::Tree,
    index: Mutex<HashMap<String, SeriesEntry>>,
    next_id: AtomicU32,
    opts: StoreOptions,
}

fn chunk_of(ts: i64) -> i64 {
    ts.div_euclid(CHUNK_MS) * CHUNK_MS
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

/// Merges `newer` into `older` (both sorted); newer values win on equal timestamps.
fn merge(older: Vec<Point>, newer: &[Point]) -> Vec<Point> {
    let mut out: Vec<Point> = older
        .into_iter()
        .filter(|p| newer.binary_search_by_key(&p.ts, |n| n.ts).is_err())
        .collect();
    out.extend_from_slice(newer);
    out.sort_by_key(|p| p.ts);
    out
}

impl MetricStore {
    pub fn open(path: &Path, opts: StoreOptions) -> Result<MetricStore, StoreError> {
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(opts.cache_bytes)
            .mode(sled::Mode::LowSpace)
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
        let mut index = HashMap::new();
        let mut max_id = 0u32;
        for item in series.iter() {
            let (name, id) = item?;
            let Ok(id) = <[u8; 4]>::try_from(id.as_ref()).map(u32::from_be_bytes) else {
                continue;
            };
            max_id = max_id.max(id);
            let newest = |t: &sled::Tree| {
                t.scan_prefix(id.to_be_bytes())
                    .next_back()
                    .and_then(|r| r.ok())
                    .and_then(|(_, v)| decode(&v).last().map(|p| p.ts))
                    .unwrap_or(i64::MIN)
            };
            let last_ts = newest(&chunks).max(newest(&hours));
            let entry = SeriesEntry {
                id,
                last_ts,
                open: Vec::new(),
                open_chunk: 0,
            };
            index.insert(String::from_utf8_lossy(&name).to_string(), entry);
        }
        Ok(MetricStore {
            db,
            series,
            chunks,
            hours,
            kv,
            index: Mutex::new(index),
            next_id: AtomicU32::new(max_id + 1),
            opts,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SeriesEntry>> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Merges a series' open points into its chunk.
    fn persist(&self, e: &mut SeriesEntry) -> Result<(), StoreError> {
        if e.open.is_empty() {
            return Ok(());
        }
        let key = chunk_key(e.id, e.open_chunk);
        let stored = self
            .chunks
            .get(key)?
            .map(|v| decode(&v))
            .unwrap_or_default();
        self.chunks.insert(key, encode(&merge(stored, &e.open)))?;
        e.open.clear();
        Ok(())
    }

    /// Appends samples.
    pub fn insert(&self, samples: &[(SeriesKey, Point)]) -> Result<(), StoreError> {
        let mut index = self.lock();
        for (key, p) in samples {
            if !p.value.is_finite() {
                continue;
            }
            let name = key.encode();
            if !index.contains_key(&name) {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                self.series.insert(name.as_bytes(), &id.to_be_bytes())?;
                index.insert(
                    name.clone(),
                    SeriesEntry {
                        id,
                        last_ts: p.ts,
                        open: Vec::new(),
                        open_chunk: chunk_of(p.ts),
                    },
                );
            }
            let Some(e) = index.get_mut(&name) else {
                continue;
            };
            let chunk = chunk_of(p.ts);
            if !e.open.is_empty() && chunk != e.open_chunk {
                self.persist(e)?;
            }
            e.open_chunk = chunk;
            match e.open.binary_search_by_key(&p.ts, |x| x.ts) {
                Ok(i) => e.open[i] = *p,
                Err(i) => e.open.insert(i, *p),
            }
            e.last_ts = e.last_ts.max(p.ts);
            if e.open.len() >= OPEN_LIMIT {
                self.persist(e)?;
            }
        }
        Ok(())
    }

    /// Points of one series in `[start, end]` (milliseconds), sorted by time.
    pub fn query(&self, key: &SeriesKey, start: i64, end: i64) -> Result<Vec<Point>, StoreError> {
        if end < start {
            return Ok(Vec::new());
        }
        let (id, open) = {
            let index = self.lock();
            match index.get(&key.encode()) {
                Some(e) => (
                    e.id,
                    e.open
                        .iter()
                        .filter(|p| p.ts >= start && p.ts <= end)
                        .copied()
                        .collect::<Vec<_>>(),
                ),
                None => return Ok(Vec::new()),
            }
        };
        let read = |tree: &sled::Tree, from: i64, to: i64| -> Result<Vec<Point>, StoreError> {
            let mut out = Vec::new();
            for item in tree.range(chunk_key(id, from)..=chunk_key(id, to)) {
                let (_, v) = item?;
                out.extend(
                    decode(&v)
                        .into_iter()
                        .filter(|p| p.ts >= start && p.ts <= end),
                );
            }
            Ok(out)
        };
        let folded = read(&self.hours, hour_of(start), hour_of(end))?;
        let minutes = read(&self.chunks, chunk_of(start), chunk_of(end))?;
        Ok(merge(merge(folded, &minutes), &open))
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
        self.lock().len()
    }

    /// Drops points older than the retention, series without recent points, and the
    /// oldest points while the store exceeds its disk cap. Returns points removed.
    pub fn gc(&self, now: i64) -> Result<usize, StoreError> {
        self.fold(now)?;
        let mut removed = self.drop_before(now - self.opts.retention.as_millis() as i64, true)?;
        let mut keep = self.opts.retention.as_millis() as i64;
        for _ in 0..4 {
            if self.db.size_on_disk()? <= self.opts.max_disk_bytes {
                break;
            }
            keep /= 2;
            removed += self.drop_before(now - keep, false)?;
        }
        Ok(removed)
    }

    fn drop_before(&self, cutoff: i64, forget_idle: bool) -> Result<usize, StoreError> {
        let mut index = self.lock();
        let mut removed = 0;
        let mut idle = Vec::new();
        for (name, e) in index.iter_mut() {
            let before = e.open.len();
            e.open.retain(|p| p.ts >= cutoff);
            removed += before - e.open.len();
            removed += drop_chunks(&self.chunks, e.id, chunk_of(cutoff), cutoff)?;
            removed += drop_chunks(&self.hours, e.id, hour_of(cutoff), cutoff)?;
            if forget_idle && e.last_ts < cutoff {
                idle.push(name.clone());
            }
        }
        for name in idle {
            self.series.remove(name.as_bytes())?;
            index.remove(&name);
        }
        Ok(removed)
    }

    /// Folds the minute chunks of every hour that ended over `FOLD_DELAY_MS` ago into one
    /// hour chunk per series. The hour is written before its minutes are removed, so a
    /// crash in between leaves duplicates (merged away on read), never a gap.
    fn fold(&self, now: i64) -> Result<(), StoreError> {
        let before = hour_of(now - FOLD_DELAY_MS);
        let ids: Vec<u32> = self.lock().values().map(|e| e.id).collect();
        for id in ids {
            let mut by_hour: std::collections::BTreeMap<i64, (Vec<sled::IVec>, Vec<Point>)> =
                Default::default();
            for item in self
                .chunks
                .range(chunk_key(id, i64::MIN)..chunk_key(id, before))
            {
                let (k, v) = item?;
                let slot = by_hour.entry(hour_of(key_time(&k))).or_default();
                slot.0.push(k);
                slot.1.extend(decode(&v));
            }
            for (hour, (keys, mut minutes)) in by_hour {
                minutes.sort_by_key(|p| p.ts);
                let key = chunk_key(id, hour);
                let folded = self.hours.get(key)?.map(|v| decode(&v)).unwrap_or_default();
                self.hours.insert(key, encode(&merge(folded, &minutes)))?;
                let mut batch = sled::Batch::default();
                keys.into_iter().for_each(|k| batch.remove(k));
                self.chunks.apply_batch(batch)?;
            }
        }
        Ok(())
    }

    /// Chunk keys held now (minute and hour chunks), for tests and benches.
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

    /// Merges every open point into sled and makes it durable.
    pub async fn flush(&self) -> Result<(), StoreError> {
        {
            let mut index = self.lock();
            for e in index.values_mut() {
                self.persist(e)?;
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
