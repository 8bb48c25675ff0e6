//! Create and update (PUT) with kube-apiserver's optimistic concurrency, and the write
//! primitives PATCH, apply and DELETE share:
//! compute the new object from the revision read, admit it, and commit only if nothing
//! changed in between (retrying otherwise, unless the client pinned a resourceVersion).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::{MAX_BODY, Query, ResourceRequest, ServerState, dry_run, object_response};
use crate::apiserver::admission::Attributes;
use crate::apiserver::error::ApiError;
use crate::apiserver::fieldmanager::{self, Manager};
use crate::apiserver::limits;
use crate::apiserver::registry::ResourceInfo;
use crate::apiserver::semantics;
use crate::apiserver::store::{Change, Committed, Filter, StoreError};
use crate::apiserver::validate::{self, FieldValidation};

use crate::kernel::http::{Body, json as json_response, read_body};

pub(super) const MAX_ATTEMPTS: usize = 16;

/// A commit that lost a race; the caller recomputes and tries again.
pub(crate) enum WriteError {
    Api(ApiError),
    Retry,
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Api(e.into())
    }
}

impl From<ApiError> for WriteError {
    fn from(e: ApiError) -> Self {
        WriteError::Api(e)
    }
}

pub(super) fn content_type(req: &Request<Incoming>) -> String {
    req.headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

pub(crate) async fn body_bytes(req: Request<Incoming>) -> Result<(String, bytes::Bytes), ApiError> {
    let ct = content_type(&req);
    let bytes = read_body(req.into_body(), MAX_BODY).await?;
    Ok((ct, bytes))
}

/// Decodes a JSON, YAML or protobuf body into an object within the nesting limit. YAML is
/// parsed on a blocking thread: a hostile document must not stall the async workers.
pub(crate) async fn parse_object(ct: &str, bytes: bytes::Bytes) -> Result<Value, ApiError> {
    let media = ct.split(';').next().unwrap_or("").trim();
    let v: Value = match media {
        "" | "application/json" | "*/*" => serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?,
        "application/yaml" | "text/yaml" => {
            limits::prescan_yaml(&bytes)?;
            tokio::task::spawn_blocking(move || serde_yaml::from_slice::<Value>(&bytes))
                .await
                .map_err(|e| ApiError::internal(format!("decoding YAML: {e}")))?
                .map_err(|e| ApiError::bad_request(format!("invalid YAML body: {e}")))?
        }
        crate::apiserver::proto::MEDIA => crate::apiserver::proto::decode(&bytes)
            .map_err(|e| ApiError::bad_request(format!("invalid protobuf body: {e}")))?,
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({media}) - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            )));
        }
    };
    limits::check_body(&v)?;
    Ok(v)
}

/// An options body (DeleteOptions, Binding, Eviction): empty means none.
pub(crate) async fn parse_options(
    ct: &str,
    bytes: bytes::Bytes,
) -> Result<Option<Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    parse_object(ct, bytes).await.map(Some)
}

/// The body's kind and apiVersion must name this resource; absent ones are filled in.
fn check_type(rr: &ResourceRequest, obj: &mut Value) -> Result<(), ApiError> {
    let want_av = rr.api_version();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(&rr.info.kind)
        .to_string();
    let av = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(&want_av)
        .to_string();
    if kind != rr.info.kind || av != want_av {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) and kind ({kind}) do not match the request ({want_av}, {})",
            rr.info.kind
        )));
    }
    obj["kind"] = kind.into();
    obj["apiVersion"] = av.into();
    Ok(())
}

pub(super) fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn attrs<'a>(
    rr: &'a ResourceRequest,
    op: &'static str,
    name: &'a str,
    old: Option<&'a Value>,
) -> Attributes<'a> {
    Attributes {
        info: &rr.info,
        version: &rr.version,
        subresource: rr.subresource.as_deref(),
        operation: op,
        name,
        namespace: rr.ns(),
        old,
    }
}

