//! Coscheduling (`pkg/scheduler/plugins/coscheduling`): all-or-nothing gangs. A gang pod
//! enters the queue only when its gang group has min children (PreEnqueue, checked again
//! at PreFilter); at Permit it waits until every gang of its group has min members
//! waiting, then the whole group goes on; a Strict gang whose member fails releases every
//! waiting member. PreBind records the gang group on the pod. With `enablePreemption`,
//! PostFilter preempts for the whole job (`preempt.rs`). The gang cache lives in
//! [`ClusterState::gangs`]; waiting and releasing are driven by the scheduling loop.

pub mod preempt;
pub mod status;
pub mod topology;

use crate::api::field::FieldError;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::super::framework::gangs::{GangSettings, gang_of};
use super::super::framework::runtime::NodeVerdict;
use super::super::framework::{
    ClusterState, Code, CycleState, Fits, FitsPod, Nomination, Plugin, PodDraft, PodInfo, Point,
    PreFilterResult, Status,
};

pub const NAME: &str = "Coscheduling";
pub const ANN_BIND_GROUP: &str = "internal.scheduling.koordinator.sh/bind-gang-group-id";
pub const ANN_BIND_COUNT: &str = "internal.scheduling.koordinator.sh/bind-gang-member-count";
const ANN_BIND_GROUP_OLD: &str = "scheduling.koordinator.sh/bind-gang-group-id";
const ANN_BIND_COUNT_OLD: &str = "scheduling.koordinator.sh/bind-gang-member-count";

/// `CoschedulingArgs` with Koordinator's v1 defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct RawArgs {
    default_timeout: Option<String>,
    controller_workers: Option<i64>,
    skip_check_schedule_cycle: Option<bool>,
    enable_preemption: Option<bool>,
    aware_network_topology: Option<bool>,
    default_match_policy: Option<String>,
}

pub struct Coscheduling {
    pub settings: GangSettings,
    /// `enablePreemption`: PostFilter preempts for the whole job (`preempt.rs`).
    pub enable_preemption: bool,
    /// `awareNetworkTopology` (Koordinator's chart sets it): it changes nothing for gangs
    /// without a network-topology spec, as in Koordinator; a gang with one is placed
    /// without its topology (koord has no network-topology planner), warned once.
    pub aware_network_topology: bool,
    warned_topology: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Koordinator's `AnnotationGangNetworkTopologySpec`.
pub const ANN_NETWORK_TOPOLOGY_SPEC: &str = "gang.scheduling.koordinator.sh/network-topology-spec";

impl Coscheduling {
    pub fn new(raw: Option<&Value>) -> Result<Coscheduling, FieldError> {
        let a: RawArgs = super::plain_args(raw)?;
        let default_timeout = crate::api::duration::field_or(
            "defaultTimeout",
            a.default_timeout.as_deref(),
            Duration::from_secs(600),
        )?;
        let policy = a
            .default_match_policy
            .unwrap_or_else(|| "once-satisfied".into());
        if !["once-satisfied", "only-waiting", "waiting-and-running"].contains(&policy.as_str()) {
            return Err(FieldError::new(
                "defaultMatchPolicy",
                format!("unknown policy {policy:?}"),
            ));
        }
        Ok(Coscheduling {
            settings: GangSettings {
                default_timeout,
                default_match_policy: policy,
            },
            enable_preemption: a.enable_preemption.unwrap_or(false),
            aware_network_topology: a.aware_network_topology.unwrap_or(false),
            warned_topology: Default::default(),
        })
    }

