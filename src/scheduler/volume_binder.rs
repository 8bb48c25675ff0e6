//! VolumeBinding's PreBind, as kube-scheduler's `BindPodVolumes`: the PVs chosen at
//! Reserve are written with their `claimRef`, claims to provision get the
//! `volume.kubernetes.io/selected-node` annotation, then the binding cycle waits (polling
//! each second, up to `bindTimeoutSeconds`) for the PV controller to finish every claim
//! before the pod is bound.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::PostParams;

use super::binder::BindError;
use super::framework::PodInfo;
use super::model::volumes::{self as v, ANN_SELECTED_NODE, PodVolumes};

const POLL: Duration = Duration::from_secs(1);

fn failed(pod: &PodInfo, message: String) -> BindError {
    BindError::Rejected {
        pod: pod.key.clone(),
        plugin: "VolumeBinding".into(),
        message,
    }
}

/// The API writes for the pod's volumes, then the wait for the PV controller.
pub async fn bind_pod_volumes(
    client: &kube::Client,
    pod: &PodInfo,
    node: &str,
    chosen: &PodVolumes,
    timeout: Duration,
) -> Result<(), BindError> {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    for b in &chosen.bindings {
        let name = b.pv.metadata.name.clone().unwrap_or_default();
        pvs.replace(&name, &PostParams::default(), &b.pv)
            .await
            .map_err(|e| failed(pod, format!("binding PersistentVolume {name:?}: {e}")))?;
        tracing::info!(pod = %pod.key, pv = %name, "claim bound to volume");
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pod.namespace);
    for c in &chosen.provisions {
        let name = c.metadata.name.clone().unwrap_or_default();
        claims
            .replace(&name, &PostParams::default(), c)
            .await
            .map_err(|e| failed(pod, format!("selecting node for claim {name:?}: {e}")))?;
    }
    let deadline = Instant::now() + timeout;
    loop {
        match all_bound(client, pod, node, chosen).await {
            Ok(true) => return Ok(()),
            Ok(false) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
            Ok(false) => {
                return Err(failed(
                    pod,
                    "binding volumes: timed out waiting for the condition".into(),
                ));
            }
            Err(message) => return Err(failed(pod, format!("binding volumes: {message}"))),
        }
    }
}

/// `checkBindings`: true once every claim is fully bound; an error when the binding was
/// undone (claimRef reset, provisioning given up) or the pod is gone.
async fn all_bound(
    client: &kube::Client,
    pod: &PodInfo,
    node: &str,
    chosen: &PodVolumes,
) -> Result<bool, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    if pods
        .get_opt(&pod.name)
        .await
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Err("pod does not exist any more".into());
    }
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pod.namespace);
    let get_claim = |name: &str| {
        let (claims, name) = (claims.clone(), name.to_string());
        async move {
            claims
                .get(&name)
                .await
                .map_err(|e| format!("failed to check binding: {e}"))
        }
    };
    for b in &chosen.bindings {
        let name = b.pv.metadata.name.as_deref().unwrap_or_default();
        let pv = pvs
            .get(name)
            .await
            .map_err(|e| format!("failed to check binding: {e}"))?;
        let reset = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_none_or(|r| r.uid.as_deref().unwrap_or_default().is_empty());
        if reset {
            return Err(format!("ClaimRef got reset for pv {name:?}"));
        }
        let pvc = get_claim(b.pvc.metadata.name.as_deref().unwrap_or_default()).await?;
        if !v::fully_bound(&pvc) {
            return Ok(false);
        }
    }
    for c in &chosen.provisions {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        let pvc = get_claim(name).await?;
        let selected = pvc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE));
        if selected.map(String::as_str) != Some(node) {
            return Err(format!("provisioning failed for PVC {name:?}"));
        }
        if !v::fully_bound(&pvc) {
            return Ok(false);
        }
    }
    Ok(true)
}
