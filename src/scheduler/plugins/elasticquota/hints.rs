//! ElasticQuota's queueing hints with `enableQueueHint` (Koordinator's
//! `isSchedulableAfterPodDeletion` / `isSchedulableAfterQuotaChanged`): a pod rejected for
//! its quota moves back only when the change is in its own quota — or, with
//! `enableCheckParentQuota`, in a quota on its path to the root — of the same tree.

use super::{ElasticQuota, quota_for};
use crate::api::extension::keys::QUOTA_ROOT;
use crate::scheduler::framework::events::{ClusterEvent, Events};
use crate::scheduler::framework::{ClusterState, PodInfo};

/// `ev.quota`: for a pod deleted, the quota it was charged to (none: it had none, so it
/// freed no quota); for a quota changed, its name (none: added or deleted, which may
/// help any pod).
pub(super) fn may_help(
    plugin: &ElasticQuota,
    pod: &PodInfo,
    ev: &ClusterEvent,
    cluster: &ClusterState,
) -> bool {
    let changed = match ev.quota.as_deref() {
        Some(q) => q,
        None => return !ev.kind.contains(Events::POD_ASSIGNED_DELETE),
    };
    let own = quota_for(cluster, pod);
    let tree = |name: &str| cluster.quotas.info(name).map(|i| i.tree_id.clone());
    if tree(changed) != tree(&own) {
        return false;
    }
    changed == own
        || (plugin.args.enable_check_parent_quota
            && path_to_root(cluster, &own).any(|q| q == changed))
}

/// The quota's ancestors, nearest first (a bounded walk: a cycle in bad data ends it).
fn path_to_root<'a>(cluster: &'a ClusterState, quota: &str) -> impl Iterator<Item = &'a str> {
    let mut at = cluster.quotas.info(quota).map(|i| i.parent.as_str());
    std::iter::from_fn(move || {
        let name = at.filter(|n| *n != QUOTA_ROOT && !n.is_empty())?;
        at = cluster.quotas.info(name).map(|i| i.parent.as_str());
        Some(name)
    })
    .take(64)
}