/// The writer of a request: `fieldManager` (at most 128 characters), else the User-Agent.
pub(super) fn manager(
    rr: &ResourceRequest,
    req: &Request<Incoming>,
    q: &Query,
) -> Result<Manager, ApiError> {
    let name = match q.get("fieldManager") {
        Some(f) if f.len() > 128 => {
            return Err(ApiError::invalid_option(
                "PatchOptions",
                format!(
                    "fieldManager: Too long: may not be more than 128 bytes (got {})",
                    f.len()
                ),
            ));
        }
        Some(f) => f.to_string(),
        None => fieldmanager::from_user_agent(
            req.headers()
                .get(hyper::header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
        ),
    };
    Ok(Manager {
        name,
        subresource: rr.subresource.clone().filter(|s| s == "status"),
        api_version: rr.api_version(),
    })
}

fn generated_suffix() -> String {
    uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(5)
        .collect()
}

pub async fn create(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(q, "CreateOptions")?;
    let m = manager(rr, &req, q)?;
    let fv = FieldValidation::parse(q.get("fieldValidation"))?;
    let (ct, bytes) = body_bytes(req).await?;
    let mut obj = parse_object(&ct, bytes).await?;
    let warnings = validate::builtin(&rr.info, &rr.version, &mut obj, fv)?;
    let has_status = rr.info.has_status();
    let resp = create_object(state, rr, obj, dry, |o| {
        fieldmanager::record_update(None, o, &m, has_status)
    })
    .await?;
    Ok(validate::with_warnings(resp, &warnings))
}

/// Creates `obj`; `finish` records its managed fields once the server's own fields are set.
pub(super) async fn create_object(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    mut obj: Value,
    dry: bool,
    finish: impl FnOnce(&mut Value),
) -> Result<Response<Body>, ApiError> {
    check_type(rr, &mut obj)?;
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let meta = &mut obj["metadata"];
    if !rr.info.builtin
        && crate::apiserver::crd_lifecycle::terminating(
            &state.store,
            &rr.info.group,
            &rr.info.resource,
        )
    {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "create not allowed while custom resource definition is terminating",
        )
        .with_details(&rr.info, ""));
    }
    if rr.info.namespaced {
        let ns = rr.ns().to_string();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(given) if !given.is_empty() && given != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => meta["namespace"] = ns.clone().into(),
        }
        let ns_key = (String::new(), "namespaces".to_string());
        if state.store.latest(&ns_key, "", &ns).is_none() {
            let info = state
                .registry
                .get("", "namespaces")
                .ok_or_else(ApiError::route_not_found)?;
            return Err(ApiError::not_found(&info, &ns));
        }
        if crate::apiserver::semantics::namespace_terminating(&state.store, &ns) {
            let what = format!("{} {:?}", rr.info.qualified(), name_of(&obj));
            return Err(ApiError::forbidden(format!(
                "{what} is forbidden: unable to create new content in namespace {ns} because it is being terminated"
            ))
            .with_details(&rr.info, &name_of(&obj)));
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    if name_of(&obj).is_empty()
        && let Some(prefix) = obj
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .map(str::to_string)
    {
        obj["metadata"]["name"] = format!("{prefix}{}", generated_suffix()).into();
    }
    let name = name_of(&obj);
    if name.is_empty() {
        return Err(ApiError::invalid(
            &rr.info,
            "",
            "metadata.name: Required value: name or generateName is required",
        ));
    }
    limits::check_name(&rr.info, &name)?;
    semantics::prepare_create(&rr.info, &mut obj, &state.store)?;
    let a = attrs(rr, "CREATE", &name, None);
    state.admission.mutate(&a, &mut obj).await?;
    semantics::after_mutation(&rr.info, &mut obj);
    validate::schema(&rr.info, &rr.version, &name, &mut obj, None)?;
    finish(&mut obj);
    check_computed(&rr.info, &name, &obj, None)?;
    escalation(state, rr, &obj)?;
    state.admission.validate(&a, Some(&obj)).await?;
    if dry {
        return Ok(json_response(StatusCode::CREATED, &obj));
    }
    let committed = state
        .store
        .commit(&rr.info.key(), rr.ns(), &name, |cur| match cur {
            Some(_) => Err(ApiError::already_exists(&rr.info, &name)),
            None => Ok(Change::Put(obj)),
        })?;
    after_write(state, &rr.info, &committed, false);
    Ok(object_response(
        StatusCode::CREATED,
        &committed.object,
        &rr.api_version(),
    ))
}

