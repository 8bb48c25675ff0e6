//! The koordlet's metric store on sled: one time series per (metric kind, labels). Points
//! are grouped per series into one-minute chunks, one sled value each; a series' newest
//! points wait in memory and are merged into their chunk every few samples, at a minute
//! boundary and on flush. sled thus sees a few writes per series per minute instead of one
//! insert and one delete per sample, which keeps its memory and disk bounded. Memory is
//! sled's fixed page cache plus one index entry and at most a few open points per live
//! series: bounded by the number of series, not by uptime. Data survives restarts.

pub mod aggregate;
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
    kv: sled::Tree,
    index: Mutex<HashMap<String, SeriesEntry>>,
    next_id: AtomicU32,
    opts: StoreOptions,
}

fn chunk_of(ts: i64) -> i64 {
    ts.div_euclid(CHUNK_MS) * CHUNK_MS
}

fn chunk_key(id: u32, chunk: i64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&id.to_be_bytes());
    // Flipping the sign bit makes negative times sort before positive ones.
    k[4..].copy_from_slice(&((chunk as u64) ^ (1 << 63)).to_be_bytes());
    k
}

fn encode(points: &[Point]) -> Vec<u8> {
    let mut out = Vec::with_capacity(points.len() * 16);
    for p in points {
        out.extend_from_slice(&p.ts.to_le_bytes());
        out.extend_from_slice(&p.value.to_le_bytes());
    }
    out
}

fn decode(bytes: &[u8]) -> Vec<Point> {
    bytes
        .chunks_exact(16)
        .filter_map(|c| {
            Some(Point {
                ts: i64::from_le_bytes(c[..8].try_into().ok()?),
                value: f64::from_le_bytes(c[8..].try_into().ok()?),
            })
        })
        .collect()
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
        let kv = db.open_tree("kv")?;
        let mut index = HashMap::new();
        let mut max_id = 0u32;
        for item in series.iter() {
            let (name, id) = item?;
            let Ok(id) = <[u8; 4]>::try_from(id.as_ref()).map(u32::from_be_bytes) else {
                continue;
            };
            max_id = max_id.max(id);
            let last_ts = chunks
                .scan_prefix(id.to_be_bytes())
                .next_back()
                .and_then(|r| r.ok())
                .and_then(|(_, v)| decode(&v).last().map(|p| p.ts))
                .unwrap_or(i64::MIN);
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
        let mut stored = Vec::new();
        for item in self
            .chunks
            .range(chunk_key(id, chunk_of(start))..=chunk_key(id, chunk_of(end)))
        {
            let (_, v) = item?;
            stored.extend(
                decode(&v)
                    .into_iter()
                    .filter(|p| p.ts >= start && p.ts <= end),
            );
        }
        Ok(merge(stored, &open))
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

    /// Live series.
    pub fn series_count(&self) -> usize {
        self.lock().len()
    }

    /// Drops points older than the retention, series without recent points, and the
    /// oldest points while the store exceeds its disk cap. Returns points removed.
    pub fn gc(&self, now: i64) -> Result<usize, StoreError> {
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
            let mut batch = sled::Batch::default();
            for item in self
                .chunks
                .range(chunk_key(e.id, i64::MIN)..=chunk_key(e.id, chunk_of(cutoff)))
            {
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
            self.chunks.apply_batch(batch)?;
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

#[cfg(test)]
mod tests;
