//! The Deployment controller (kube-controller-manager's `deployment`): one ReplicaSet per
//! pod template (named `<deployment>-<pod-template-hash>`, the hash label on its selector,
//! template and pods), rolled out with `RollingUpdate` (maxSurge rounded up,
//! maxUnavailable rounded down, 25 % each by default) or `Recreate`, the revision in the
//! `deployment.kubernetes.io/revision` annotation (so `kubectl rollout undo` finds it),
//! old ReplicaSets beyond `revisionHistoryLimit` removed, and the status `kubectl rollout
//! status` reads.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::replicaset::owner_ref;

pub const LABEL_HASH: &str = "pod-template-hash";
pub const ANN_REVISION: &str = "deployment.kubernetes.io/revision";

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// A new ReplicaSet to create (its full object).
    pub create: Option<Value>,
    /// (ReplicaSet name, replicas).
    pub scale: Vec<(String, i32)>,
    /// (ReplicaSet name, revision) to set on the new ReplicaSet (a rollback re-uses one).
    pub revision: Option<(String, i64)>,
    /// The revision to note on the Deployment (its new ReplicaSet's), when it differs.
    pub deployment_revision: Option<i64>,
    /// Old ReplicaSets beyond the history limit.
    pub delete: Vec<String>,
    pub status: Option<Value>,
}

/// kube's SafeEncodeString alphabet over FNV-32a of the template: stable and short.
pub fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in template.to_string().bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x01000193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    for c in h.to_string().bytes() {
        out.push(ALPHABET[(c as usize) % ALPHABET.len()] as char);
    }
    out
}

/// The template without the hash label (what the Deployment's template is compared with).
fn unhashed(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(l) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove(LABEL_HASH);
        if l.is_empty()
            && let Some(m) = t.pointer_mut("/metadata").and_then(Value::as_object_mut)
        {
            m.remove("labels");
        }
    }
    t
}

fn revision(rs: &ReplicaSet) -> i64 {
    let a = rs.metadata.annotations.as_ref();
    a.and_then(|a| a.get(ANN_REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn status_of(
    rs: &ReplicaSet,
    f: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>,
) -> i32 {
    rs.status.as_ref().and_then(f).unwrap_or(0)
}

/// `25%` of `total`, rounded up (surge) or down (unavailable).
pub(super) fn resolve(v: Option<&IntOrString>, total: i32, up: bool) -> i32 {
    match v {
        None => resolve(Some(&IntOrString::String("25%".into())), total, up),
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let p: f64 = s.trim_end_matches('%').parse().unwrap_or(25.0);
            let x = p * total as f64 / 100.0;
            (if up { x.ceil() } else { x.floor() }) as i32
        }
    }
}

/// The new ReplicaSet for the Deployment's template (replicas 0; the next pass scales it).
fn new_replica_set(d: &Deployment, template: &Value, hash: &str, rev: i64) -> Value {
    let name = d.metadata.name.clone().unwrap_or_default();
    let mut tmpl = template.clone();
    tmpl["metadata"]["labels"][LABEL_HASH] = hash.into();
    let mut selector =
        serde_json::to_value(d.spec.as_ref().map(|s| s.selector.clone())).unwrap_or(json!({}));
    selector["matchLabels"][LABEL_HASH] = hash.into();
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{name}-{hash}"),
            "namespace": d.metadata.namespace.clone().unwrap_or_default(),
            "labels": tmpl["metadata"]["labels"].clone(),
            "annotations": {ANN_REVISION: rev.to_string()},
            "ownerReferences": [owner_ref("apps/v1", "Deployment", &d.metadata)],
        },
        "spec": {"replicas": 0, "minReadySeconds": d.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0),
                 "selector": selector, "template": tmpl},
    })
}

