//! OOMScoreAdj (`pkg/koordlet/runtimehooks/hooks/oomscoreadj`, a reconciler in Koordinator
//! too): the processes of a container get the `oom_score_adj` its pod asks for, from
//! `koordinator.sh/oom-score-adj-spec` (`{"container": -500}`) or else
//! `koordinator.sh/oom-score-adj` (the pod default). Checked every 5 s, so the annotation
//! can change while the containers run; removing it does not restore the old values.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::context::QosCtx;
use super::executor::Executor;
use super::runner::Entry;
use super::runner::{Round, Strategy};
use crate::koordlet::features;
use crate::koordlet::informer::States;

pub const ANNOTATION_OOM_SCORE_ADJ: &str = "koordinator.sh/oom-score-adj";
pub const ANNOTATION_OOM_SCORE_ADJ_SPEC: &str = "koordinator.sh/oom-score-adj-spec";

/// The value a container should have, if its pod asks for one within [-1000, 1000].
pub fn target(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    container: &str,
) -> Option<i64> {
    let a = annotations?;
    let from_spec = a
        .get(ANNOTATION_OOM_SCORE_ADJ_SPEC)
        .and_then(|s| serde_json::from_str::<std::collections::BTreeMap<String, i64>>(s).ok())
        .and_then(|m| m.get(container).copied());
    let v = from_spec.or_else(|| a.get(ANNOTATION_OOM_SCORE_ADJ)?.trim().parse().ok())?;
    (-1000..=1000).contains(&v).then_some(v)
}

pub struct OomScoreAdj {
    pub ex: Arc<Executor>,
    pub proc_root: PathBuf,
}

impl Strategy for OomScoreAdj {
    fn name(&self) -> &'static str {
        "oomscoreadj"
    }

    fn interval(&self) -> Duration {
        Duration::from_secs(5)
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        let node = states.node.as_ref().and_then(|n| n.metadata.name.clone());
        let node = node.unwrap_or_default();
        let mut series = Vec::new();
        for pod in states.pods.iter() {
            for c in &pod.containers {
                let Some(want) = target(pod.pod.metadata.annotations.as_ref(), &c.name) else {
                    continue;
                };
                let labels: crate::koordlet::metrics::Pairs = vec![
                    ("node", node.clone()),
                    ("pod_name", pod.name.clone()),
                    ("pod_namespace", pod.namespace.clone()),
                    ("pod_uid", pod.uid.clone()),
                    ("container_name", c.name.clone()),
                ];
                series.push((labels, want as f64));
                for pid in self.ex.cgroups().procs(&c.dir).unwrap_or_default() {
                    let file = self.proc_root.join(pid.to_string()).join("oom_score_adj");
                    let now = crate::os::knob::read_opt(&file);
                    if now.as_deref().map(str::trim) == Some(want.to_string().as_str()) {
                        continue;
                    }
                    if let Err(e) = crate::os::knob::write(&file, &want.to_string()) {
                        tracing::debug!(pod = %pod.name, pid, error = %e, "oom_score_adj not set");
                    }
                }
            }
        }
        ctx.metrics.ops.set_oom_score_adj(series);
        futures::future::ready(Round::DONE).boxed()
    }
}

/// OOMScoreAdj.
pub const ENTRY: Entry = Entry {
    gate: features::OOM_SCORE_ADJ,
    build: |d| {
        Box::new(OomScoreAdj {
            ex: d.executor.clone(),
            proc_root: d.host.proc_root.clone(),
        })
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_specs_win_over_the_pod_default() {
        let a: std::collections::BTreeMap<String, String> = [
            (ANNOTATION_OOM_SCORE_ADJ.to_string(), "100".to_string()),
            (
                ANNOTATION_OOM_SCORE_ADJ_SPEC.to_string(),
                r#"{"db": -500, "bad": 5000}"#.to_string(),
            ),
        ]
        .into();
        assert_eq!(target(Some(&a), "db"), Some(-500));
        assert_eq!(target(Some(&a), "web"), Some(100));
        assert_eq!(target(Some(&a), "bad"), None, "out of range: left alone");
        assert_eq!(target(None, "web"), None);
    }

    #[test]
    fn the_containers_processes_get_the_value() {
        use crate::koordlet::informer::PodMeta;
        use crate::os::{Cgroups, Driver, Version};
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(dir.path().join("cg"), Version::V1, Driver::Cgroupfs, "");
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u1",
                         "annotations": {ANNOTATION_OOM_SCORE_ADJ: "-300"}},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"qosClass": "BestEffort", "containerStatuses": [{"name": "c",
                "containerID": "containerd://abc", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0}]}}))
        .unwrap();
        let meta = PodMeta::new(pod, &cg).unwrap();
        for sub in ["cpu", "memory", "cpuset", "cpuacct", "blkio", "pids"] {
            let d = dir
                .path()
                .join("cg")
                .join(sub)
                .join(meta.containers[0].dir.as_str());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "4242\n").unwrap();
        }
        let proc_root = dir.path().join("proc");
        std::fs::create_dir_all(proc_root.join("4242")).unwrap();
        std::fs::write(proc_root.join("4242/oom_score_adj"), "0\n").unwrap();
        let states = States {
            pods: Arc::new(vec![meta]),
            ..Default::default()
        };
        let mut s = OomScoreAdj {
            ex: Arc::new(Executor::new(cg, Duration::from_secs(60))),
            proc_root: proc_root.clone(),
        };
        let ctx = super::super::hookreconcile::tests::test_ctx(&states);
        futures::executor::block_on(s.tick(&ctx, &states));
        assert_eq!(
            std::fs::read_to_string(proc_root.join("4242/oom_score_adj")).unwrap(),
            "-300"
        );
    }
}
