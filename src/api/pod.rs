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
    total
}

/// The resources a pod may set for itself as a whole (kube's PodLevelResources: cpu,
/// memory, hugepages).
pub fn pod_level_supported(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// The pod-level amounts of `pick` (requests or limits) that replace the containers' sum.
pub fn pod_level(
    spec: &PodSpec,
    pick: impl Fn(
        &k8s_openapi::api::core::v1::ResourceRequirements,
    ) -> Option<&BTreeMap<String, Quantity>>,
) -> Amounts {
    let mut own = amounts(spec.resources.as_ref().and_then(pick));
    own.retain(|name, _| pod_level_supported(name));
    own
}

pub fn container_requests(c: &Container) -> Amounts {
    amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

pub fn container_limits(c: &Container) -> Amounts {
    amounts(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// The pod's effective requests (kube's `PodRequests`): the containers' (init and sidecar
/// rules), each pod-level request in their place, plus the overhead.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let Some(spec) = pod.spec.as_ref() else {
        return Amounts::new();
    };
    let mut total = aggregate(spec, container_requests);
    total.extend(pod_level(spec, |r| r.requests.as_ref()));
    add(&mut total, &amounts(spec.overhead.as_ref()));
    total
}

/// The pod's effective limits (kube's `PodLimits`; a resource is limited only where
/// containers or the pod set limits, and the overhead adds only to those).
pub fn pod_limits(pod: &Pod) -> Amounts {
    let Some(spec) = pod.spec.as_ref() else {
        return Amounts::new();
    };
    let mut total = aggregate(spec, container_limits);
    total.extend(pod_level(spec, |r| r.limits.as_ref()));
    for (name, v) in amounts(spec.overhead.as_ref()) {
        if let Some(limit) = total.get_mut(&name) {
            *limit = limit.saturating_add(v);
        }
    }
    total
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

    /// kube's TestPodResourceRequests / TestPodResourceLimits with pod-level resources:
    /// cpu and memory set for the pod replace the containers' sum, anything else set there
    /// is ignored, the overhead still adds (to limits only where a limit exists).
    #[test]
    fn pod_level_resources_replace_the_containers_sum() {
        let p = pod(serde_json::json!({"spec": {
            "resources": {"requests": {"cpu": "2", "example.com/widget": "3"},
                "limits": {"memory": "4Gi"}},
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}],
            "overhead": {"cpu": "100m", "memory": "64Mi"}}}));
        let r = pod_requests(&p);
        assert_eq!(r["cpu"], 2100, "the pod's 2 CPUs, not 750m, plus overhead");
        assert_eq!(
            r["memory"],
            (2 << 30) + (64 << 20),
            "containers' sum plus overhead"
        );
        assert!(
            !r.contains_key("example.com/widget"),
            "not a pod-level resource"
        );
        let l = pod_limits(&p);
        assert_eq!(l["memory"], (4 << 30) + (64 << 20));
        assert_eq!(
            l["cpu"], 1100,
            "only container a limits cpu; overhead on top"
        );
        let no_limits = pod(serde_json::json!({"spec": {"containers": [{"name": "a"}],
            "overhead": {"cpu": "100m"}}}));
        assert!(pod_limits(&no_limits).is_empty(), "overhead makes no limit");
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
