//! The ElasticQuotaProfile controller (`pkg/quota-controller/profile`): each profile owns
//! the root quota of a tree of its own — named `spec.quotaName`, in the profile's
//! namespace — whose min is what the selected nodes can give (× `resourceRatio`), for
//! `cpu` and `memory` or the keys in the `resource-keys` annotation; the scheduler shares
//! the `total-resource` annotation among the tree. Leader only; every 10 s and on any
//! profile change, as Koordinator requeues.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::api::extension::keys::*;
use crate::api::pod::{Amounts, add, amounts, resource_list};
use crate::api::quota::{ElasticQuota, ElasticQuotaProfile};
use crate::api::selector::Selector;
use crate::kernel::lease::Leadership;
use crate::kernel::{Shutdown, Tasks};

const ANNOTATION_RESOURCE_KEYS: &str = "quota.scheduling.koordinator.sh/resource-keys";
const ANNOTATION_UNSCHEDULABLE: &str = "quota.scheduling.koordinator.sh/unschedulable-resource";
const LABEL_PROFILE: &str = "quota.scheduling.koordinator.sh/profile";
const PERIOD: Duration = Duration::from_secs(10);

/// The root quota a profile wants: labels, annotations and spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub min: Amounts,
    pub max: Amounts,
}

/// Koordinator's tree id for a profile without one: FNV-64a of `namespace/name`.
pub fn tree_id(namespace: &str, name: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in format!("{namespace}/{name}").bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h.to_string()
}

fn ready(n: &Node) -> bool {
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// What a profile's quota should look like over `nodes`.
pub fn desired(p: &ElasticQuotaProfile, nodes: &[Arc<Node>]) -> Result<Desired, String> {
    let namespace = p.metadata.namespace.clone().unwrap_or_default();
    let name = p.metadata.name.clone().unwrap_or_default();
    if p.spec.quota_name.is_empty() {
        return Err(format!(
            "ElasticQuotaProfile {namespace}/{name}: spec.quotaName is empty"
        ));
    }
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let annotations = p.metadata.annotations.clone().unwrap_or_default();
    let (mut total, mut unschedulable) = (Amounts::new(), Amounts::new());
    let sel = match &p.spec.node_selector {
        None => None,
        Some(s) => Some(Selector::from_label_selector(s).map_err(|e| {
            format!("ElasticQuotaProfile {namespace}/{name}: spec.nodeSelector: {e}")
        })?),
    };
    for n in nodes {
        // No selector: every node (Koordinator lists with it as is).
        if sel
            .as_ref()
            .is_some_and(|s| !s.matches_opt(n.metadata.labels.as_ref()))
        {
            continue;
        }
        let alloc = amounts(n.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        add(&mut total, &alloc);
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        if cordoned || !ready(n) {
            add(&mut unschedulable, &alloc);
        }
    }
    // A ratio outside (0, 1] counts as 1, as Koordinator's decorator does.
    let ratio = p
        .spec
        .resource_ratio
        .as_deref()
        .and_then(|r| r.parse::<f64>().ok())
        .filter(|r| *r > 0.0 && *r <= 1.0)
        .unwrap_or(1.0);
    for a in [&mut total, &mut unschedulable] {
        for v in a.values_mut() {
            *v = (*v as f64 * ratio) as i64;
        }
    }
    let keys: Vec<String> = match annotations.get(ANNOTATION_RESOURCE_KEYS) {
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            format!("ElasticQuotaProfile {namespace}/{name}: metadata.annotations[{ANNOTATION_RESOURCE_KEYS}]: {e}")
        })?,
        None => vec!["cpu".into(), "memory".into()],
    };
    let min: Amounts = keys
        .iter()
        .map(|k| (k.clone(), total.get(k).copied().unwrap_or(0)))
        .collect();
    // MaxInt64/2000 of each (cores for cpu, written as Koordinator writes it).
    let max: Amounts = keys
        .iter()
        .map(|k| {
            let v = i64::MAX / 2000;
            (k.clone(), if k == "cpu" { v * 1000 } else { v })
        })
        .collect();
    let mut quota_labels = p.spec.quota_labels.clone().unwrap_or_default();
    quota_labels.insert(LABEL_PROFILE.into(), name.clone());
    let tree = labels
        .get(LABEL_QUOTA_TREE_ID)
        .cloned()
        .unwrap_or_else(|| tree_id(&namespace, &name));
    quota_labels.insert(LABEL_QUOTA_TREE_ID.into(), tree);
    quota_labels.insert(LABEL_QUOTA_IS_ROOT.into(), "true".into());
    let json = |a: &Amounts| serde_json::to_string(&resource_list(a)).unwrap_or_default();
    let quota_annotations = BTreeMap::from([
        (ANNOTATION_QUOTA_TOTAL_RESOURCE.to_string(), json(&total)),
        (ANNOTATION_UNSCHEDULABLE.to_string(), json(&unschedulable)),
    ]);
    Ok(Desired {
        namespace,
        name: p.spec.quota_name.clone(),
        labels: quota_labels,
        annotations: quota_annotations,
        min,
        max,
    })
}

