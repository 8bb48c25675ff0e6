//! Reservations in the cluster state: an Available reservation is counted on its node as
//! its reserve pod, holding what its owners have not taken yet (allocatable − Σ owners'
//! requests), so capacity is counted once: by the reservation until an owner uses it, then
//! by the owner.

use std::sync::Arc;

use super::ClusterState;
use super::types::PodInfo;
use crate::api::pod::Amounts;
use crate::api::scheduling::reservation::Reservation;
use crate::scheduler::model::reservation::{ReservationInfo, reserve_pod};
use crate::scheduler::model::reservation_index::SelectorIndex;

/// The key a reservation's reserve pod is counted under.
pub fn reserve_key(name: &str) -> String {
    // Namespaces are lower-case DNS labels, so no pod key can look like this.
    format!("Reservation/{name}")
}

/// A reservation's reserve pod as counted on its node: holding what its owners have not
/// taken; None unless it is Available on a node.
fn counted(info: &ReservationInfo) -> Option<PodInfo> {
    let node = info.node.clone().filter(|_| info.is_available())?;
    let mut pod = PodInfo::new(Arc::new(reserve_pod(info, Some(&info.remaining()))));
    pod.key = reserve_key(&info.name);
    pod.reserve_of = Some(info.name.clone());
    pod.node_name = Some(node);
    Some(pod)
}

impl ClusterState {
    pub fn upsert_reservation(&mut self, r: Arc<Reservation>) {
        let mut info = ReservationInfo::new(r);
        if let Some(old) = self.reservations.get(&info.name)
            && old.uid != info.uid
        {
            self.reservation_by_uid.remove(&old.uid.clone());
        }
        info.allocated = self
            .reservation_owners
            .get(&info.uid)
            .cloned()
            .unwrap_or_default();
        self.reservation_by_uid
            .insert(info.uid.clone(), info.name.clone());
        let name = info.name.clone();
        if let Some(ix) = &mut self.reservation_index {
            ix.add(&name, info.node.as_deref(), &info.labels);
        }
        self.reservations.insert(name.clone(), info);
        self.recount(&name);
    }

    pub fn remove_reservation(&mut self, name: &str) {
        self.remove_pod(&reserve_key(name));
        if let Some(info) = self.reservations.remove(name) {
            self.reservation_by_uid.remove(&info.uid);
        }
        if let Some(ix) = &mut self.reservation_index {
            ix.remove(name);
        }
    }

    /// Keeps `index` over the reservations from now on, starting with those known.
    pub fn index_reservations(&mut self, mut index: SelectorIndex) {
        for r in self.reservations.values() {
            index.add(&r.name, r.node.as_deref(), &r.labels);
        }
        self.reservation_index = Some(index);
    }

    /// Re-places the reserve pod with what the reservation still holds.
    fn recount(&mut self, name: &str) {
        self.remove_pod(&reserve_key(name));
        let Some(info) = self.reservations.get(name) else {
            return;
        };
        let Some(pod) = counted(info) else {
            return;
        };
        let node = pod.node_name.clone().unwrap_or_default();
        self.place(Arc::new(pod), &node);
    }

    /// The reserve pod of the reservation with `uid` as counted with the owners in `gone`
    /// evicted: what they held goes back to the reservation, not to the node (Koordinator's
    /// `preemptibleInRRs`). None for a reservation not counted on a node.
    pub fn reserve_pod_without(
        &self,
        uid: &str,
        gone: &std::collections::HashSet<String>,
    ) -> Option<Arc<PodInfo>> {
        let info = self.reservations.get(self.reservation_by_uid.get(uid)?)?;
        let mut info = info.clone();
        info.allocated.retain(|k, _| !gone.contains(k));
        counted(&info).map(Arc::new)
    }

