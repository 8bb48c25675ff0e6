//! What the scheduler writes back on each ElasticQuota (Koordinator's quota controller):
//! `status.used` and the `runtime`, `request`, `child-request` and
//! `non-preemptible-used` annotations. A parent's figures are its children's sums.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::extension::keys::*;
use crate::api::pod::{Amounts, add, resource_list};
use crate::scheduler::framework::ClusterState;
use crate::scheduler::framework::quotas::masked;

fn children<'a>(cluster: &'a ClusterState, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    cluster
        .quotas
        .infos
        .values()
        .filter(move |q| q.parent == name && q.name != name)
        .map(|q| q.name.as_str())
}

/// Σ used of a quota's pods, or of its descendants' for a parent.
pub fn used_of(cluster: &ClusterState, name: &str) -> Amounts {
    fold(cluster, name, 0, &|c, n| c.quotas.sums(n).used)
}

fn fold(
    cluster: &ClusterState,
    name: &str,
    depth: usize,
    leaf: &dyn Fn(&ClusterState, &str) -> Amounts,
) -> Amounts {
    let mut out = leaf(cluster, name);
    if depth < 64 {
        for c in children(cluster, name) {
            add(&mut out, &fold(cluster, c, depth + 1, leaf));
        }
    }
    out
}

/// One quota's figures as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    pub namespace: String,
    pub used: Amounts,
    pub runtime: Amounts,
    pub request: Amounts,
    pub child_request: Amounts,
    pub non_preemptible_used: Amounts,
}

/// The figures of every ElasticQuota object the scheduler knows.
pub fn figures(cluster: &ClusterState) -> BTreeMap<String, Figures> {
    let runtime = cluster.quota_runtime();
    let mut out = BTreeMap::new();
    for q in cluster.quotas.infos.values() {
        let name = q.name.as_str();
        let limited = |c: &ClusterState, n: &str| {
            let req = c.quotas.sums(n).request;
            match c.quotas.info(n) {
                Some(i) => masked(&req, &i.max)
                    .into_iter()
                    .map(|(k, v)| {
                        let m = i.max.get(&k).copied().unwrap_or(0);
                        (k, v.clamp(0, m))
                    })
                    .collect(),
                None => req,
            }
        };
        let child_request = fold(cluster, name, 0, &|c, n| c.quotas.sums(n).request);
        let request = fold(cluster, name, 0, &limited);
        out.insert(
            q.name.clone(),
            Figures {
                namespace: q.namespace.clone(),
                used: masked(&used_of(cluster, name), &q.max),
                runtime: runtime.get(name).cloned().unwrap_or_default(),
                request: masked(&request, &q.max),
                child_request: masked(&child_request, &q.max),
                non_preemptible_used: fold(cluster, name, 0, &|c, n| {
                    c.quotas.sums(n).non_preemptible_used
                }),
            },
        );
    }
    out
}

fn list_json(a: &Amounts) -> String {
    let nonzero: Amounts = a
        .iter()
        .filter(|(_, v)| **v != 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    serde_json::to_string(&resource_list(&nonzero)).unwrap_or_else(|_| "{}".into())
}

/// The merge patch that writes `f` (status.used and the annotations). A resource of the
/// quota's max used by nothing is removed (`null`), as Koordinator's two-way merge patch
/// removes it: written as absent, a merge patch would leave its last value in place.
pub fn patch(f: &Figures) -> Value {
    let used: serde_json::Map<String, Value> = f
        .used
        .iter()
        .map(|(k, v)| {
            let q = (*v != 0).then(|| resource_list(&[(k.clone(), *v)].into())[k].0.clone());
            (k.clone(), q.map_or(Value::Null, Value::String))
        })
        .collect();
    json!({
        "metadata": {"annotations": {
            ANNOTATION_QUOTA_RUNTIME: list_json(&f.runtime),
            ANNOTATION_QUOTA_REQUEST: list_json(&f.request),
            ANNOTATION_QUOTA_CHILD_REQUEST: list_json(&f.child_request),
            ANNOTATION_QUOTA_NON_PREEMPTIBLE_USED: list_json(&f.non_preemptible_used),
        }},
        "status": {"used": used},
    })
}

pub fn version(cluster: &ClusterState) -> Option<u64> {
    cluster.quotas.enabled().then_some(cluster.quotas.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_used_by_nothing_is_removed_from_status() {
        let f = Figures {
            used: [("cpu".to_string(), 1500), ("memory".to_string(), 0)].into(),
            ..Default::default()
        };
        let p = patch(&f);
        assert_eq!(p["status"]["used"], json!({"cpu": "1500m", "memory": null}));
        let mut status = json!({"used": {"cpu": "2", "memory": "1Gi"}});
        json_patch::merge(&mut status, &p["status"]);
        assert_eq!(status, json!({"used": {"cpu": "1500m"}}));
    }
}
