//! sysreconcile (`pkg/koordlet/qosmanager/plugins/sysreconcile/system_config.go`): kernel knobs from the NodeSLO `systemStrategy` —
//! `vm/min_free_kbytes` = memory capacity (KiB) × minFreeKbytesFactor / 10000 (kept within
//! 10 MiB – 10 GiB), `vm/watermark_scale_factor` (10 – 400), the memcg reaper, group
//! identity, the idle-saver watermark and the page-cache limit switches (Alibaba Cloud
//! Linux kernels), and `sched_features` toggles. Written only when different; knobs the
//! kernel lacks are skipped.

use super::context::{QosCtx, count};
use super::runner::{Entry, Round, Strategy};
use crate::api::slo::nodeslo::SystemStrategy;
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::os::system::{Host, Knob};
use futures::FutureExt;
use futures::future::BoxFuture;

pub const MIN_FREE_KBYTES: Knob = Knob::Proc("sys/vm/min_free_kbytes");
pub const WATERMARK_SCALE_FACTOR: Knob = Knob::Proc("sys/vm/watermark_scale_factor");
pub const MEMCG_REAP_BACKGROUND: Knob = Knob::Sys("kernel/mm/memcg_reaper/reap_background");
pub const SCHED_GROUP_IDENTITY: Knob = Knob::Proc("sys/kernel/sched_group_identity_enabled");
pub const SCHED_IDLE_SAVER_WMARK: Knob = Knob::Proc("sys/kernel/sched_idle_saver_wmark");
pub const PAGECACHE_LIMIT: Knob = Knob::Sys("kernel/mm/pagecache_limit/enabled");
pub const SCHED_FEATURES: Knob = Knob::Sys("kernel/debug/sched_features");

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
    let switch = |v: Option<i64>| v.filter(|v| *v == 0 || *v == 1);
    if let Some(r) = switch(s.memcg_reap_back_ground) {
        out.push((MEMCG_REAP_BACKGROUND, r));
    }
    if let Some(g) = switch(s.sched_group_identity_enabled) {
        out.push((SCHED_GROUP_IDENTITY, g));
    }
    if let Some(w) = s.sched_idle_saver_wmark.filter(|w| *w >= 0) {
        out.push((SCHED_IDLE_SAVER_WMARK, w));
    }
    if let Some(p) = switch(s.page_cache_limit_enabled) {
        out.push((PAGECACHE_LIMIT, p));
    }
    out
}

/// The writes that bring `sched_features` (`A NO_B C …`) to `wanted`: `NAME` switches a
/// feature on, `NO_NAME` off; features this kernel does not list are skipped.
pub fn sched_feature_writes(
    current: &str,
    wanted: &std::collections::BTreeMap<String, bool>,
) -> Vec<String> {
    let listed: std::collections::BTreeMap<&str, bool> = current
        .split_whitespace()
        .map(|f| f.strip_prefix("NO_").map_or((f, true), |n| (n, false)))
        .collect();
    wanted
        .iter()
        .filter_map(|(name, on)| {
            let cur = listed.get(name.as_str())?;
            (cur != on).then(|| {
                if *on {
                    name.clone()
                } else {
                    format!("NO_{name}")
                }
            })
        })
        .collect()
}

/// Applies the node's system strategy; returns the knobs changed as (knob, old, new).
pub fn pass(states: &States, host: &Host) -> Vec<(Knob, String, String)> {
    let Some(s) = states.slo().system.clone() else {
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
    if let (Some(want), Some(cur)) = (&s.sched_features, host.read_knob(&SCHED_FEATURES)) {
        for w in sched_feature_writes(&cur, want) {
            match host.write_knob(&SCHED_FEATURES, &w) {
                Ok(()) => changed.push((SCHED_FEATURES, cur.clone(), w)),
                Err(e) => tracing::warn!(error = %e, "sched feature not switched"),
            }
        }
    }
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

/// SystemConfig every second: kernel memory knobs from the NodeSLO systemStrategy.
pub struct SysReconcile {
    pub host: Host,
}

impl Strategy for SysReconcile {
    fn name(&self) -> &'static str {
        "sysreconcile"
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for (knob, _, _) in pass(states, &self.host) {
            count(ctx, "sysreconcile", format!("{knob:?}"), 1);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// SystemConfig.
pub const ENTRY: Entry = Entry {
    gate: features::SYSTEM_CONFIG,
    build: |d| {
        Box::new(SysReconcile {
            host: d.host.clone(),
        })
    },
};

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
    fn scheduler_knobs_and_features() {
        let s = |v: serde_json::Value| -> SystemStrategy { serde_json::from_value(v).unwrap() };
        assert_eq!(
            wanted(
                &s(
                    json!({"schedGroupIdentityEnabled": 1, "schedIdleSaverWmark": 5, "pageCacheLimitEnabled": 0})
                ),
                0
            ),
            vec![
                (SCHED_GROUP_IDENTITY, 1),
                (SCHED_IDLE_SAVER_WMARK, 5),
                (PAGECACHE_LIMIT, 0)
            ]
        );
        assert!(wanted(&s(json!({"schedGroupIdentityEnabled": 2})), 0).is_empty());
        let want: std::collections::BTreeMap<String, bool> = [
            ("GENTLE_FAIR_SLEEPERS".to_string(), false),
            ("ID_ABSOLUTE_EXPEL".to_string(), true),
            ("START_DEBIT".to_string(), true),
            ("NOT_HERE".to_string(), true),
        ]
        .into();
        assert_eq!(
            sched_feature_writes(
                "GENTLE_FAIR_SLEEPERS START_DEBIT NO_ID_ABSOLUTE_EXPEL",
                &want
            ),
            ["NO_GENTLE_FAIR_SLEEPERS", "ID_ABSOLUTE_EXPEL"]
        );
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