    /// A placed pod as it is now (its stored object is slimmed, so it is not rebuilt from
    /// it): pre-allocation writes it as a reservation's owner, or gives it back.
    pub fn replace_placed(&mut self, info: Arc<PodInfo>) {
        let Some(node) = info.node_name.clone() else {
            return;
        };
        self.remove_pod(&info.key);
        self.place(info, &node);
    }

    pub(super) fn owner_placed(&mut self, uid: &str, key: String, requests: Amounts) {
        self.reservation_owners
            .entry(uid.to_string())
            .or_default()
            .insert(key, requests);
        self.owners_changed(uid);
    }

    pub(super) fn owner_removed(&mut self, uid: &str, key: &str) {
        if let Some(o) = self.reservation_owners.get_mut(uid) {
            o.remove(key);
            if o.is_empty() {
                self.reservation_owners.remove(uid);
            }
        }
        self.owners_changed(uid);
    }

    fn owners_changed(&mut self, uid: &str) {
        let Some(name) = self.reservation_by_uid.get(uid).cloned() else {
            return;
        };
        let owners = self
            .reservation_owners
            .get(uid)
            .cloned()
            .unwrap_or_default();
        if let Some(info) = self.reservations.get_mut(&name) {
            info.allocated = owners;
        }
        self.recount(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::res::R_CPU;
    use crate::scheduler::test_util::{cluster, node_json};
    use serde_json::json;

    fn reservation(phase: &str) -> Arc<Reservation> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "r1", "uid": "ru1"},
                "spec": {"owners": [{"object": {"name": "web"}}],
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}},
                "status": {"phase": phase, "nodeName": "n1", "allocatable": {"cpu": "4"}}}))
            .unwrap(),
        )
    }

    #[test]
    fn reserved_capacity_is_counted_once() {
        let mut c = cluster(vec![node_json("n1", "8", "32Gi")]);
        c.upsert_reservation(reservation("Pending"));
        assert_eq!(
            c.nodes[0].req.get(R_CPU),
            0,
            "a pending reservation holds nothing"
        );
        c.upsert_reservation(reservation("Available"));
        assert_eq!(c.nodes[0].req.get(R_CPU), 4000);
        let owner = json!({"metadata": {"name": "web", "namespace": "d",
            "annotations": {"scheduling.koordinator.sh/reservation-allocated": "{\"name\":\"r1\",\"uid\":\"ru1\"}"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}});
        c.upsert_pod(Arc::new(serde_json::from_value(owner).unwrap()));
        assert_eq!(
            c.nodes[0].req.get(R_CPU),
            4000,
            "3 CPUs moved from the reservation to its owner"
        );
        assert_eq!(c.reservations["r1"].remaining()["cpu"], 1000);
        c.remove_pod("d/web");
        assert_eq!(c.nodes[0].req.get(R_CPU), 4000);
        assert_eq!(c.reservations["r1"].remaining()["cpu"], 4000);
        c.upsert_reservation(reservation("Failed"));
        assert_eq!(
            c.nodes[0].req.get(R_CPU),
            0,
            "a failed reservation frees its capacity"
        );
        c.remove_reservation("r1");
        assert!(c.reservations.is_empty() && c.nodes[0].pods.is_empty());
    }

    #[test]
    fn pods_and_reservations_seen_before_their_node_wait_for_it() {
        let mut c = ClusterState::default();
        c.upsert_reservation(reservation("Available"));
        let pod = json!({"metadata": {"name": "p", "namespace": "d"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        c.upsert_pod(Arc::new(serde_json::from_value(pod).unwrap()));
        c.upsert_pod(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "gone", "namespace": "d"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}}))
            .unwrap(),
        ));
        c.remove_pod("d/gone");
        c.upsert_node(Arc::new(
            serde_json::from_value(node_json("n1", "8", "32Gi")).unwrap(),
        ));
        assert_eq!(c.nodes[0].req.get(R_CPU), 5000);
        assert_eq!(c.nodes[0].pods.len(), 2);
        assert_eq!(c.placement("d/p"), Some("n1"));
    }
}
