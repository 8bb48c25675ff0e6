//! `koord explain deschedule`: one pass of the descheduler's own code over a snapshot, with
//! fresh anomaly detectors. PodMigrationJobs in the snapshot count against the limits.

use super::ExplainError;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use serde_json::Value;

use super::Snapshot;
use crate::api::scheduling::migration::PodMigrationJob;
use crate::descheduler::configfile as config;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::framework::world::World;
use crate::descheduler::framework::{Plugins, Report};

/// The world a snapshot describes.
pub fn world(snap: &Snapshot) -> Result<World, ExplainError> {
    world_with(snap, |p| Arc::new(PodView::from(&**p)))
}

/// [`world`], with each pod's view from `view` (a replay reuses the views of pods that did
/// not change since its last pass).
pub fn world_with(
    snap: &Snapshot,
    view: impl FnMut(&Arc<Pod>) -> Arc<PodView>,
) -> Result<World, ExplainError> {
    let mut jobs = Vec::new();
    for v in snap
        .other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("PodMigrationJob"))
    {
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>");
        let j: PodMigrationJob =
            crate::api::decode::from_value(v.clone()).map_err(|e| ExplainError::Object {
                kind: "PodMigrationJob",
                name: name.to_string(),
                reason: e.to_string(),
            })?;
        jobs.push(j);
    }
    Ok(World::build(
        snap.nodes.iter().cloned(),
        snap.pods.iter().map(view),
        snap.node_metrics.iter().cloned(),
        &jobs,
        &snap.other,
    ))
}

pub fn run(snap: &Snapshot, config: Option<&Path>, now_ms: i64) -> Result<Report, ExplainError> {
    let cfg = config::load(config)?;
    let mut plugins = Plugins::build(
        &cfg,
        cfg.interval.as_millis() as u64,
        crate::descheduler::plugins::registry,
    )?;
    Ok(plugins.run(&world(snap)?, now_ms))
}
