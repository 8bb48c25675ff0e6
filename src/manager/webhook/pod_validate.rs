//! `/validate-pod` (`pkg/webhook/pod/validating/`): reserve-pod annotation, QoS/priority
//! combinations, LSR/LSE CPU shape, batch resources only for BE, quota rules and (gate
//! `ValidatePodDeviceResource`) device requests and (`EnablePodEnhancedValidator`) the
//! required labels of `pod-enhanced-validator-config`.

use crate::manager::features;
use k8s_openapi::api::core::v1::Pod;

use super::Handlers;
pub use super::quota::topology::quota_name_of;
use super::review::{Operation, Request, Verdict};
use crate::api::extension::keys::*;
use crate::api::extension::priority::{PriorityClass, pod_priority_class};
use crate::api::extension::qos::{QoSClass, pod_qos_class};
use crate::api::extension::resources as res;
use crate::api::pod::pod_requests;

pub fn handle(h: &Handlers, req: &Request) -> Verdict {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Verdict::Allow;
    }
    let decode = |v: Option<&serde_json::Value>| -> Result<Option<Pod>, Verdict> {
        v.map(|v| serde_json::from_value::<Pod>(v.clone()))
            .transpose()
            .map_err(|e| Verdict::deny(format!("decoding the pod: {e}")))
    };
    let (pod, old) = match (decode(req.object.as_ref()), decode(req.old_object.as_ref())) {
        (Ok(Some(p)), Ok(old)) => (p, old),
        (Ok(None), _) => return Verdict::deny("pod request without an object"),
        (Err(v), _) | (_, Err(v)) => return v,
    };
    let old = old.filter(|_| req.operation == Operation::Update);
    let mut errs = Vec::new();
    errs.extend(reserve_pod(&pod));
    errs.extend(colocation(h, &pod, old.as_ref()));
    errs.extend(quota(h, &pod, old.as_ref(), &req.namespace));
    if h.gates.on(features::VALIDATE_POD_DEVICE_RESOURCE) {
        errs.extend(super::pod_device::validate(&pod));
    }
    if h.gates.on(features::ENABLE_POD_ENHANCED_VALIDATOR) {
        let rules = h.enhanced.read().unwrap_or_else(|p| p.into_inner()).clone();
        let ns = pod.metadata.namespace.as_deref().filter(|s| !s.is_empty());
        errs.extend(super::enhanced::validate(
            &rules,
            &pod,
            ns.unwrap_or(&req.namespace),
        ));
    }
    if errs.is_empty() {
        Verdict::Allow
    } else {
        Verdict::deny(errs.join("; "))
    }
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn reserve_pod(pod: &Pod) -> Option<String> {
    let has = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_RESERVE_POD));
    has.then(|| {
        format!(
            "metadata.annotations[{ANNOTATION_RESERVE_POD}]: Forbidden: the annotation is reserved for Koordinator's reserve pods"
        )
    })
}

