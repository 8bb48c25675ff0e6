//! Peak prediction (Koordinator's `pkg/koordlet/prediction`): per-pod, per-priority-class,
//! node and system models of CPU and memory, trained every minute from the store, and the
//! prod reclaimable estimate they give (`NodeMetric.status.prodReclaimableMetric`, the
//! input of mid-tier resources). Models are checkpointed in the store, or in a directory.

pub mod checkpoints;
pub mod histogram;
pub mod peak;

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::informer::States;
use super::store::{MetricKind, MetricStore, SeriesKey, StoreError};
use crate::api::extension::priority::pod_priority_class_with_default;
use checkpoints::{CheckpointError, Checkpoints};
use histogram::{Buckets, DecayingHistogram};

/// The `koordlet.prediction` configuration section (Koordinator's defaults).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    pub enabled: bool,
    pub training_interval_seconds: u64,
    pub checkpoint_interval_seconds: u64,
    pub max_checkpoints_per_round: usize,
    pub model_expire_minutes: u64,
    pub cold_start_hours: u64,
    pub safety_margin_percent: u64,
    pub cpu_half_life_hours: u64,
    pub memory_half_life_hours: u64,
    /// One file per model here (Koordinator's `-prediction-checkpoint-filepath`); unset:
    /// in the metric store.
    pub checkpoint_dir: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            enabled: true,
            training_interval_seconds: 60,
            checkpoint_interval_seconds: 600,
            max_checkpoints_per_round: 12,
            model_expire_minutes: 30,
            cold_start_hours: 24,
            safety_margin_percent: 10,
            cpu_half_life_hours: 12,
            memory_half_life_hours: 24,
            checkpoint_dir: None,
        }
    }
}

pub const NODE_MODEL: &str = "__node__";
pub const SYS_MODEL: &str = "__node-sys__";

/// `__node-<class>__` for koord-prod … koord-free, `__node-none__` for pods without class.
pub fn class_model(class: &str) -> String {
    format!("__node-{}__", if class.is_empty() { "none" } else { class })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub cpu: DecayingHistogram,
    pub memory: DecayingHistogram,
    /// Seconds since the epoch.
    pub last_update: i64,
    #[serde(default)]
    pub last_checkpoint: i64,
}

impl Model {
    fn new(cfg: &Config) -> Self {
        Model {
            cpu: DecayingHistogram::new((cfg.cpu_half_life_hours * 3600) as i64),
            memory: DecayingHistogram::new((cfg.memory_half_life_hours * 3600) as i64),
            last_update: 0,
            last_checkpoint: 0,
        }
    }

    /// (cpu cores, memory bytes) at the given percentiles.
    pub fn percentiles(&self, cpu_p: f64, mem_p: f64) -> (f64, f64) {
        (
            self.cpu.percentile(&Buckets::cpu(), cpu_p),
            self.memory.percentile(&Buckets::memory(), mem_p),
        )
    }
}

pub struct Predictor {
    cfg: Config,
    models: HashMap<String, Model>,
}

impl Predictor {
    pub fn new(cfg: Config) -> Self {
        Predictor {
            cfg,
            models: HashMap::new(),
        }
    }

