//! DELETE of one object (finalizers, graceful pod deletion, preconditions, dry run) and of
//! a collection.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::write::{MAX_ATTEMPTS, WriteError, after_write, body_bytes};
use super::{Query, ResourceRequest, ServerState, dry_run, object_response};
use crate::apiserver::admission::Attributes;
use crate::apiserver::error::{ApiError, success};
use crate::apiserver::registry::ResourceInfo;
use crate::apiserver::semantics::now;
use crate::apiserver::store::{Change, Stored};
use crate::kernel::http::{Body, json as json_response};

#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub dry_run: Option<Vec<String>>,
    pub preconditions: Option<Preconditions>,
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
}

/// kube's finalizers that hold an owner while the garbage collector orphans or deletes its
/// dependents.
pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

impl DeleteOptions {
    /// `propagationPolicy` (or the deprecated `orphanDependents`), checked as
    /// kube-apiserver's validation does.
    fn propagation(&self) -> Result<Option<&'static str>, ApiError> {
        if self.orphan_dependents.is_some() && self.propagation_policy.is_some() {
            return Err(ApiError::invalid_option(
                "DeleteOptions",
                "propagationPolicy: Invalid value: \"\": orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if let Some(o) = self.orphan_dependents {
            return Ok(Some(if o { "Orphan" } else { "Background" }));
        }
        match self.propagation_policy.as_deref() {
            None => Ok(None),
            Some("Orphan") => Ok(Some("Orphan")),
            Some("Foreground") => Ok(Some("Foreground")),
            Some("Background") => Ok(Some("Background")),
            Some(other) => Err(ApiError::invalid_option(
                "DeleteOptions",
                format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                ),
            )),
        }
    }
}

#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

pub async fn delete(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(q, "DeleteOptions")?;
    let (ct, bytes) = body_bytes(req).await?;
    let mut opts: DeleteOptions = match super::write::parse_options(&ct, bytes).await? {
        None => DeleteOptions::default(),
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?,
    };
    if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(p) = q.get("propagationPolicy") {
        opts.propagation_policy = Some(p.to_string());
    }
    if let Some(o) = q.get("orphanDependents") {
        opts.orphan_dependents = Some(o == "true");
    }
    opts.propagation()?;
    if let Some(d) = opts.dry_run.as_ref().and_then(|d| d.first())
        && d != "All"
    {
        return Err(ApiError::invalid_option(
            "DeleteOptions",
            format!("dryRun[0]: Unsupported value: {d:?}: supported values: \"All\""),
        ));
    }
    let name = rr.name.clone().unwrap_or_default();
    if dry || opts.dry_run.as_ref().is_some_and(|d| !d.is_empty()) {
        let cur = state
            .store
            .get(&rr.info.key(), rr.ns(), &name)
            .ok_or_else(|| ApiError::not_found(&rr.info, &name))?;
        return Ok(object_response(StatusCode::OK, &cur, &rr.api_version()));
    }
    let obj = delete_one(state, &rr.info, &rr.version, rr.ns(), &name, &opts, true).await?;
    Ok(object_response(StatusCode::OK, &obj, &rr.api_version()))
}

/// The finalizers `cur` keeps on deletion under `policy` (kube-apiserver's
/// `deletionFinalizersForGarbageCollection`): `None` when they stay as they are. batch/v1
/// Jobs orphan their pods unless told otherwise, as kube's Job strategy does.
fn gc_finalizers(info: &ResourceInfo, cur: &Value, policy: Option<&str>) -> Option<Value> {
    let policy =
        policy.or((info.group == "batch" && info.resource == "jobs").then_some("Orphan"))?;
    let mut f: Vec<Value> = cur
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    f.retain(|x| x != ORPHAN && x != FOREGROUND);
    match policy {
        "Orphan" => f.push(ORPHAN.into()),
        "Foreground" => f.push(FOREGROUND.into()),
        _ => {}
    }
    Some(Value::Array(f))
}

