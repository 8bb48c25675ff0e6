//! Koordinator's SchedulingHint: a pod's `internal.scheduling.koordinator.sh/scheduling-hint`
//! (or the deprecated `scheduling.koordinator.sh/scheduling-hint`) names the nodes it must
//! run on (`nodeNames`: PreFilter's result) and an ordered list it should try first
//! (`preferredNodeNames`: the first that passes every Filter is taken alone — the
//! framework's prefer-nodes step, `framework::PREFERRED_NODES`).

use crate::api::field::FieldError;
use std::collections::HashSet;

use serde::Deserialize;

use super::super::framework::{
    ClusterState, CycleState, PREFERRED_NODES, Plugin, PodInfo, Point, PreFilterResult, Status,
};

pub const ANNOTATION: &str = "internal.scheduling.koordinator.sh/scheduling-hint";
pub const ANNOTATION_DEPRECATED: &str = "scheduling.koordinator.sh/scheduling-hint";

/// `SchedulingHintArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// At most this many preferred nodes are tried (default 100).
    #[serde(default = "default_max")]
    pub max_hint_nodes: i32,
}

fn default_max() -> i32 {
    100
}

impl Default for Args {
    fn default() -> Self {
        Args {
            max_hint_nodes: 100,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hint {
    #[serde(default)]
    node_names: Vec<String>,
    #[serde(default)]
    preferred_node_names: Vec<String>,
}

pub struct SchedulingHint {
    max: usize,
}

impl SchedulingHint {
    pub fn new(args: Args) -> Result<SchedulingHint, FieldError> {
        if args.max_hint_nodes <= 0 {
            return Err(FieldError::invalid(
                "maxHintNodes",
                format!("{}: must be greater than 0", args.max_hint_nodes),
            ));
        }
        Ok(SchedulingHint {
            max: args.max_hint_nodes as usize,
        })
    }
}

/// `GetSchedulingHint`: the internal annotation, else the deprecated one; empty is none.
fn hint(pod: &PodInfo) -> Result<Option<Hint>, crate::api::extension::AnnotationError> {
    let ann = pod.pod.metadata.annotations.as_ref();
    let key = [ANNOTATION, ANNOTATION_DEPRECATED]
        .into_iter()
        .find(|k| ann.and_then(|a| a.get(*k)).is_some_and(|v| !v.is_empty()));
    key.map_or(Ok(None), |k| crate::api::extension::json_annotation(ann, k))
}

impl Plugin for SchedulingHint {
    fn name(&self) -> &'static str {
        "SchedulingHint"
    }
    fn points(&self) -> &'static [Point] {
        &[Point::PreFilter]
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &ClusterState,
    ) -> (Status, PreFilterResult) {
        let h = match hint(pod) {
            Err(e) => return (Status::error(e.to_string()), None),
            Ok(None) => return (Status::success(), None),
            Ok(Some(h)) => h,
        };
        if !h.preferred_node_names.is_empty() {
            let mut preferred = h.preferred_node_names;
            preferred.truncate(self.max);
            state.write(PREFERRED_NODES, preferred);
        }
        let allowed = (!h.node_names.is_empty())
            .then(|| h.node_names.into_iter().collect::<HashSet<String>>());
        (Status::success(), allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::runtime::Scope;
    use crate::scheduler::test_util::{cluster, node_json, pod};
    use serde_json::json;

    fn hinted(h: serde_json::Value) -> PodInfo {
        pod(
            json!({"metadata": {"name": "p", "namespace": "d", "annotations": {ANNOTATION: h.to_string()}},
            "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}),
        )
    }

    #[test]
    fn hinted_nodes_and_preferred_nodes() {
        let cfg = crate::scheduler::config::default_config().unwrap();
        let fw = crate::scheduler::config::framework(&cfg.profiles[0]).unwrap();
        assert!(
            cfg.unsupported.iter().all(|u| u.name != "SchedulingHint"),
            "no longer skipped"
        );
        let mut c = cluster(vec![
            node_json("n1", "4", "8Gi"),
            node_json("n2", "4", "8Gi"),
            node_json("n3", "4", "8Gi"),
        ]);
        c.upsert_pod(std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "d"},
            "spec": {"nodeName": "n3", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}})).unwrap()));
        let r = fw.schedule(&hinted(json!({"nodeNames": ["n2"]})), &c, Scope::Everything);
        assert_eq!(r.node.as_deref(), Some("n2"));
        assert_eq!(
            r.verdicts["n1"].reason,
            "node(s) didn't satisfy plugin(s) PreFilter result"
        );
        // n3 is preferred first but does not fit (2 of 4 CPUs used): n1 is taken, alone.
        let r = fw.schedule(
            &hinted(json!({"preferredNodeNames": ["n3", "n1", "n2"]})),
            &c,
            Scope::Everything,
        );
        assert_eq!(r.node.as_deref(), Some("n1"));
        assert_eq!(
            r.verdicts["n2"].reason,
            "node(s) didn't satisfy plugin(s) PreFilter result"
        );
        let bad = hinted(json!("not a hint"));
        let r = fw.schedule(&bad, &c, Scope::Everything);
        assert!(r.node.is_none());
    }
}
