//! Prod reclaimable and prod peak: the minimum of a per-pod and a per-priority predictor
//! over prod (and class-less) pods (`peak_predictor.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Predictor, SYS_MODEL, class_model};
use crate::api::extension::PriorityClass;
use crate::api::extension::keys::ANNOTATION_NODE_RAW_ALLOCATABLE;
use crate::api::extension::priority::pod_priority_class_with_default;
use crate::api::pod::{amounts, pod_requests};
use crate::api::quantity::{cpu_from_milli, from_int};
use crate::koordlet::informer::States;

/// (cpu milli, memory bytes).
type Pair = (f64, f64);

fn allocatable(node: &Node) -> Pair {
    let raw = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_NODE_RAW_ALLOCATABLE))
        .and_then(|s| serde_json::from_str::<BTreeMap<String, Quantity>>(s).ok());
    let list = raw.or_else(|| node.status.as_ref().and_then(|s| s.allocatable.clone()));
    let a = amounts(list.as_ref());
    (
        a.get("cpu").copied().unwrap_or(0) as f64,
        a.get("memory").copied().unwrap_or(0) as f64,
    )
}

fn to_list(p: Pair) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), cpu_from_milli(p.0.max(0.0) as i64)),
        ("memory".to_string(), from_int(p.1.max(0.0) as i64)),
    ])
}

/// (prodReclaimable, prodPeak) for `now_s`, or `None` without a node.
pub fn prod_reclaimable(
    pred: &Predictor,
    states: &States,
    now_s: i64,
) -> Option<(BTreeMap<String, Quantity>, BTreeMap<String, Quantity>)> {
    let node = states.node.as_ref()?;
    let alloc = allocatable(node);
    let margin = 1.0 + pred.config().safety_margin_percent as f64 / 100.0;
    let cold = (pred.config().cold_start_hours * 3600) as i64;
    let (mut reclaimable, mut unreclaimable, mut unpredicted, mut requests) =
        ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    for p in states.pods.iter() {
        if !matches!(
            pod_priority_class_with_default(&p.pod),
            PriorityClass::Prod | PriorityClass::None
        ) {
            continue;
        }
        let terminal = matches!(
            p.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if p.pod.metadata.deletion_timestamp.is_some() || terminal {
            continue;
        }
        let req = pod_requests(&p.pod);
        let req = (
            req.get("cpu").copied().unwrap_or(0) as f64,
            req.get("memory").copied().unwrap_or(0) as f64,
        );
        requests = (requests.0 + req.0, requests.1 + req.1);
        let created = p
            .pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(now_s);
        match pred.model(&p.uid) {
            Some(m) if now_s - created >= cold => {
                let (c, mem) = m.percentiles(0.95, 0.98);
                let peak = (c * 1000.0 * margin, mem * margin);
                unreclaimable = (unreclaimable.0 + peak.0, unreclaimable.1 + peak.1);
                reclaimable = (
                    reclaimable.0 + (req.0 - peak.0).max(0.0),
                    reclaimable.1 + (req.1 - peak.1).max(0.0),
                );
            }
            _ => unpredicted = (unpredicted.0 + req.0, unpredicted.1 + req.1),
        }
    }
    let by_pod = (
        (alloc.0 - unreclaimable.0).max(0.0).min(reclaimable.0),
        (alloc.1 - unreclaimable.1).max(0.0).min(reclaimable.1),
    );
    let peak_pod = (
        unreclaimable.0 + unpredicted.0,
        unreclaimable.1 + unpredicted.1,
    );

    let mut class_un = (0.0, 0.0);
    for key in [
        SYS_MODEL.to_string(),
        class_model("koord-prod"),
        class_model(""),
    ] {
        if let Some(m) = pred.model(&key) {
            let (c, mem) = m.percentiles(0.95, 0.98);
            class_un = (class_un.0 + c * 1000.0 * margin, class_un.1 + mem * margin);
        }
    }
    let by_class = (
        (requests.0 - class_un.0).max(0.0).min(alloc.0 - class_un.0),
        (requests.1 - class_un.1).max(0.0).min(alloc.1 - class_un.1),
    );
    let result = (by_pod.0.min(by_class.0), by_pod.1.min(by_class.1));
    let peak = (peak_pod.0.max(class_un.0), peak_pod.1.max(class_un.1));
    Some((to_list(result), to_list(peak)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::koordlet::informer::PodMeta;
    use crate::koordlet::prediction::Config;
    use crate::koordlet::store::{MetricKind, MetricStore, Point, SeriesKey, StoreOptions};

    #[test]
    fn reclaims_what_old_prod_pods_do_not_use() {
        let cg = crate::os::Cgroups::new(
            "/x",
            crate::os::Version::V1,
            crate::os::Driver::Cgroupfs,
            "",
        );
        let pod = |uid: &str, created: &str| {
            let v = serde_json::json!({"metadata": {"name": uid, "namespace": "d", "uid": uid, "creationTimestamp": created,
                "labels": {"koordinator.sh/priority-class": "koord-prod"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]},
                "status": {"phase": "Running"}});
            PodMeta::new(serde_json::from_value(v).unwrap(), &cg).unwrap()
        };
        let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}))
        .unwrap();
        let states = States {
            node: Some(Arc::new(node)),
            pods: Arc::new(vec![
                pod("old", "2020-01-01T00:00:00Z"),
                pod("young", "2100-01-01T00:00:00Z"),
            ]),
            ..Default::default()
        };
        let store = MetricStore::temporary(StoreOptions::default()).unwrap();
        let now_ms = 4_000_000_000_000i64;
        let mut samples = Vec::new();
        for uid in ["old", "young"] {
            samples.push((
                SeriesKey::pod(MetricKind::PodCpuUsage, uid),
                Point {
                    ts: now_ms - 1000,
                    value: 1.0,
                },
            ));
            samples.push((
                SeriesKey::pod(MetricKind::PodMemoryUsage, uid),
                Point {
                    ts: now_ms - 1000,
                    value: 2.0 * (1u64 << 30) as f64,
                },
            ));
        }
        samples.push((
            SeriesKey::node(MetricKind::NodeCpuUsage),
            Point {
                ts: now_ms - 1000,
                value: 2.5,
            },
        ));
        samples.push((
            SeriesKey::node(MetricKind::NodeMemoryUsage),
            Point {
                ts: now_ms - 1000,
                value: 5.0 * (1u64 << 30) as f64,
            },
        ));
        store.insert(&samples).unwrap();
        let mut pred = Predictor::new(Config::default());
        pred.train(&store, &states, now_ms).unwrap();
        let (reclaimable, peak) = prod_reclaimable(&pred, &states, now_ms / 1000).unwrap();
        let milli = crate::api::quantity::q_milli(&reclaimable["cpu"]);
        // The old pod asks 4 cores and peaks near 1.1: about 2.9 cores are reclaimable;
        // the young one (cold start) only adds to the peak.
        assert!((2600..=3000).contains(&milli), "{milli}");
        assert!(crate::api::quantity::q_milli(&peak["cpu"]) >= 4000 + 1000);
        assert_eq!(
            pred.checkpoint(&store, now_ms, true).unwrap(),
            pred.models.len()
        );
        let mut restored = Predictor::new(Config::default());
        assert_eq!(
            restored.restore(&store).unwrap(),
            pred.models.len(),
            "models survive a restart"
        );
        assert_eq!(restored.model("old"), pred.model("old"));
    }
}