/// What deleting `cur` means right now.
fn deletion(
    info: &ResourceInfo,
    cur: &Value,
    grace: Option<i64>,
    finalizers: Option<Value>,
) -> Option<Value> {
    let mut held;
    let cur = match finalizers {
        Some(f) if cur.pointer("/metadata/finalizers") != Some(&f) => {
            held = cur.clone();
            held["metadata"]["finalizers"] = f;
            if held["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|a| a.is_empty())
            {
                held["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("finalizers"));
            }
            &held
        }
        _ => cur,
    };
    if info.group.is_empty() && info.resource == "namespaces" {
        // Always through Terminating: the namespace controller empties it first.
        let mut v = cur.clone();
        if cur.pointer("/metadata/deletionTimestamp").is_none() {
            v["metadata"]["deletionTimestamp"] = now().into();
            v["metadata"]["deletionGracePeriodSeconds"] = 0.into();
            v["status"]["phase"] = "Terminating".into();
        }
        return Some(v);
    }
    if info.group == "apiextensions.k8s.io" && info.resource == "customresourcedefinitions" {
        return Some(crate::apiserver::crd_lifecycle::mark_deleted(cur));
    }
    let has_finalizers = cur
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let terminating = cur.pointer("/metadata/deletionTimestamp").is_some();
    if has_finalizers {
        let mut v = cur.clone();
        if !terminating {
            v["metadata"]["deletionTimestamp"] = now().into();
            v["metadata"]["deletionGracePeriodSeconds"] = 0.into();
        }
        return Some(v);
    }
    let bound = cur
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if info.group.is_empty() && info.resource == "pods" && bound {
        let spec_grace = cur
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        let grace = grace.unwrap_or(spec_grace).max(0);
        let current = cur
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        if grace > 0 && current.is_none_or(|c| grace < c) {
            let mut v = cur.clone();
            let at = k8s_openapi::jiff::Timestamp::now()
                + k8s_openapi::jiff::SignedDuration::from_secs(grace);
            v["metadata"]["deletionTimestamp"] =
                at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into();
            v["metadata"]["deletionGracePeriodSeconds"] = grace.into();
            return Some(v);
        }
        if grace > 0 {
            return Some(cur.clone());
        }
    }
    None
}

/// Deletes (or starts the graceful deletion of) one object.
pub(crate) async fn delete_one(
    state: &Arc<ServerState>,
    info: &Arc<ResourceInfo>,
    version: &str,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    admit: bool,
) -> Result<Arc<Stored>, ApiError> {
    let key = info.key();
    for _ in 0..MAX_ATTEMPTS {
        let cur = state
            .store
            .latest(&key, ns, name)
            .ok_or_else(|| ApiError::not_found(info, name))?;
        if let Some(p) = &opts.preconditions {
            if p.uid.as_ref().is_some_and(|u| *u != cur.uid) {
                return Err(ApiError::conflict(
                    info,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                        p.uid.clone().unwrap_or_default(),
                        cur.uid
                    ),
                ));
            }
            if p.resource_version
                .as_ref()
                .is_some_and(|r| *r != cur.rev.to_string())
            {
                return Err(ApiError::stale(info, name));
            }
        }
        let old = cur.value();
        if admit {
            let a = Attributes {
                info,
                version,
                subresource: None,
                operation: "DELETE",
                name,
                namespace: ns,
                old: Some(&old),
            };
            state.admission.validate(&a, None).await?;
        }
        let collected = state.collected.get().is_some_and(|k| {
            k.iter()
                .any(|(g, r)| *g == info.group && *r == info.resource)
        });
        let finalizers = if collected {
            gc_finalizers(info, &old, opts.propagation()?)
        } else {
            None
        };
        let next = deletion(info, &old, opts.grace_period_seconds, finalizers);
        if next.as_ref() == Some(&old) {
            return Ok(cur);
        }
        let observed = cur.rev;
        let result = state.store.commit(&key, ns, name, |c| match c {
            None => Err(WriteError::Api(ApiError::not_found(info, name))),
            Some(c) if c.rev != observed => Err(WriteError::Retry),
            Some(_) => Ok(next.map_or(Change::Delete, Change::Put)),
        });
        match result {
            Ok(committed) => {
                after_write(state, info, &committed, committed.removed());
                return Ok(committed.object);
            }
            Err(WriteError::Retry) => continue,
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "too many concurrent writes; try again",
    ))
}

pub async fn delete_collection(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(q, "DeleteOptions")?;
    let filter = super::read::filter(rr, q)?;
    if dry {
        return Ok(json_response(StatusCode::OK, &success(200)));
    }
    let (_, items) = state.store.list(&rr.info.key(), &filter);
    for item in items {
        match delete_one(
            state,
            &rr.info,
            &rr.version,
            &item.namespace,
            &item.name,
            &DeleteOptions::default(),
            true,
        )
        .await
        {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(StatusCode::OK, &success(200)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;
    use serde_json::json;

    fn opts(policy: Option<&str>, orphan: Option<bool>) -> DeleteOptions {
        DeleteOptions {
            propagation_policy: policy.map(str::to_string),
            orphan_dependents: orphan,
            ..Default::default()
        }
    }

    #[test]
    fn propagation_options_as_kube_apiserver_checks_them() {
        assert_eq!(opts(None, None).propagation().unwrap(), None);
        assert_eq!(
            opts(Some("Foreground"), None).propagation().unwrap(),
            Some("Foreground")
        );
        assert_eq!(
            opts(None, Some(true)).propagation().unwrap(),
            Some("Orphan")
        );
        let e = opts(Some("Sideways"), None).propagation().unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("Unsupported value: \"Sideways\""),
            "{}",
            e.message
        );
        let both = opts(Some("Orphan"), Some(true)).propagation().unwrap_err();
        assert!(
            both.message.contains("cannot be both set"),
            "{}",
            both.message
        );
    }

    #[test]
    fn gc_finalizers_per_policy_and_the_job_default() {
        let reg = Registry::with_builtins();
        let rs = reg.get("apps", "replicasets").unwrap();
        let job = reg.get("batch", "jobs").unwrap();
        let cur = json!({"metadata": {"name": "a", "finalizers": ["example.com/x", "orphan"]}});
        assert_eq!(gc_finalizers(&rs, &cur, None), None, "kept as they are");
        assert_eq!(
            gc_finalizers(&rs, &cur, Some("Foreground")),
            Some(json!(["example.com/x", "foregroundDeletion"]))
        );
        assert_eq!(
            gc_finalizers(&rs, &cur, Some("Background")),
            Some(json!(["example.com/x"]))
        );
        let plain = json!({"metadata": {"name": "a"}});
        assert_eq!(
            gc_finalizers(&job, &plain, None),
            Some(json!(["orphan"])),
            "batch/v1 Jobs orphan their pods by default"
        );
        // Held by the finalizer: marked deleted, not removed.
        let held = deletion(&job, &plain, None, gc_finalizers(&job, &plain, None)).unwrap();
        assert!(held.pointer("/metadata/deletionTimestamp").is_some());
        assert_eq!(
            deletion(
                &rs,
                &plain,
                None,
                gc_finalizers(&rs, &plain, Some("Background"))
            ),
            None
        );
    }
}
