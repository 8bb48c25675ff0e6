//! The colocationprofile controller (`pkg/controller/colocationprofile`, gate
//! `ColocationProfileController`): pods created before a ClusterColocationProfile — or
//! that its webhook never saw — get the profile's metadata while they are still pending
//! and unscheduled. Only profiles labelled `config.koordinator.sh/controller-managed:
//! "true"`; every 30 s and on any profile change; leader only. As Koordinator's: labels,
//! annotations, key mappings, label suffixes, `qosClass`, `koordinatorPriority` and
//! `patch` (never the scheduler name, priority or resources); a profile's `probability`
//! rolls per pod; a pod is patched at most once per profile version in 5 minutes; at most
//! 10 pod patches a second (bursts of 100).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client};
use serde_json::Value;

use crate::api::config::ClusterColocationProfile;
use crate::kernel::lease::Leadership;
use crate::kernel::{Shutdown, Tasks};
use crate::manager::webhook::pod_mutate::{apply_profile, probability, selector_matches};
use crate::manager::webhook::review::Verdict;

pub const LABEL_CONTROLLER_MANAGED: &str = "config.koordinator.sh/controller-managed";
const RECONCILE_INTERVAL: Duration = Duration::from_secs(30);
const FORCE_UPDATE_POD: Duration = Duration::from_secs(300);
const QPS: f64 = 10.0;
const BURST: f64 = 100.0;

/// Whether the controller reconciles this profile (`ShouldReconcileProfile`).
pub fn managed(p: &ClusterColocationProfile) -> bool {
    let labels = p.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(LABEL_CONTROLLER_MANAGED))
        .map(String::as_str)
        == Some("true")
}

/// Pending, unscheduled pods the profile's selectors pick (no selector: none, as
/// Koordinator's). `namespace_labels` answers `None` for an unknown namespace.
pub fn candidates<'a>(
    p: &ClusterColocationProfile,
    pods: &'a [Arc<Pod>],
    namespace_labels: &mut dyn FnMut(&str) -> Option<BTreeMap<String, String>>,
) -> Vec<&'a Pod> {
    let Some(sel) = p.spec.selector.as_ref() else {
        return Vec::new();
    };
    pods.iter()
        .map(|p| p.as_ref())
        .filter(|pod| {
            let spec = pod.spec.as_ref();
            let unscheduled = spec
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty);
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            unscheduled && phase == Some("Pending")
        })
        .filter(|pod| selector_matches(Some(sel), pod.metadata.labels.as_ref()))
        .filter(|pod| match p.spec.namespace_selector.as_ref() {
            None => true,
            // An unknown namespace does not match (the controller's rule; the webhook's
            // failed lookup counts as a match).
            Some(ns_sel) => {
                let ns = pod.metadata.namespace.as_deref().unwrap_or("");
                namespace_labels(ns).is_some_and(|l| selector_matches(Some(ns_sel), Some(&l)))
            }
        })
        .collect()
}

/// The JSON patch turning `pod` into what the profile makes of it; `None` when nothing
/// changes.
pub fn patch_for(
    p: &ClusterColocationProfile,
    pod: &Pod,
) -> Result<Option<json_patch::Patch>, String> {
    let before = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    let mut after = before.clone();
    apply_profile(p, &mut after, None).map_err(|v| match v {
        Verdict::Deny { message, .. } => message,
        other => format!("{other:?}"),
    })?;
    // The mutation adds empty label/annotation maps; they are no change.
    for key in ["labels", "annotations"] {
        let empty_now = after["metadata"][key]
            .as_object()
            .is_some_and(|m| m.is_empty());
        if empty_now
            && before["metadata"].get(key).is_none()
            && let Some(m) = after["metadata"].as_object_mut()
        {
            m.remove(key);
        }
    }
    let patch = json_patch::diff(&before, &after);
    Ok((!patch.0.is_empty()).then_some(patch))
}

