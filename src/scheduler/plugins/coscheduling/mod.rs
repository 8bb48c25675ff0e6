//! Coscheduling (`pkg/scheduler/plugins/coscheduling`): all-or-nothing gangs. A gang pod
//! enters the queue only when its gang group has min children (PreEnqueue, checked again
//! at PreFilter); at Permit it waits until every gang of its group has min members
//! waiting, then the whole group goes on; a Strict gang whose member fails releases every
//! waiting member. PreBind records the gang group on the pod. With `enablePreemption`,
//! PostFilter preempts for the whole job (`preempt.rs`). With `awareNetworkTopology`, a
//! gang group with a network-topology spec is placed whole in its topology before its
//! first member's cycle (`topology.rs`), and each member's PreFilter allows only its
//! planned node; a pod with a network-topology selector is scored by how close each node
//! is to the pods already there with that selector. The gang cache lives in
//! [`ClusterState::gangs`]; waiting and releasing are driven by the scheduling loop.

pub mod preempt;
pub mod status;
pub mod topology;

use crate::api::field::FieldError;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::super::framework::gangs::{GangSettings, gang_of};
use super::super::framework::runtime::Verdicts;
use super::super::framework::{
    ClusterState, Code, CycleState, Fits, FitsPod, NodeInfo, Nomination, Plugin, PodDraft, PodInfo,
    Point, PreFilterResult, Status,
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
}

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
                aware_network_topology: a.aware_network_topology.unwrap_or(false),
            },
            enable_preemption: a.enable_preemption.unwrap_or(false),
        })
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

    /// Only a pod with a network-topology selector is scored (nodes nearer the pods with
    /// the same selector higher); every other pod gets 0 everywhere.
    fn scores_nothing(&self, state: &CycleState, _: &PodInfo) -> bool {
        state
            .read::<topology::SelectorOrder>(topology::SELECTOR_ORDER)
            .is_none()
    }
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        feasible: &[usize],
        cluster: &ClusterState,
    ) -> Status {
        if let Some(order) = topology::selector_order(pod, feasible, cluster) {
            state.write(topology::SELECTOR_ORDER, order);
        }
        Status::success()
    }
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<i64, Status> {
        let order = state.read::<topology::SelectorOrder>(topology::SELECTOR_ORDER);
        Ok(order.and_then(|o| o.get(&node.name).copied()).unwrap_or(0))
    }
    fn normalize(&self, state: &CycleState, pod: &PodInfo, scores: &mut [i64]) {
        // Without a selector PreScore skips Score: nothing to normalize.
        if !self.scores_nothing(state, pod) {
            super::taint::default_normalize(scores, true);
        }
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
        if let Err(m) = cluster.gangs.check(&pod.key, &pod.pod) {
            return (Status::unresolvable(m.to_string()), None);
        }
        // A network-topology placement of the group: only the pod's planned node.
        let plan = cluster.gangs.plan_of(&pod.key).filter(|_| !state.as_member);
        let allowed = match plan.map(|p| (&p.trigger, &p.result)) {
            None => None,
            // The pod that planned may preempt for the group; its siblings wait for it.
            Some((trigger, Err(why))) if *trigger == pod.key && why != topology::NO_TOPOLOGY => {
                return (Status::unschedulable(why.clone()), None);
            }
            Some((_, Err(why))) => return (Status::unresolvable(why.clone()), None),
            Some((_, Ok((pods, _)))) => match pods.get(&pod.key) {
                Some(node) => Some([node.clone()].into_iter().collect()),
                None => return (Status::unresolvable(topology::NO_PLANNED_NODE), None),
            },
        };
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
        (Status::success(), allowed)
    }
    fn post_filter(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        rejected: &Verdicts,
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
            reasons: smallvec::smallvec![
                format!("waiting for the gang group {}", g.group_id(id)).into()
            ],
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