/// The QoS/priority rules of `cluster_colocation_profile.go` (validating side).
pub fn colocation(h: &Handlers, pod: &Pod, old: Option<&Pod>) -> Vec<String> {
    let mut errs = Vec::new();
    if let Some(old) = old {
        if label(old, LABEL_POD_QOS) != label(pod, LABEL_POD_QOS) {
            errs.push(format!(
                "metadata.labels[{LABEL_POD_QOS}]: Invalid value: {:?}: field is immutable",
                label(pod, LABEL_POD_QOS).unwrap_or("")
            ));
        }
        if pod_priority_class(old) != pod_priority_class(pod) {
            errs.push(format!(
                "spec.priority: Invalid value: {:?}: the Koordinator priority class is immutable",
                pod_priority_class(pod).name()
            ));
        }
        if !h
            .gates
            .on(features::COLOCATION_PROFILE_SKIP_VALIDATING_PRIORITY)
            && label(old, LABEL_POD_PRIORITY) != label(pod, LABEL_POD_PRIORITY)
        {
            errs.push(format!(
                "metadata.labels[{LABEL_POD_PRIORITY}]: Invalid value: {:?}: field is immutable",
                label(pod, LABEL_POD_PRIORITY).unwrap_or("")
            ));
        }
    }
    let qos = pod_qos_class(pod);
    let class = pod_priority_class(pod);
    let requests = pod_requests(pod);
    let batch = [res::BATCH_CPU, res::BATCH_MEMORY]
        .iter()
        .any(|r| requests.get(*r).is_some_and(|v| *v != 0));
    if batch && qos != QoSClass::Be {
        errs.push(format!(
            "metadata.labels[{LABEL_POD_QOS}]: Required value: a pod requesting {} or {} must be {}=BE",
            res::BATCH_CPU,
            res::BATCH_MEMORY,
            LABEL_POD_QOS
        ));
    }
    let forbidden: &[PriorityClass] = match qos {
        QoSClass::Be => &[PriorityClass::None, PriorityClass::Prod],
        QoSClass::Lsr => &[
            PriorityClass::None,
            PriorityClass::Mid,
            PriorityClass::Batch,
            PriorityClass::Free,
        ],
        _ => &[],
    };
    if forbidden.contains(&class) {
        errs.push(format!(
            "pod: Forbidden: {}={} and priorityClass={} cannot be used in combination",
            LABEL_POD_QOS,
            qos.name(),
            class.name()
        ));
    }
    if matches!(qos, QoSClass::Lsr | QoSClass::Lse) {
        let cpu = requests.get(res::CPU).copied().unwrap_or(0);
        if cpu == 0 || cpu % 1000 != 0 {
            errs.push(format!(
                "spec.containers[*].resources.requests: Invalid value: {cpu}m: {} pods must request a whole, non-zero number of CPUs",
                qos.name()
            ));
        }
    }
    errs
}

/// ElasticQuota rules for pods: no parent quota (unless allowed), immutable preemptible.
fn quota(h: &Handlers, pod: &Pod, old: Option<&Pod>, req_ns: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if let Some(old) = old
        && label(old, LABEL_QUOTA_PREEMPTIBLE) != label(pod, LABEL_QUOTA_PREEMPTIBLE)
    {
        errs.push(format!(
            "metadata.labels[{LABEL_QUOTA_PREEMPTIBLE}]: Invalid value: {:?}: field is immutable",
            label(pod, LABEL_QUOTA_PREEMPTIBLE).unwrap_or("")
        ));
    }
    if h.gates.on(features::SUPPORT_PARENT_QUOTA_SUBMIT_POD) {
        return errs;
    }
    let ns = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(req_ns);
    let topo = h.quota_topology();
    let name = quota_name_of(&topo, pod, ns, !h.gates.on(features::DISABLE_DEFAULT_QUOTA));
    if let Some(q) = topo.get(&name)
        && q.is_parent
    {
        errs.push(format!(
            "metadata.labels[{LABEL_QUOTA_NAME}]: Forbidden: pod can not be linked to a parent quota ({name})"
        ));
    }
    errs
}

/// ElasticQuota admission for an otherwise admitted pod (see `quota::admission`).
pub async fn evaluate_quota(
    h: &Handlers,
    q: &super::quota::admission::Evaluator,
    req: &Request,
) -> Result<(), super::quota::admission::QuotaAdmissionError> {
    let decode = |v: Option<&serde_json::Value>| {
        v.and_then(|v| serde_json::from_value::<Pod>(v.clone()).ok())
    };
    let Some(pod) = decode(req.object.as_ref()) else {
        return Ok(());
    };
    let old = decode(req.old_object.as_ref());
    match super::quota::admission::quota_of(h, req, &pod, old.as_ref()) {
        Some(name) => q.evaluate(h, &name, &pod).await,
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "pod_validate_tests.rs"]
mod tests;
