//! Cluster events and queueing hints (kube-scheduler's `EventsToRegister` and
//! `QueueingHintFn`): a pod left unschedulable goes back to the active queue only when an
//! event one of the plugins that rejected it registered for happens, and that plugin's
//! hint says the change may let the pod fit — so a pod that can never fit is not
//! retried on every unrelated change.

use super::{ClusterState, PodInfo};

/// A set of event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events(u32);

impl Events {
    pub const NODE_ADD: Events = Events(1);
    /// A node's allocatable changed.
    pub const NODE_ALLOCATABLE: Events = Events(1 << 1);
    pub const NODE_LABEL: Events = Events(1 << 2);
    /// A node's taints or `spec.unschedulable` changed.
    pub const NODE_TAINT: Events = Events(1 << 3);
    /// Anything else on a node (conditions, annotations, images).
    pub const NODE_OTHER: Events = Events(1 << 4);
    pub const NODE_DELETE: Events = Events(1 << 5);
    /// A pod was bound to a node (or counted there).
    pub const POD_ASSIGNED_ADD: Events = Events(1 << 6);
    /// A pod on a node went away: deleted, terminating or finished.
    pub const POD_ASSIGNED_DELETE: Events = Events(1 << 7);
    pub const NODE_METRIC: Events = Events(1 << 8);
    pub const TOPOLOGY: Events = Events(1 << 9);
    pub const DEVICE: Events = Events(1 << 10);
    pub const RESERVATION: Events = Events(1 << 11);
    pub const QUOTA: Events = Events(1 << 12);
    pub const POD_GROUP: Events = Events(1 << 13);
    pub const STORAGE: Events = Events(1 << 14);
    /// Services and controllers (default topology spreading reads their selectors).
    pub const OWNER: Events = Events(1 << 15);
    pub const NETWORK_TOPOLOGY: Events = Events(1 << 16);
    /// The labels of a pod on a node changed.
    pub const POD_ASSIGNED_UPDATE: Events = Events(1 << 17);
    pub const ALL: Events = Events(u32::MAX);

    pub const fn or(self, o: Events) -> Events {
        Events(self.0 | o.0)
    }

    pub const fn contains(self, o: Events) -> bool {
        self.0 & o.0 != 0
    }

    /// A pod on a node added, relabelled or gone.
    pub const POD_ASSIGNED: Events = Events::POD_ASSIGNED_ADD
        .or(Events::POD_ASSIGNED_UPDATE)
        .or(Events::POD_ASSIGNED_DELETE);

    /// Any change to a node.
    pub const NODE: Events = Events::NODE_ADD
        .or(Events::NODE_ALLOCATABLE)
        .or(Events::NODE_LABEL)
        .or(Events::NODE_TAINT)
        .or(Events::NODE_OTHER)
        .or(Events::NODE_DELETE);
}

/// One cluster change: its kind, the node it happened on (node events, pods on a node),
/// and the ElasticQuota it concerns.
#[derive(Debug, Clone)]
pub struct ClusterEvent {
    pub kind: Events,
    pub node: Option<String>,
    /// The ElasticQuota concerned: the one changed, or the one a deleted pod was charged to.
    pub quota: Option<String>,
    /// The node's index in the cluster, looked up once by [`ClusterEvent::resolved`]: the
    /// hints of thousands of unschedulable pods read the same node.
    at: Option<usize>,
}

impl ClusterEvent {
    pub fn of(kind: Events) -> ClusterEvent {
        ClusterEvent {
            kind,
            node: None,
            quota: None,
            at: None,
        }
    }

    pub fn on_node(kind: Events, node: &str) -> ClusterEvent {
        ClusterEvent {
            kind,
            node: Some(node.to_string()),
            quota: None,
            at: None,
        }
    }

    /// The same event, concerning ElasticQuota `quota`.
    pub fn with_quota(mut self, quota: Option<String>) -> ClusterEvent {
        self.quota = quota;
        self
    }

    /// The same event with its node looked up in `cluster` (before it is asked of many
    /// pods' hints).
    pub fn resolved(mut self, cluster: &ClusterState) -> ClusterEvent {
        self.at = self.node.as_deref().and_then(|n| cluster.node_index(n));
        self
    }