/// A token bucket: `QPS` a second, `BURST` at most.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn allow(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * QPS;
        self.tokens = (self.tokens + refill).min(BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Reconciler {
    client: Client,
    pods: reflector::Store<Pod>,
    /// `profile resourceVersion/pod uid` → when patched.
    updated: HashMap<String, Instant>,
    bucket: Bucket,
    roll: Box<dyn FnMut() -> u32 + Send + Sync>,
}

impl Reconciler {
    async fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api.get_opt(ns).await {
            Ok(n) => n.map(|n| n.metadata.labels.unwrap_or_default()),
            Err(e) => {
                tracing::warn!(namespace = ns, error = %e, "colocationprofile: namespace lookup failed");
                None
            }
        }
    }

    async fn reconcile(&mut self, profiles: &[Arc<ClusterColocationProfile>]) {
        self.updated.retain(|_, at| at.elapsed() < FORCE_UPDATE_POD);
        let pods = self.pods.state();
        let profiles: Vec<_> = profiles
            .iter()
            .filter(|p| managed(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        // Namespace labels once per pass, and only when a profile selects by them.
        let mut ns_labels = HashMap::new();
        if profiles.iter().any(|p| p.spec.namespace_selector.is_some()) {
            for pod in pods.iter() {
                let ns = pod.metadata.namespace.clone().unwrap_or_default();
                if let Entry::Vacant(e) = ns_labels.entry(ns) {
                    let labels = self.namespace_labels(e.key()).await;
                    e.insert(labels);
                }
            }
        }
        for p in profiles {
            let picked = candidates(p, &pods, &mut |ns| ns_labels.get(ns).cloned().flatten());
            self.update_pods(p, picked).await;
        }
    }

    async fn update_pods(&mut self, p: &ClusterColocationProfile, pods: Vec<&Pod>) {
        let name = p.metadata.name.as_deref().unwrap_or("");
        let version = p.metadata.resource_version.clone().unwrap_or_default();
        let percent = match probability(p.spec.probability.as_ref()) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(profile = name, error = %e, "colocationprofile: spec.probability");
                return;
            }
        };
        for pod in pods {
            if percent <= 0 || (percent < 100 && i64::from((self.roll)() % 100) > percent) {
                continue;
            }
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let key = format!("{version}/{uid}");
            if self.updated.contains_key(&key) || !self.bucket.allow() {
                continue;
            }
            let (ns, pod_name) = (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            match patch_for(p, pod) {
                Err(e) => {
                    tracing::warn!(profile = name, pod = %format!("{ns}/{pod_name}"), error = %e, "colocationprofile: mutation failed")
                }
                Ok(None) => {
                    self.updated.insert(key, Instant::now());
                }
                Ok(Some(patch)) => {
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
                    let pp = PatchParams::default();
                    match api
                        .patch(&pod_name, &pp, &Patch::<Value>::Json(patch))
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(profile = name, pod = %format!("{ns}/{pod_name}"), "colocationprofile: pod updated");
                            self.updated.insert(key, Instant::now());
                        }
                        Err(e) => {
                            tracing::warn!(profile = name, pod = %format!("{ns}/{pod_name}"), error = %e, "colocationprofile: patching the pod failed")
                        }
                    }
                }
            }
        }
    }
}

pub fn spawn(
    client: Client,
    pods: reflector::Store<Pod>,
    leadership: Leadership,
    tasks: &Tasks,
    shutdown: &Shutdown,
) {
    let changed = Arc::new(tokio::sync::Notify::new());
    let kick = changed.clone();
    let (reader, index) =
        crate::kernel::pump::reflect::<ClusterColocationProfile, _>(move |_| kick.notify_one());
    let cfg = watcher::Config::default();
    crate::kernel::pump::spawn::<ClusterColocationProfile, _>(
        tasks,
        "manager/colocation-profile/watch",
        client.clone(),
        None,
        cfg,
        index,
        shutdown,
    );
    let shutdown = shutdown.clone();
    let seed = uuid::Uuid::new_v4().as_u128() as u64;
    let mut r = Reconciler {
        client,
        pods,
        updated: HashMap::new(),
        bucket: Bucket {
            tokens: BURST,
            at: Instant::now(),
        },
        roll: Box::new(xorshift(seed)),
    };
    tasks.spawn("manager/colocation-profile", async move {
        let mut tick = tokio::time::interval(RECONCILE_INTERVAL);
        loop {
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                _ = changed.notified() => {}
                _ = tick.tick() => {}
            }
            if leadership.is_leader() {
                r.reconcile(&reader.state()).await;
            }
        }
    });
}

fn xorshift(mut state: u64) -> impl FnMut() -> u32 + Send + Sync {
    state |= 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    }
}

#[cfg(test)]
#[path = "colocationprofile_tests.rs"]
mod tests;
