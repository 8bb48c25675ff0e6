//! What-if capacity (`--add 'template.yaml x 500'`): after the replay, copies of a pod are
//! scheduled one after another on what the replay left; how many fit, where, and — for the
//! first that does not — the scheduler's answer (the ScheduleExplanation status: which
//! plugins refused which nodes). The copies are identical, so the rest would meet the same
//! answer on the same state.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::replay::{Engine, WhatIf};
use crate::scheduler::explanation::{self, Asked};
use crate::scheduler::framework::PodInfo;

/// Copies asked for at most.
pub const MAX_COPIES: usize = 1_000_000;

#[derive(Debug, Clone)]
pub struct Template {
    pub file: String,
    pub pod: Pod,
    pub count: usize,
}

/// Parses `FILE x N` (or `FILE`, one copy): the file holds a Pod, or a workload whose
/// `spec.template` is one (Deployment, Job, StatefulSet, ReplicaSet, …).
pub fn parse(spec: &str) -> Result<Template, String> {
    let (file, count) = match spec.rsplit_once(" x ") {
        Some((f, n)) => {
            let n: usize = n
                .trim()
                .parse()
                .map_err(|_| format!("--add {spec:?}: {n:?} is not a count"))?;
            (f.trim(), n)
        }
        None => (spec.trim(), 1),
    };
    if count == 0 || count > MAX_COPIES {
        return Err(format!("--add {spec:?}: count must be 1..={MAX_COPIES}"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let doc: Value = serde_yaml::from_str(&text).map_err(|e| format!("{file}: not YAML: {e}"))?;
    let pod = pod_of(&doc).map_err(|e| format!("{file}: {e}"))?;
    Ok(Template {
        file: file.to_string(),
        pod,
        count,
    })
}

fn pod_of(doc: &Value) -> Result<Pod, String> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let v = if kind == "Pod" {
        doc.clone()
    } else {
        let t = doc
            .pointer("/spec/template")
            .or_else(|| doc.pointer("/spec/jobTemplate/spec/template"))
            .ok_or_else(|| format!("kind {kind:?} is neither a Pod nor has spec.template"))?;
        let mut t = t.clone();
        let ns = doc.pointer("/metadata/namespace").cloned();
        let name = doc.pointer("/metadata/name").cloned();
        let meta = t["metadata"].as_object_mut();
        if let Some(m) = meta {
            m.entry("namespace").or_insert(ns.unwrap_or(Value::Null));
            m.entry("name").or_insert(name.unwrap_or(Value::Null));
        } else {
            t["metadata"] = serde_json::json!({"namespace": ns, "name": name});
        }
        t
    };
    crate::api::decode::from_value(v).map_err(|e| e.to_string())
}

pub fn run(e: &mut Engine, t: &Template) -> WhatIf {
    let mut out = WhatIf {
        template: t.file.clone(),
        asked: t.count,
        fit: 0,
        nodes: BTreeMap::new(),
        stopped: None,
    };
    let base = t
        .pod
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "what-if".into());
    let default_profile = e.fws.first().map(|f| f.scheduler_name.clone());
    for i in 0..t.count {
        let mut pod = t.pod.clone();
        pod.metadata.name = Some(format!("{base}-{i}"));
        pod.metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        pod.metadata.uid = Some(format!("what-if-{i}"));
        if let Some(s) = pod.spec.as_mut() {
            s.node_name = None;
            if s.scheduler_name.is_none() {
                s.scheduler_name = default_profile.clone();
            }
        }
        e.resolve_priority(&mut pod);
        let info: Arc<PodInfo> = e.cluster.upsert_pod(Arc::new(pod));
        let Some(attempt) = e.attempt(&info) else {
            out.stopped = Some(explanation::not_found(&info.key));
            break;
        };
        match attempt.node() {
            Some(node) => {
                out.fit += 1;
                *out.nodes.entry(node.to_string()).or_insert(0) += 1;
            }
            None => {
                let asked = [Asked {
                    pod: &info,
                    attempt: &attempt,
                }];
                out.stopped = Some(explanation::status(&asked, &e.cluster));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_a_pod_or_a_workloads_pod_template() {
        let dir = tempfile::tempdir().unwrap();
        let deploy = dir.path().join("d.yaml");
        std::fs::write(
            &deploy,
            "kind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: x}]\n",
        )
        .unwrap();
        let t = parse(&format!("{} x 500", deploy.display())).unwrap();
        assert_eq!(t.count, 500);
        assert_eq!(t.pod.metadata.name.as_deref(), Some("web"));
        assert_eq!(t.pod.metadata.namespace.as_deref(), Some("shop"));
        let pod = dir.path().join("p.yaml");
        std::fs::write(
            &pod,
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n",
        )
        .unwrap();
        assert_eq!(parse(pod.to_str().unwrap()).unwrap().count, 1);
        let e = parse(&format!("{} x many", pod.display())).unwrap_err();
        assert!(e.contains("\"many\" is not a count"), "{e}");
        let e = parse(&format!("{} x 0", pod.display())).unwrap_err();
        assert!(e.contains("count must be"), "{e}");
        let cm = dir.path().join("cm.yaml");
        std::fs::write(&cm, "kind: ConfigMap\nmetadata: {name: c}\n").unwrap();
        let e = parse(cm.to_str().unwrap()).unwrap_err();
        assert!(e.contains("cm.yaml") && e.contains("spec.template"), "{e}");
    }
}
