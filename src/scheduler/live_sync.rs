//! The watches the scheduler waits for before its first cycle, as kube-scheduler waits for
//! every informer's first list: a pod placed before them would miss what they hold.

/// A watched kind whose first list the scheduler waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    Pods,
    Nodes,
    NodeMetrics,
    Reservations,
    /// Only when a profile uses ElasticQuota.
    ElasticQuotas,
    PersistentVolumes,
    PersistentVolumeClaims,
    StorageClasses,
    PodDisruptionBudgets,
    Devices,
}

impl Watch {
    pub const ALL: [Watch; 10] = [
        Watch::Pods,
        Watch::Nodes,
        Watch::NodeMetrics,
        Watch::Reservations,
        Watch::ElasticQuotas,
        Watch::PersistentVolumes,
        Watch::PersistentVolumeClaims,
        Watch::StorageClasses,
        Watch::PodDisruptionBudgets,
        Watch::Devices,
    ];
}

/// The watches whose first list has not ended yet.
#[derive(Debug)]
pub struct Unsynced(Vec<Watch>);

impl Unsynced {
    /// Every watch; ElasticQuotas only when `quotas` (a profile uses them).
    pub fn new(quotas: bool) -> Unsynced {
        Unsynced(
            Watch::ALL
                .into_iter()
                .filter(|w| quotas || *w != Watch::ElasticQuotas)
                .collect(),
        )
    }

    /// `w`'s first list ended.
    pub fn listed(&mut self, w: Watch) {
        self.0.retain(|x| *x != w);
    }

    pub fn none(&self) -> bool {
        self.0.is_empty()
    }
}
