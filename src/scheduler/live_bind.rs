//! The binding cycle of a placed pod, in the background: wait at Permit, the volumes'
//! PreBind, the pod's PreBind patch, Bind, PostBind.

use super::binder::{self, BindError};
use super::{Placed, Waiting};
use crate::kernel::lease::Leadership;
use crate::scheduler::framework::PodInfo;
use crate::scheduler::framework::runtime::Framework;
use crate::scheduler::metrics::SchedulerMetrics;
use crate::scheduler::volume_binder;

/// The binding cycle of one pod: wait at Permit, PreBind (one patch), Bind, PostBind.
pub(super) async fn binding_cycle(
    fw: &Framework,
    // The client, and the lease it binds under.
    (client, lease): (&kube::Client, &Leadership),
    waiting: &Waiting,
    pod: &PodInfo,
    node: &str,
    placed: Placed,
    metrics: &SchedulerMetrics,
) -> Result<(), BindError> {
    let Placed {
        state,
        modified,
        permit,
    } = placed;
    let rejected = |plugin: &str, msg: String| BindError::Rejected {
        pod: pod.key.clone(),
        plugin: plugin.to_string(),
        message: msg,
    };
    if let Some((timeout, rx)) = permit {
        let since = std::time::Instant::now();
        let verdict = tokio::time::timeout(timeout, rx).await;
        let allowed = matches!(verdict, Ok(Ok(true)));
        let result = match verdict {
            Ok(Ok(true)) => "allowed",
            Ok(_) => "rejected",
            Err(_) => "timeout",
        };
        metrics
            .pods
            .permit_wait(result, since.elapsed().as_secs_f64());
        waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pod.key);
        if !allowed {
            return Err(rejected(
                "Permit",
                format!("rejected or timed out after {timeout:?} at Permit"),
            ));
        }
    }
    if let Some(volumes) = crate::scheduler::plugins::volumes::binding::chosen(&state) {
        let timeout = crate::scheduler::plugins::volumes::binding::bind_timeout(&state);
        let bound = volume_binder::bind_pod_volumes(client, pod, node, volumes, timeout).await;
        if bound.is_err() {
            metrics.pods.volume_error("bind");
        }
        bound?;
    }
    // PreBind ran in the scheduling cycle (the pod was assumed with its result).
    if let Some((key, value)) = crate::scheduler::plugins::deviceshare::node_lock(&state) {
        binder::lock_node(client, pod, node, (key, value)).await?;
    }
    if let Some(modified) = &modified {
        binder::patch(client, pod, modified).await?;
        crate::kernel::fault::point("scheduler.after-prebind");
    }
    crate::kernel::fault::point("scheduler.before-bind");
    // Fenced: a scheduler paused past its renew deadline may have lost the lease to a
    // replica that already placed this pod elsewhere; the API's 409 is the last guard.
    if !lease.fresh() {
        return Err(rejected(
            "Leadership",
            "this scheduler no longer holds its lease; the leader binds the pod".into(),
        ));
    }
    binder::bind(client, pod, node).await?;
    crate::kernel::fault::point("scheduler.after-bind");
    fw.post_bind(&state, pod, node);
    binder::scheduled(client, pod, node).await;
    Ok(())
}
