//! sysreconcile (koordlet spec §4.8): kernel memory knobs from the NodeSLO
//! `systemStrategy` — `vm/min_free_kbytes` = memory capacity (KiB) × minFreeKbytesFactor /
//! 10000 (kept within 10 MiB – 10 GiB), `vm/watermark_scale_factor` (10 – 400), and the
//! memcg reaper switch. Written only when different; knobs the kernel lacks are skipped.

use crate::api::slo::nodeslo::SystemStrategy;
use crate::koordlet::informer::States;
use crate::koordlet::os::system::{Host, Knob};

pub const MIN_FREE_KBYTES: Knob = Knob::Proc("sys/vm/min_free_kbytes");
pub const WATERMARK_SCALE_FACTOR: Knob = Knob::Proc("sys/vm/watermark_scale_factor");
pub const MEMCG_REAP_BACKGROUND: Knob = Knob::Sys("kernel/mm/memcg_reaper/reap_background");

/// (knob, value) pairs the strategy asks for, out-of-range ones dropped.
pub fn wanted(s: &SystemStrategy, memory_capacity_bytes: i64) -> Vec<(Knob, i64)> {
    let mut out = Vec::new();
    if let Some(f) = s.min_free_kbytes_factor.filter(|f| *f > 0) {
        let kib = memory_capacity_bytes / 1024 * f / 10_000;
        if (10 * 1024..=10 * 1024 * 1024).contains(&kib) {
            out.push((MIN_FREE_KBYTES, kib));
        }
    }
    if let Some(w) = s.watermark_scale_factor.filter(|w| (10..=400).contains(w)) {
        out.push((WATERMARK_SCALE_FACTOR, w));
    }
    if let Some(r) = s.memcg_reap_back_ground.filter(|r| *r == 0 || *r == 1) {
        out.push((MEMCG_REAP_BACKGROUND, r));
    }
    out
}

/// Applies the node's system strategy; returns the knobs changed as (knob, old, new).
pub fn pass(states: &States, host: &Host) -> Vec<(Knob, String, String)> {
    let Some(s) = states
        .node_slo
        .as_ref()
        .and_then(|n| n.spec.system_strategy.clone())
    else {
        return Vec::new();
    };
    let capacity = states
        .node
        .as_ref()
        .and_then(|n| n.status.as_ref())
        .and_then(|st| st.capacity.as_ref())
        .and_then(|c| c.get("memory"))
        .map(crate::api::quantity::q_value)
        .unwrap_or(0);
    let mut changed = Vec::new();
    for (knob, v) in wanted(&s, capacity) {
        let Some(old) = host.read_knob(&knob) else {
            continue;
        };
        let new = v.to_string();
        if old == new {
            continue;
        }
        match host.write_knob(&knob, &new) {
            Ok(()) => {
                tracing::info!(?knob, %old, %new, "kernel setting updated");
                changed.push((knob, old, new));
            }
            Err(e) => tracing::warn!(error = %e, "kernel setting not written"),
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn knobs_follow_the_strategy_and_ranges() {
        let s = |v: serde_json::Value| -> SystemStrategy { serde_json::from_value(v).unwrap() };
        let gib = 1i64 << 30;
        // 64 GiB × 100 / 10000 = 1 % = 671088 KiB.
        assert_eq!(
            wanted(&s(json!({"minFreeKbytesFactor": 100})), 64 * gib),
            vec![(MIN_FREE_KBYTES, 671_088)]
        );
        assert!(
            wanted(&s(json!({"minFreeKbytesFactor": 1})), gib).is_empty(),
            "under 10 MiB is refused"
        );
        assert_eq!(
            wanted(
                &s(json!({"watermarkScaleFactor": 150, "memcgReapBackGround": 1})),
                gib
            ),
            vec![(WATERMARK_SCALE_FACTOR, 150), (MEMCG_REAP_BACKGROUND, 1)]
        );
        assert!(wanted(&s(json!({"watermarkScaleFactor": 500})), gib).is_empty());
    }

    #[test]
    fn writes_only_what_differs_and_exists() {
        let proc_root = tempfile::tempdir().unwrap();
        let sys_root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(proc_root.path().join("sys/vm")).unwrap();
        std::fs::write(
            proc_root.path().join("sys/vm/watermark_scale_factor"),
            "10\n",
        )
        .unwrap();
        std::fs::write(proc_root.path().join("sys/vm/min_free_kbytes"), "67584\n").unwrap();
        let host = Host::new(proc_root.path(), sys_root.path());
        let slo = json!({"metadata": {"name": "n"}, "spec": {"systemStrategy": {"watermarkScaleFactor": 150, "memcgReapBackGround": 1}}});
        let node = json!({"metadata": {"name": "n"}, "status": {"capacity": {"memory": "64Gi"}}});
        let states = States {
            node: Some(Arc::new(serde_json::from_value(node).unwrap())),
            node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
            ..Default::default()
        };
        let changed = pass(&states, &host);
        assert_eq!(
            changed,
            vec![(WATERMARK_SCALE_FACTOR, "10".to_string(), "150".to_string())],
            "no memcg reaper here: skipped"
        );
        assert_eq!(
            std::fs::read_to_string(proc_root.path().join("sys/vm/watermark_scale_factor"))
                .unwrap(),
            "150"
        );
        assert!(pass(&states, &host).is_empty(), "already set");
        assert_eq!(
            std::fs::read_to_string(proc_root.path().join("sys/vm/min_free_kbytes"))
                .unwrap()
                .trim(),
            "67584",
            "not asked for: untouched"
        );
    }
}