    pub fn model(&self, key: &str) -> Option<&Model> {
        self.models.get(key)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn add(&mut self, key: &str, cpu: f64, mem: f64, now_s: i64) {
        let cfg = &self.cfg;
        let m = self
            .models
            .entry(key.to_string())
            .or_insert_with(|| Model::new(cfg));
        m.cpu.add(&Buckets::cpu(), cpu, 1.0, now_s);
        m.memory.add(&Buckets::memory(), mem, 1.0, now_s);
        m.last_update = now_s;
    }

    /// One training round: p90 of the last interval of every pod, the class totals, the
    /// node and the system (node − all pods).
    pub fn train(
        &mut self,
        store: &MetricStore,
        states: &States,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let start = now_ms - (self.cfg.training_interval_seconds.max(1) * 1000) as i64;
        let now_s = now_ms / 1000;
        let p90 = |key: &SeriesKey| -> Result<Option<f64>, StoreError> {
            Ok(store.aggregate(key, start, now_ms)?.map(|a| a.p90))
        };
        let mut classes: HashMap<String, (f64, f64)> =
            ["koord-prod", "koord-mid", "koord-batch", "koord-free", ""]
                .iter()
                .map(|c| (c.to_string(), (0.0, 0.0)))
                .collect();
        let mut all = (0.0, 0.0);
        for p in states.pods.iter() {
            let cpu = p90(&SeriesKey::pod(MetricKind::PodCpuUsage, &p.uid))?;
            let mem = p90(&SeriesKey::pod(MetricKind::PodMemoryUsage, &p.uid))?;
            let (Some(cpu), Some(mem)) = (cpu, mem) else {
                continue;
            };
            self.add(&p.uid, cpu, mem, now_s);
            let class = pod_priority_class_with_default(&p.pod).name().to_string();
            let e = classes.entry(class).or_default();
            e.0 += cpu;
            e.1 += mem;
            all.0 += cpu;
            all.1 += mem;
        }
        for (class, (cpu, mem)) in classes {
            self.add(&class_model(&class), cpu, mem, now_s);
        }
        let node_cpu = p90(&SeriesKey::node(MetricKind::NodeCpuUsage))?;
        let node_mem = p90(&SeriesKey::node(MetricKind::NodeMemoryUsage))?;
        if let (Some(c), Some(m)) = (node_cpu, node_mem) {
            self.add(NODE_MODEL, c, m, now_s);
            self.add(SYS_MODEL, (c - all.0).max(0.0), (m - all.1).max(0.0), now_s);
        }
        let expire = (self.cfg.model_expire_minutes * 60) as i64;
        self.models.retain(|_, m| now_s - m.last_update <= expire);
        Ok(())
    }

    /// Saves up to `maxCheckpointsPerRound` models not saved for a checkpoint interval.
    pub fn checkpoint(
        &mut self,
        to: &dyn Checkpoints,
        now_ms: i64,
        all: bool,
    ) -> Result<usize, CheckpointError> {
        let now_s = now_ms / 1000;
        let every = self.cfg.checkpoint_interval_seconds as i64;
        let mut due: Vec<&String> = self
            .models
            .iter()
            .filter(|(_, m)| all || now_s - m.last_checkpoint >= every)
            .map(|(k, _)| k)
            .collect();
        due.sort();
        let limit = if all {
            usize::MAX
        } else {
            self.cfg.max_checkpoints_per_round
        };
        let keys: Vec<String> = due.into_iter().take(limit).cloned().collect();
        for key in &keys {
            if let Some(m) = self.models.get_mut(key) {
                m.last_checkpoint = now_s;
                to.put(key, &serde_json::to_vec(m).unwrap_or_default())?;
            }
        }
        for stale in to.keys() {
            if !self.models.contains_key(&stale) {
                to.remove(&stale)?;
            }
        }
        Ok(keys.len())
    }

    /// Loads the checkpointed models (a restart does not reset prediction).
    pub fn restore(&mut self, from: &dyn Checkpoints) -> Result<usize, CheckpointError> {
        let mut n = 0;
        for key in from.keys() {
            let Some(bytes) = from.get(&key)? else {
                continue;
            };
            match serde_json::from_slice::<Model>(&bytes) {
                Ok(m) => {
                    self.models.insert(key, m);
                    n += 1;
                }
                Err(e) => {
                    tracing::warn!(key, error = %e, "unreadable prediction checkpoint; dropped")
                }
            }
        }
        Ok(n)
    }

    pub fn training_interval(&self) -> Duration {
        Duration::from_secs(self.cfg.training_interval_seconds.max(1))
    }
}
