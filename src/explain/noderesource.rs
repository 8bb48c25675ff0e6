//! `koord explain noderesource`: the manager's NodeResource calculation over a snapshot.

use std::collections::HashMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::snapshot::Snapshot;
use crate::api::sloconfig::SloConfig;
use crate::api::topology::NodeResourceTopology;
use crate::manager::controllers::noderesource::{DeviceInputs, Plan, plan};

/// One plan per node, sorted by node name; config warnings go to the second value.
pub fn run(snap: &Snapshot, now_ms: i64) -> (Vec<Plan>, Vec<String>) {
    let (cfg, errors) = SloConfig::parse(
        snap.slo_config.as_ref().and_then(|c| c.data.as_ref()),
        &SloConfig::default(),
    );
    let warnings = errors
        .iter()
        .map(|e| {
            format!(
                "slo-controller-config {}: {}; using the defaults for that key",
                e.key, e.message
            )
        })
        .collect();
    let mut by_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for p in &snap.pods {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            by_node.entry(n).or_default().push(&**p);
        }
    }
    let metrics: HashMap<&str, _> = snap
        .node_metrics
        .iter()
        .filter_map(|m| Some((m.metadata.name.as_deref()?, &**m)))
        .collect();
    let devices: HashMap<&str, _> = snap
        .devices
        .iter()
        .filter_map(|d| Some((d.metadata.name.as_deref()?, d)))
        .collect();
    let topologies: HashMap<String, NodeResourceTopology> = snap
        .other
        .iter()
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("NodeResourceTopology"))
        .filter_map(|v| crate::api::decode::from_value::<NodeResourceTopology>(v.clone()).ok())
        .filter_map(|t| Some((t.metadata.name.clone()?, t)))
        .collect();
    let mut nodes: Vec<_> = snap.nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let plans = nodes
        .into_iter()
        .map(|n| {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let pods = by_node.get(name).map(Vec::as_slice).unwrap_or_default();
            let devices = DeviceInputs {
                device: devices.get(name).copied(),
                sync_gpu_shared: false,
            };
            plan(
                n,
                pods,
                metrics.get(name).copied(),
                &devices,
                topologies.get(name),
                &cfg,
                now_ms,
                None,
            )
        })
        .collect();
    (plans, warnings)
}

pub fn to_json(plans: &[Plan]) -> Value {
    let nodes: Vec<Value> = plans
        .iter()
        .map(|p| {
            json!({
                "node": p.calc.node,
                "allocatable": p.want,
                "degraded": p.calc.degraded,
                "message": p.calc.message,
                "terms": {
                    "colocationEnabled": p.calc.colocation_enabled,
                    "metricAgeSeconds": p.calc.metric_age_seconds,
                    "degradeTimeMinutes": p.calc.degrade_time_minutes,
                    "batch": p.calc.batch,
                    "batchZones": p.calc.batch_zones,
                    "mid": p.calc.mid,
                }
            })
        })
        .collect();
    json!({ "nodes": nodes })
}

fn cell(p: &Plan, r: &str) -> String {
    p.want
        .get(r)
        .map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub fn to_text(plans: &[Plan]) -> String {
    use crate::api::extension::resources::{BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY};
    let mut out = format!(
        "{:<24} {:>12} {:>16} {:>10} {:>16} {:>9}\n",
        "NODE", "BATCH-CPU(m)", "BATCH-MEMORY", "MID-CPU(m)", "MID-MEMORY", "DEGRADED"
    );
    for p in plans {
        let _ = writeln!(
            out,
            "{:<24} {:>12} {:>16} {:>10} {:>16} {:>9}",
            p.calc.node,
            cell(p, BATCH_CPU),
            cell(p, BATCH_MEMORY),
            cell(p, MID_CPU),
            cell(p, MID_MEMORY),
            p.calc.degraded
        );
    }
    for p in plans {
        let _ = writeln!(out, "\n{}: {}", p.calc.node, p.calc.message);
        if let Some(b) = &p.calc.batch {
            for (what, cpu, mem) in [
                ("capacity", b.capacity.cpu, b.capacity.memory),
                (
                    "safety margin (100 - reclaim%)",
                    b.safety_margin.cpu,
                    b.safety_margin.memory,
                ),
                (
                    "kubelet reserved",
                    b.kubelet_reserved.cpu,
                    b.kubelet_reserved.memory,
                ),
                (
                    "annotation reserved",
                    b.annotation_reserved.cpu,
                    b.annotation_reserved.memory,
                ),
                ("system used", b.system_used.cpu, b.system_used.memory),
                (
                    "max(system, reserved)",
                    b.system_or_reserved.cpu,
                    b.system_or_reserved.memory,
                ),
                ("HP request", b.hp_request.cpu, b.hp_request.memory),
                ("HP used", b.hp_used.cpu, b.hp_used.memory),
                (
                    "HP max(used, request)",
                    b.hp_max_used_request.cpu,
                    b.hp_max_used_request.memory,
                ),
                ("by usage", b.by_usage.cpu, b.by_usage.memory),
                ("by request", b.by_request.cpu, b.by_request.memory),
                (
                    "by maxUsageRequest",
                    b.by_max_usage_request.cpu,
                    b.by_max_usage_request.memory,
                ),
                ("batch result", b.result.cpu, b.result.memory),
            ] {
                let _ = writeln!(out, "  {what:<32} cpu {cpu:>10}m  memory {mem:>16}");
            }
            let _ = writeln!(
                out,
                "  policies: cpu {:?}, memory {:?}; pods counted {}, without metric {}, dangling metrics {}",
                b.cpu_policy,
                b.memory_policy,
                b.pods_counted,
                b.pods_without_metric,
                b.dangling_metrics
            );
        }
        if let Some(m) = &p.calc.mid {
            let _ = writeln!(
                out,
                "  mid ({}): min(prodReclaimable {}m, unused {}m) + unallocated {}m x {}% (cap {}m) = {}m; memory {}",
                m.mode,
                m.prod_reclaimable.cpu,
                m.unused.cpu,
                m.unallocated.cpu,
                m.unallocated_percent,
                m.threshold_cap.cpu,
                m.result.cpu,
                m.result.memory
            );
        }
    }
    out
}
