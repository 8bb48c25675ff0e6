//! `NodeNUMAResourceArgs` with Koordinator's v1 defaults.

use super::error::NumaError;
use crate::api::field::FieldError;
use serde::Deserialize;

use crate::scheduler::framework::res::{ResId, intern};
use crate::scheduler::model::topology::{BindPolicy, Strategy};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawArgs {
    #[serde(default, rename = "defaultCPUBindPolicy")]
    pub default_cpu_bind_policy: Option<String>,
    #[serde(default)]
    pub scoring_strategy: Option<RawScoring>,
    #[serde(default, rename = "numaScoringStrategy")]
    pub numa_scoring_strategy: Option<RawScoring>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScoring {
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub resources: Option<Vec<RawResource>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResource {
    pub name: String,
    #[serde(default)]
    pub weight: i64,
}

#[derive(Debug, Clone)]
pub struct Scoring {
    pub strategy: Strategy,
    pub weights: Vec<(ResId, bool, i64)>,
}

#[derive(Debug, Clone)]
pub struct Args {
    /// `None`: LSE/LSR pods without a policy of their own are not pinned.
    pub default_bind: Option<BindPolicy>,
    pub scoring: Scoring,
    /// The NUMA allocate strategy (MostAllocated packs NUMA nodes).
    pub numa_strategy: Strategy,
}

pub fn bind_policy(s: &str) -> Result<Option<BindPolicy>, NumaError> {
    match s {
        "" | "Default" | "None" | "ConstrainedBurst" => Ok(None),
        "FullPCPUs" => Ok(Some(BindPolicy::FullPcpus)),
        "SpreadByPCPUs" => Ok(Some(BindPolicy::SpreadByPcpus)),
        other => Err(NumaError::UnknownBindPolicy(other.to_string())),
    }
}

fn strategy(s: Option<&str>, field: &str) -> Result<Strategy, FieldError> {
    match s {
        None | Some("") | Some("LeastAllocated") => Ok(Strategy::LeastAllocated),
        Some("MostAllocated") => Ok(Strategy::MostAllocated),
        Some(o) => Err(FieldError::new(
            format!("{field}.type"),
            format!("{o:?} is not LeastAllocated or MostAllocated"),
        )),
    }
}

fn scoring(raw: Option<&RawScoring>, field: &str) -> Result<Scoring, FieldError> {
    let strategy = strategy(raw.and_then(|r| r.type_.as_deref()), field)?;
    let resources: Vec<(String, i64)> = match raw.and_then(|r| r.resources.as_ref()) {
        Some(list) if !list.is_empty() => list.iter().map(|r| (r.name.clone(), r.weight)).collect(),
        _ => vec![("cpu".into(), 1), ("memory".into(), 1)],
    };
    let mut weights = Vec::new();
    for (name, w) in resources {
        if !(0..=100).contains(&w) {
            return Err(FieldError::new(
                format!("{field}.resources[{name}].weight"),
                format!("{w} is not within [0, 100]"),
            ));
        }
        let scalar = name != "cpu" && name != "memory" && name != "ephemeral-storage";
        weights.push((intern(&name), scalar, w));
    }
    Ok(Scoring { strategy, weights })
}

impl Args {
    pub fn new(raw: RawArgs) -> Result<Args, FieldError> {
        let default_bind = match raw.default_cpu_bind_policy.as_deref() {
            None => Some(BindPolicy::FullPcpus),
            Some(s) => bind_policy(s)
                .map_err(|e| FieldError::new("defaultCPUBindPolicy", e.to_string()))?,
        };
        let scoring = scoring(raw.scoring_strategy.as_ref(), "scoringStrategy")?;
        let numa = scoring_type(raw.numa_scoring_strategy.as_ref())?;
        Ok(Args {
            default_bind,
            scoring,
            numa_strategy: numa,
        })
    }
}

fn scoring_type(raw: Option<&RawScoring>) -> Result<Strategy, FieldError> {
    strategy(raw.and_then(|r| r.type_.as_deref()), "numaScoringStrategy")
}