/// What every write must hold before it is admitted and stored.
fn check_computed(
    info: &ResourceInfo,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    limits::check_result(info, name, obj)?;
    limits::check_string_maps(info, obj)?;
    crate::apiserver::objectmeta::check(info, name, obj)?;
    limits::check_object_quantities(info, name, obj)?;
    if info.builtin {
        let causes = crate::apiserver::kinds::causes(&info.group, &info.resource, obj, old);
        crate::apiserver::error::check_causes(info, name, causes)?;
    }
    Ok(())
}

pub async fn update(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(q, "UpdateOptions")?;
    let m = manager(rr, &req, q)?;
    let fv = FieldValidation::parse(q.get("fieldValidation"))?;
    let (ct, bytes) = body_bytes(req).await?;
    let mut body = parse_object(&ct, bytes).await?;
    check_type(rr, &mut body)?;
    let warnings = validate::builtin(&rr.info, &rr.version, &mut body, fv)?;
    let url_name = rr.name.clone().unwrap_or_default();
    match name_of(&body) {
        n if n.is_empty() => body["metadata"]["name"] = url_name.clone().into(),
        n if n != url_name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({url_name})"
            )));
        }
        _ => {}
    }
    let pinned = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}")))
        })
        .transpose()?;
    let has_status = rr.info.has_status();
    let finish =
        |old: &Value, new: &mut Value| fieldmanager::record_update(Some(old), new, &m, has_status);
    let resp = guaranteed_update(state, rr, pinned, dry, |_| Ok(body.clone()), finish).await?;
    Ok(validate::with_warnings(resp, &warnings))
}

fn without_rv(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    c
}

/// Read, compute, record managed fields (`finish`), admit, commit-if-unchanged; retried
/// on races.
pub(super) async fn guaranteed_update(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    pinned: Option<u64>,
    dry: bool,
    compute: impl Fn(&Value) -> Result<Value, ApiError>,
    finish: impl Fn(&Value, &mut Value),
) -> Result<Response<Body>, ApiError> {
    let name = rr.name.clone().unwrap_or_default();
    let key = rr.info.key();
    for _ in 0..MAX_ATTEMPTS {
        let cur = state
            .store
            .latest(&key, rr.ns(), &name)
            .ok_or_else(|| ApiError::not_found(&rr.info, &name))?;
        if pinned.is_some_and(|p| p != cur.rev) {
            return Err(ApiError::stale(&rr.info, &name));
        }
        let old = cur.value();
        let mut new = compute(&old)?;
        limits::check_result(&rr.info, &name, &new)?;
        new["apiVersion"] = old.get("apiVersion").cloned().unwrap_or_default();
        new["kind"] = rr.info.kind.clone().into();
        semantics::prepare_update(&rr.info, &old, &mut new, rr.subresource.as_deref())?;
        finish(&old, &mut new);
        check_computed(&rr.info, &name, &new, Some(&old))?;
        if without_rv(&new) == without_rv(&old) {
            return Ok(super::object_response(
                StatusCode::OK,
                &cur,
                &rr.api_version(),
            ));
        }
        let a = attrs(rr, "UPDATE", &name, Some(&old));
        state.admission.mutate(&a, &mut new).await?;
        validate::schema(&rr.info, &rr.version, &name, &mut new, Some(&old))?;
        check_computed(&rr.info, &name, &new, Some(&old))?;
        escalation(state, rr, &new)?;
        state.admission.validate(&a, Some(&new)).await?;
        if dry {
            return Ok(json_response(StatusCode::OK, &new));
        }
        let finalize = releasable(&rr.info, &new);
        let observed = cur.rev;
        let result = state.store.commit(&key, rr.ns(), &name, |c| match c {
            None => Err(WriteError::Api(ApiError::not_found(&rr.info, &name))),
            Some(c) if c.rev != observed => Err(WriteError::Retry),
            Some(_) if finalize => Ok(Change::Delete),
            Some(_) => Ok(Change::Put(new)),
        });
        match result {
            Ok(committed) => {
                after_write(state, &rr.info, &committed, finalize);
                return Ok(object_response(
                    StatusCode::OK,
                    &committed.object,
                    &rr.api_version(),
                ));
            }
            Err(WriteError::Retry) if pinned.is_none() => continue,
            Err(WriteError::Retry) => return Err(ApiError::stale(&rr.info, &name)),
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::conflict(
        &rr.info,
        &name,
        "too many concurrent writes; try again",
    ))
}

/// Side effects of a committed write: serving CRDs, cascading namespace deletion.
/// A deleted object nothing holds any more: no finalizer in its metadata (nor, for a
/// namespace, in its spec).
fn releasable(info: &ResourceInfo, v: &Value) -> bool {
    let empty = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty())
    };
    let namespace = info.group.is_empty() && info.resource == "namespaces";
    v.pointer("/metadata/deletionTimestamp").is_some()
        && empty("/metadata/finalizers")
        && (!namespace || empty("/spec/finalizers"))
}