/// Whether `q` already carries everything `d` asks for.
fn up_to_date(q: &ElasticQuota, d: &Desired) -> bool {
    let has = |have: &Option<BTreeMap<String, String>>, want: &BTreeMap<String, String>| {
        let have = have.clone().unwrap_or_default();
        want.iter().all(|(k, v)| have.get(k) == Some(v))
    };
    has(&q.metadata.labels, &d.labels)
        && has(&q.metadata.annotations, &d.annotations)
        && amounts(q.spec.min.as_ref()) == d.min
        && amounts(q.spec.max.as_ref()) == d.max
}

fn body(d: &Desired) -> Value {
    json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": d.name, "namespace": d.namespace, "labels": d.labels,
            "annotations": d.annotations},
        "spec": {"min": resource_list(&d.min), "max": resource_list(&d.max)}})
}

async fn apply(client: &Client, d: &Desired) -> Result<(), kube::Error> {
    let api: Api<ElasticQuota> = Api::namespaced(client.clone(), &d.namespace);
    match api.get_opt(&d.name).await? {
        Some(q) if up_to_date(&q, d) => Ok(()),
        Some(_) => {
            let patch = body(d);
            api.patch(&d.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        }
        None => {
            let q: ElasticQuota =
                serde_json::from_value(body(d)).map_err(kube::Error::SerdeError)?;
            api.create(&PostParams::default(), &q).await.map(|_| ())
        }
    }
}

async fn reconcile(
    client: &Client,
    profiles: &reflector::Store<ElasticQuotaProfile>,
    nodes: &reflector::Store<Node>,
) {
    let all_nodes = nodes.state();
    for p in profiles.state() {
        match desired(&p, &all_nodes) {
            Ok(d) => {
                if let Err(e) = apply(client, &d).await {
                    tracing::warn!(quota = %d.name, error = %e, "profile quota not written; retrying");
                }
            }
            Err(e) => tracing::warn!(error = %e, "ElasticQuotaProfile skipped"),
        }
    }
}

/// Starts the controller over the manager's node cache.
pub fn spawn(
    client: Client,
    nodes: reflector::Store<Node>,
    leadership: Leadership,
    tasks: &Tasks,
    shutdown: &Shutdown,
) {
    let changed = Arc::new(tokio::sync::Notify::new());
    let kick = changed.clone();
    let (reader, index) =
        crate::kernel::pump::reflect::<ElasticQuotaProfile, _>(move |_| kick.notify_one());
    let cfg = watcher::Config::default();
    crate::kernel::pump::spawn::<ElasticQuotaProfile, _>(
        tasks,
        "manager/quota-profile/watch",
        client.clone(),
        None,
        cfg,
        index,
        shutdown,
    );
    let shutdown = shutdown.clone();
    tasks.spawn("manager/quota-profile", async move {
        let mut tick = tokio::time::interval(PERIOD);
        loop {
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                _ = changed.notified() => {}
                _ = tick.tick() => {}
            }
            if leadership.is_leader() && !reader.state().is_empty() {
                reconcile(&client, &reader, &nodes).await;
            }
        }
    });
}

#[cfg(test)]
#[path = "quotaprofile_tests.rs"]
mod tests;