/// One pass for one Deployment over the ReplicaSets it controls.
pub fn plan(d: &Deployment, owned: &[&ReplicaSet]) -> Plan {
    let mut out = Plan::default();
    let Some(spec) = d.spec.as_ref() else {
        return out;
    };
    let template = serde_json::to_value(&spec.template).unwrap_or_default();
    let want = spec.replicas.unwrap_or(1).max(0);
    let max_rev = owned.iter().map(|r| revision(r)).max().unwrap_or(0);
    let new = owned.iter().copied().find(|r| {
        let t = r.spec.as_ref().and_then(|s| s.template.as_ref());
        t.map(|t| unhashed(&serde_json::to_value(t).unwrap_or_default())) == Some(template.clone())
    });
    let Some(new) = new else {
        if d.metadata.deletion_timestamp.is_none() {
            let hash = template_hash(&template);
            out.create = Some(new_replica_set(d, &template, &hash, max_rev + 1));
        }
        out.status = status(d, owned, None, want);
        return out;
    };
    if d.metadata.deletion_timestamp.is_some() {
        // Being deleted: status only (kube's syncStatusOnly); the garbage collector
        // orphans or deletes the ReplicaSets.
        out.status = status(d, owned, Some(new), want);
        return out;
    }
    let new_name = new.metadata.name.clone().unwrap_or_default();
    let mut new_rev = revision(new);
    if new_rev < max_rev || new_rev == 0 {
        new_rev = max_rev.max(new_rev) + 1;
        out.revision = Some((new_name.clone(), new_rev));
    }
    let noted = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_REVISION));
    if noted.and_then(|v| v.parse::<i64>().ok()) != Some(new_rev) {
        out.deployment_revision = Some(new_rev);
    }
    let mut olds: Vec<&ReplicaSet> = owned
        .iter()
        .copied()
        .filter(|r| r.metadata.uid != new.metadata.uid)
        .collect();
    olds.sort_by_key(|r| revision(r));
    if !spec.paused.unwrap_or(false) {
        let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
        if recreate {
            recreate_steps(new, &olds, want, &mut out);
        } else {
            rolling_steps(spec, new, &olds, want, &mut out);
        }
    }
    // History: old ReplicaSets at zero beyond the limit, oldest first.
    let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    let idle: Vec<&&ReplicaSet> = olds
        .iter()
        .filter(|r| spec_replicas(r) == 0 && status_of(r, |s| Some(s.replicas)) == 0)
        .collect();
    if idle.len() > limit {
        out.delete = idle[..idle.len() - limit]
            .iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect();
    }
    out.status = status(d, owned, Some(new), want);
    out
}

fn recreate_steps(new: &ReplicaSet, olds: &[&ReplicaSet], want: i32, out: &mut Plan) {
    let running_old = olds
        .iter()
        .any(|r| spec_replicas(r) > 0 || status_of(r, |s| Some(s.replicas)) > 0);
    for r in olds.iter().filter(|r| spec_replicas(r) > 0) {
        out.scale
            .push((r.metadata.name.clone().unwrap_or_default(), 0));
    }
    if !running_old && spec_replicas(new) != want {
        out.scale
            .push((new.metadata.name.clone().unwrap_or_default(), want));
    }
}

