//! A pod's resource requests and limits as Kubernetes computes them
//! (component-helpers `PodRequests`/`PodLimits`): regular containers plus sidecar init
//! containers, the peak of ordinary init containers, plus pod overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::extension::resources::CPU;
use super::quantity::{q_milli, q_value};

/// Resource amounts as integers: `cpu` in milli-cores, everything else as `Value()`
/// (Koordinator's `kubernetes.io/batch-cpu` is already an integer of milli-cores).
pub type Amounts = BTreeMap<String, i64>;

pub fn amount(name: &str, q: &Quantity) -> i64 {
    if name == CPU { q_milli(q) } else { q_value(q) }
}

/// The inverse of [`amounts`]: cpu in milli-cores, the rest as plain integers.
pub fn resource_list(a: &Amounts) -> BTreeMap<String, Quantity> {
    a.iter()
        .map(|(k, v)| {
            let q = if k == CPU {
                crate::api::quantity::cpu_from_milli(*v)
            } else {
                crate::api::quantity::from_int(*v)
            };
            (k.clone(), q)
        })
        .collect()
}

pub fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Amounts {
    list.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), amount(k, v)))
        .collect()
}

pub fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        // Quantities come from outside; a sum past i64 saturates instead of panicking.
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn max_into(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn aggregate(spec: &PodSpec, pick: impl Fn(&Container) -> Amounts) -> Amounts {
    let mut total = Amounts::new();
    for c in &spec.containers {
        add(&mut total, &pick(c));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let own = pick(c);
        let during = if is_sidecar(c) {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut tmp = own;
            add(&mut tmp, &sidecars);
            tmp
        };
        max_into(&mut init_peak, &during);
    }
    max_into(&mut total, &init_peak);
    add(&mut total, &amounts(spec.overhead.as_ref()));
    total
}

pub fn container_requests(c: &Container) -> Amounts {
    amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

pub fn container_limits(c: &Container) -> Amounts {
    amounts(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// The pod's effective requests.
pub fn pod_requests(pod: &Pod) -> Amounts {
    pod.spec
        .as_ref()
        .map(|s| aggregate(s, container_requests))
        .unwrap_or_default()
}

/// The pod's effective limits (a resource is limited only where containers set limits).
pub fn pod_limits(pod: &Pod) -> Amounts {
    pod.spec
        .as_ref()
        .map(|s| aggregate(s, container_limits))
        .unwrap_or_default()
}

/// Whether every regular and init container sets a limit for `resource`.
pub fn all_containers_limit(pod: &Pod, resource: &str) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .all(|c| container_limits(c).get(resource).is_some_and(|v| *v > 0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn requests_with_init_sidecars_and_overhead() {
        let p = pod(serde_json::json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "kubernetes.io/batch-cpu": "2000"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}}],
            "initContainers": [
                {"name": "big-init", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}},
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
            "overhead": {"cpu": "50m"}}}));
        let r = pod_requests(&p);
        // Regular 750m + sidecar 100m = 850m, below the 2-core init peak; plus overhead.
        assert_eq!(r["cpu"], 2050);
        assert_eq!(r["memory"], 1 << 30);
        assert_eq!(
            r["kubernetes.io/batch-cpu"], 2000,
            "batch-cpu stays an integer"
        );
    }

    #[test]
    fn sidecars_add_to_later_init_containers() {
        let p = pod(serde_json::json!({"spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "late-init", "resources": {"requests": {"cpu": "1"}}}]}}));
        assert_eq!(
            pod_requests(&p)["cpu"],
            2000,
            "late init runs beside the sidecar"
        );
    }

    #[test]
    fn limits_everywhere() {
        let limited = pod(serde_json::json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "500m"}}}]}}));
        assert!(all_containers_limit(&limited, "cpu"));
        assert!(!all_containers_limit(&limited, "memory"));
        assert_eq!(pod_limits(&limited)["cpu"], 1500);
    }
}