    /// Warns once per gang whose pods ask for a network topology koord cannot honour.
    fn note_topology(&self, gang: &str, pod: &PodInfo) {
        let asks = pod.pod.metadata.annotations.as_ref().is_some_and(|a| {
            a.get(ANN_NETWORK_TOPOLOGY_SPEC)
                .is_some_and(|s| !s.is_empty())
        });
        if !(self.aware_network_topology && asks) {
            return;
        }
        let mut warned = self
            .warned_topology
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if warned.len() < 10_000 && warned.insert(gang.to_string()) {
            tracing::warn!(
                gang,
                "awareNetworkTopology: koord has no network-topology planner; this gang's {ANN_NETWORK_TOPOLOGY_SPEC} is not honoured and its members are placed without it"
            );
        }
    }
}

/// What PreFilter learned, for PreBind.
#[derive(Debug, Clone)]
struct GangCycle {
    group_id: String,
    members: usize,
}

impl Plugin for Coscheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Listed at Score in Koordinator's profile, it scores nothing (every node 0).
    fn scores_nothing(&self, _: &CycleState, _: &PodInfo) -> bool {
        true
    }
    fn points(&self) -> &'static [Point] {
        &[
            Point::PreEnqueue,
            Point::PreFilter,
            Point::PostFilter,
            Point::PreScore,
            Point::Score,
            Point::Reserve,
            Point::Permit,
            Point::PreBind,
            Point::PostBind,
        ]
    }
    fn setup(&self, cluster: &mut ClusterState) {
        cluster.gangs.settings = Some(self.settings.clone());
    }
    fn pre_enqueue(&self, pod: &PodInfo, cluster: &ClusterState) -> Status {
        match cluster.gangs.check(&pod.key, &pod.pod) {
            Ok(()) => Status::success(),
            Err(m) => Status::unresolvable(m.to_string()),
        }
    }
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> (Status, PreFilterResult) {
        let Some(id) = gang_of(&pod.pod) else {
            return (Status::skip(), None);
        };
        self.note_topology(&id, pod);
        if let Err(m) = cluster.gangs.check(&pod.key, &pod.pod) {
            return (Status::unresolvable(m.to_string()), None);
        }
        let g = &cluster.gangs;
        let spec = g.spec(&id);
        let members = spec
            .map(|s| {
                s.groups
                    .iter()
                    .filter_map(|m| g.spec(m))
                    .map(|s| s.min)
                    .sum()
            })
            .unwrap_or(0);
        state.write(
            NAME,
            GangCycle {
                group_id: g.group_id(&id),
                members,
            },
        );
        (Status::success(), None)
    }
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &BTreeMap<String, NodeVerdict>,
        _: &Fits<'_>,
        fits_pod: &FitsPod<'_>,
    ) -> (Status, Option<Nomination>) {
        if !self.enable_preemption {
            return (Status::unschedulable(""), None);
        }
        preempt::preempt(pod, cluster, rejected, fits_pod)
    }
    fn permit(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        _: &str,
        cluster: &ClusterState,
    ) -> (Status, Duration) {
        let g = &cluster.gangs;
        let Some(id) = g.gang_id(&pod.key) else {
            return (Status::success(), Duration::ZERO);
        };
        if g.ready(&pod.key) {
            return (Status::success(), Duration::ZERO);
        }
        let wait = Status {
            code: Code::Wait,
            reasons: vec![format!("waiting for the gang group {}", g.group_id(id))],
        };
        (wait, g.wait_time(id))
    }
    fn pre_bind(
        &self,
        state: &CycleState,
        _: &PodInfo,
        _: &str,
        modified: &mut PodDraft,
    ) -> Status {
        let Some(c) = state.read::<GangCycle>(NAME) else {
            return Status::skip();
        };
        let ann = modified.annotations_mut();
        for key in [ANN_BIND_GROUP, ANN_BIND_GROUP_OLD] {
            ann.insert(key.into(), c.group_id.clone());
        }
        for key in [ANN_BIND_COUNT, ANN_BIND_COUNT_OLD] {
            ann.insert(key.into(), c.members.to_string());
        }
        Status::success()
    }
}

pub use crate::scheduler::framework::gangs::rejected_message;

#[cfg(test)]
mod topology_tests {
    use std::sync::Arc;

    use super::*;

    fn pod(spec: Option<&str>) -> PodInfo {
        let mut ann = serde_json::Map::new();
        if let Some(s) = spec {
            ann.insert(ANN_NETWORK_TOPOLOGY_SPEC.into(), s.into());
        }
        PodInfo::new(Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "d", "annotations": ann},
                "spec": {"containers": []}}))
            .unwrap(),
        ))
    }

    /// Koordinator's chart turns awareNetworkTopology on: nothing changes for gangs
    /// without a topology spec; a gang with one is noted once.
    #[test]
    fn only_gangs_asking_for_a_topology_are_noted_once() {
        let on =
            Coscheduling::new(Some(&serde_json::json!({"awareNetworkTopology": true}))).unwrap();
        on.note_topology("d/g1", &pod(None));
        assert!(on.warned_topology.lock().unwrap().is_empty());
        let spec = r#"{"gatherStrategy":[{"layer":"spineLayer","strategy":"PreferGather"}]}"#;
        on.note_topology("d/g1", &pod(Some(spec)));
        on.note_topology("d/g1", &pod(Some(spec)));
        assert_eq!(on.warned_topology.lock().unwrap().len(), 1);
        let off = Coscheduling::new(None).unwrap();
        off.note_topology("d/g1", &pod(Some(spec)));
        assert!(off.warned_topology.lock().unwrap().is_empty());
    }
}
