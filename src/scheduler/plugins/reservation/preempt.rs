//! Reservation preemption (ReservationArgs `enablePreemption`, Koordinator's
//! `PreemptionMgr`): kube-scheduler's default preemption run by the Reservation plugin, for
//! pods and for a pending Reservation, sparing reservations and pods that disable it.

use crate::scheduler::framework::runtime::Verdicts;
use crate::scheduler::framework::{ClusterState, Code, Fits, Nomination, PodInfo, Status};

/// Koordinator's `IsPodPreemptible`: not labelled `disable-preemptible: "true"`.
fn preemptible(p: &PodInfo) -> bool {
    p.labels
        .get(crate::api::extension::keys::LABEL_DISABLE_PREEMPTIBLE)
        .is_none_or(|v| v != "true")
}

/// The preemption PostFilter: the victims' node, or why none, in Koordinator's words
/// (`preemption: …`).
pub(super) fn post_filter(
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
    fits: &Fits<'_>,
) -> (Status, Option<Nomination>) {
    let eligible = |p: &PodInfo| p.reserve_of.is_none() && preemptible(p);
    let (s, n) =
        crate::scheduler::plugins::preemption::preempt(pod, cluster, rejected, (fits, &eligible));
    let s = match s.code {
        Code::Success => s,
        code => Status {
            code,
            reasons: smallvec::smallvec![format!("preemption: {}", s.message()).into()],
        },
    };
    (s, n)
}