pub(crate) fn after_write(
    state: &Arc<ServerState>,
    info: &ResourceInfo,
    committed: &Committed,
    removed: bool,
) {
    let rbac = info.group == "rbac.authorization.k8s.io";
    if rbac || (info.group.is_empty() && info.resource == "namespaces" && removed) {
        state.authz.invalidate(committed.object.rev);
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let crd = committed.object.value();
            if removed {
                let group = crd
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let plural = crd
                    .pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                purge(state, &(group.to_string(), plural.to_string()), None);
                state.registry.remove_crd(group, plural);
            } else if let Err(e) = state.registry.apply_crd(&crd) {
                tracing::warn!(error = %e, "stored CRD could not be served");
            }
        }
        ("", "namespaces") if removed => {
            for info in state.registry.all().into_iter().filter(|i| i.namespaced) {
                purge(state, &info.key(), Some(&committed.object.name));
            }
        }
        _ => {}
    }
}

/// `after_write` for a controller's own commit to `key`; whether the object was removed.
pub(crate) fn after_controller_write(
    state: &Arc<ServerState>,
    key: &(String, String),
    committed: &Committed,
) -> bool {
    let removed = committed.removed();
    if let Some(info) = state.registry.get(&key.0, &key.1) {
        after_write(state, &info, committed, removed);
    }
    removed
}

/// Removes every object of a resource (in one namespace, or all).
fn purge(state: &ServerState, key: &(String, String), ns: Option<&str>) {
    let filter = Filter {
        namespace: ns.map(str::to_string),
        ..Default::default()
    };
    let (_, items) = state.store.list(key, &filter);
    for item in items {
        let r = state
            .store
            .commit(key, &item.namespace, &item.name, |c| match c {
                Some(_) => Ok(Change::Delete),
                None => Err(WriteError::Retry),
            });
        if let Err(WriteError::Api(e)) = r {
            tracing::warn!(error = %e.message, name = %item.name, "purging failed");
        }
    }
}

/// RBAC's escalation check on a write of a role or binding.
fn escalation(state: &ServerState, rr: &ResourceRequest, obj: &Value) -> Result<(), ApiError> {
    if rr.info.group != "rbac.authorization.k8s.io" {
        return Ok(());
    }
    let idx = state.authz.index(&state.store);
    crate::apiserver::auth::escalation::check(
        &state.store,
        &idx,
        &rr.user,
        &rr.info.resource,
        rr.ns(),
        obj,
    )
    .map_err(|why| {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        ApiError::forbidden(format!(
            "{} {name:?} is forbidden: {why}",
            rr.info.qualified()
        ))
        .with_details(&rr.info, name)
    })
}