fn rolling_steps(
    spec: &k8s_openapi::api::apps::v1::DeploymentSpec,
    new: &ReplicaSet,
    olds: &[&ReplicaSet],
    want: i32,
    out: &mut Plan,
) {
    let ru = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let surge = resolve(ru.and_then(|r| r.max_surge.as_ref()), want, true);
    let mut unavailable = resolve(ru.and_then(|r| r.max_unavailable.as_ref()), want, false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    let all: i32 = olds.iter().map(|r| spec_replicas(r)).sum::<i32>() + spec_replicas(new);
    let new_name = new.metadata.name.clone().unwrap_or_default();
    let new_replicas = spec_replicas(new);
    // Scale up the new ReplicaSet within the surge (or down to `want`).
    if new_replicas > want {
        out.scale.push((new_name.clone(), want));
    } else if new_replicas < want {
        let room = (want + surge - all).max(0);
        let target = want.min(new_replicas + room);
        if target != new_replicas {
            out.scale.push((new_name, target));
        }
    }
    // Scale the old ones down while enough pods stay available.
    let new_unavailable = (new_replicas - status_of(new, |s| s.available_replicas)).max(0);
    let mut can = (all - (want - unavailable) - new_unavailable).max(0);
    // Old pods that are not available go first, without counting against availability.
    for r in olds {
        let unhealthy = (spec_replicas(r) - status_of(r, |s| s.available_replicas)).max(0);
        if unhealthy > 0 {
            out.scale.push((
                r.metadata.name.clone().unwrap_or_default(),
                spec_replicas(r) - unhealthy,
            ));
        }
    }
    for r in olds {
        let already = out
            .scale
            .iter()
            .find(|(n, _)| Some(n) == r.metadata.name.as_ref())
            .map(|(_, v)| *v);
        let current = already.unwrap_or_else(|| spec_replicas(r));
        if can <= 0 || current == 0 {
            continue;
        }
        let down = current.min(can);
        can -= down;
        out.scale
            .retain(|(n, _)| Some(n) != r.metadata.name.as_ref());
        out.scale
            .push((r.metadata.name.clone().unwrap_or_default(), current - down));
    }
}

fn status(
    d: &Deployment,
    owned: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    want: i32,
) -> Option<Value> {
    let sum = |f: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>| -> i32 {
        owned.iter().map(|r| status_of(r, f)).sum()
    };
    let replicas = sum(|s| Some(s.replicas));
    let ready = sum(|s| s.ready_replicas);
    let available = sum(|s| s.available_replicas);
    let updated = new.map_or(0, |n| status_of(n, |s| Some(s.replicas)));
    let complete = new.is_some() && updated == want && replicas == want && available == want;
    let now = crate::api::time::now();
    let cond = |t: &str, ok: bool, reason: &str, msg: String| {
        json!({"type": t, "status": if ok { "True" } else { "False" }, "reason": reason, "message": msg,
               "lastUpdateTime": now, "lastTransitionTime": now})
    };
    let new_name = new
        .and_then(|n| n.metadata.name.clone())
        .unwrap_or_default();
    let cur = serde_json::to_value(d.status.clone().unwrap_or_default()).unwrap_or_default();
    let counts_now = [replicas, updated, ready, available];
    let progressed = counts_now != counts_of(&cur);
    let progressing = if !complete && !progressed && past_deadline(d, &cur) {
        cond(
            "Progressing",
            false,
            "ProgressDeadlineExceeded",
            format!("ReplicaSet \"{new_name}\" has timed out progressing."),
        )
    } else if complete {
        cond(
            "Progressing",
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        )
    } else {
        cond(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{new_name}\" is progressing."),
        )
    };
    let min_available = want - resolve_unavailable(d, want);
    let available_cond = if available >= min_available {
        cond(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
        )
    } else {
        cond(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
        )
    };
    let status = json!({
        "observedGeneration": d.metadata.generation.unwrap_or(0),
        "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
        "availableReplicas": available, "unavailableReplicas": (want - available).max(0),
        "conditions": [available_cond, progressing],
    });
    let counts = [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ];
    let same_counts = counts.iter().all(|k| {
        cur.get(*k).and_then(Value::as_i64).unwrap_or(0) == status[*k].as_i64().unwrap_or(0)
    });
    let reason = |v: &Value, t: &str| {
        v.get("conditions").and_then(Value::as_array).and_then(|c| {
            c.iter()
                .find(|c| c["type"] == t)
                .map(|c| (c["status"].clone(), c["reason"].clone()))
        })
    };
    let same_conds = ["Available", "Progressing"]
        .iter()
        .all(|t| reason(&cur, t) == reason(&status, t));
    (!(same_counts && same_conds)).then_some(status)
}

/// replicas, updated, ready and available as the stored status has them.
fn counts_of(status: &Value) -> [i32; 4] {
    [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ]
    .map(|k| status.get(k).and_then(Value::as_i64).unwrap_or(0) as i32)
}

/// No progress for `progressDeadlineSeconds` since the Progressing condition last changed
/// (or the deadline was already reported); never while paused.
fn past_deadline(d: &Deployment, cur: &Value) -> bool {
    let spec = d.spec.as_ref();
    let Some(deadline) = spec.and_then(|s| s.progress_deadline_seconds) else {
        return false;
    };
    if spec.and_then(|s| s.paused).unwrap_or(false) {
        return false;
    }
    let conds = cur.get("conditions").and_then(Value::as_array);
    let Some(p) = conds
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Progressing")
    else {
        return false;
    };
    if p["reason"] == "ProgressDeadlineExceeded" {
        return true;
    }
    let since = p["lastUpdateTime"]
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    since.is_some_and(|t| {
        k8s_openapi::jiff::Timestamp::now().as_second() - t.as_second() > i64::from(deadline)
    })
}

fn resolve_unavailable(d: &Deployment, want: i32) -> i32 {
    let spec = d.spec.as_ref();
    let recreate = spec
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate");
    if recreate {
        return want;
    }
    let ru = spec
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    resolve(ru.and_then(|r| r.max_unavailable.as_ref()), want, false)
}

#[cfg(test)]
#[path = "deployment_tests.rs"]
mod tests;