    /// The node the event happened on, as the cluster holds it now.
    pub fn node_in<'a>(&self, cluster: &'a ClusterState) -> Option<&'a super::NodeInfo> {
        let name = self.node.as_deref()?;
        // The resolved index, while it still names this node; otherwise a lookup.
        match self.at.and_then(|i| cluster.nodes.get(i)) {
            Some(n) if n.name == name => Some(n),
            _ => cluster.node(name),
        }
    }
}

impl super::runtime::Framework {
    /// The events the plugins named registered for (every event when none is named, or
    /// one this profile does not hold).
    pub fn events_of(&self, plugins: &[&'static str]) -> Events {
        if plugins.is_empty() {
            return Events::ALL;
        }
        plugins.iter().fold(Events::default(), |acc, name| {
            match self.by_name.get(name) {
                Some(p) => acc.or(p.events()),
                None => Events::ALL,
            }
        })
    }

    /// Whether `ev` may let `pod` fit, asked of the plugins that rejected it (kube-scheduler's
    /// queueing hints); none known, or one this profile does not hold: yes.
    pub fn may_help(
        &self,
        rejected_by: &[&'static str],
        pod: &PodInfo,
        ev: &ClusterEvent,
        cluster: &ClusterState,
    ) -> bool {
        if rejected_by.is_empty() {
            return true;
        }
        rejected_by.iter().any(|name| match self.by_name.get(name) {
            None => true,
            Some(p) => p.events().contains(ev.kind) && p.hint(pod, ev, cluster),
        })
    }
}

/// What changed between a node as the cluster held it and its new version.
pub fn node_change(
    old: Option<&super::NodeInfo>,
    new: &k8s_openapi::api::core::v1::Node,
) -> Events {
    let Some(old) = old else {
        return Events::NODE_ADD;
    };
    let (spec, status) = (new.spec.as_ref(), new.status.as_ref());
    let mut e = Events::default();
    if old
        .node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        != status.and_then(|s| s.allocatable.as_ref())
    {
        e = e.or(Events::NODE_ALLOCATABLE);
    }
    if old.node.metadata.labels != new.metadata.labels {
        e = e.or(Events::NODE_LABEL);
    }
    fn taints(
        s: Option<&k8s_openapi::api::core::v1::NodeSpec>,
    ) -> Option<(Option<&[k8s_openapi::api::core::v1::Taint]>, Option<bool>)> {
        s.map(|s| (s.taints.as_deref(), s.unschedulable))
    }
    if taints(old.node.spec.as_ref()) != taints(spec) {
        e = e.or(Events::NODE_TAINT);
    }
    if e == Events::default() {
        e = Events::NODE_OTHER;
    }
    e
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod hint_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_update_is_told_apart_by_what_changed() {
        let node = |v: serde_json::Value| -> k8s_openapi::api::core::v1::Node {
            serde_json::from_value(v).unwrap()
        };
        let base = serde_json::json!({"metadata": {"name": "n", "labels": {"a": "1"}},
            "status": {"allocatable": {"cpu": "4"}}});
        let c = crate::scheduler::test_util::cluster(vec![base.clone()]);
        let old = c.nodes[0].clone();
        assert_eq!(node_change(None, &node(base.clone())), Events::NODE_ADD);
        let mut v = base.clone();
        v["status"]["allocatable"]["cpu"] = "8".into();
        assert_eq!(node_change(Some(&old), &node(v)), Events::NODE_ALLOCATABLE);
        let mut v = base.clone();
        v["metadata"]["labels"]["b"] = "2".into();
        v["spec"] = serde_json::json!({"unschedulable": true});
        let both = node_change(Some(&old), &node(v));
        assert!(both.contains(Events::NODE_LABEL) && both.contains(Events::NODE_TAINT));
        assert!(!both.contains(Events::NODE_ALLOCATABLE));
        let mut v = base;
        v["metadata"]["annotations"] = serde_json::json!({"x": "y"});
        assert_eq!(node_change(Some(&old), &node(v)), Events::NODE_OTHER);
    }
}
