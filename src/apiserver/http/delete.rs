//! DELETE of one object (finalizers, graceful pod deletion, preconditions, dry run) and of
//! a collection.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::status::{ApiError, success};
use super::write::{MAX_ATTEMPTS, WriteError, after_write, body_bytes};
use super::{Query, ResourceRequest, ServerState, dry_run, object_response};
use crate::apiserver::admission::Attributes;
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

/// What deleting `cur` means right now.
fn deletion(info: &ResourceInfo, cur: &Value, grace: Option<i64>) -> Option<Value> {
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
        let next = deletion(info, &old, opts.grace_period_seconds);
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
