//! GET, list (with `limit`/`continue` pages served from one snapshot) and watch.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::{Query, ResourceRequest, ServerState, object_response, render};
use crate::apiserver::error::ApiError;
use crate::apiserver::store::{Filter, Stored, WatchItem};
use crate::apiserver::table;
use crate::kernel::http::Body;

/// Watches without `timeoutSeconds` end after this long (kube-apiserver picks 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

pub fn get(
    state: &ServerState,
    rr: &ResourceRequest,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let name = rr.name.as_deref().unwrap_or("");
    let obj = state
        .store
        .get(&rr.info.key(), rr.ns(), name)
        .ok_or_else(|| ApiError::not_found(&rr.info, name))?;
    if table::wants_table(accept) {
        return Ok(table_response(rr, std::slice::from_ref(&obj), obj.rev));
    }
    Ok(object_response(StatusCode::OK, &obj, &rr.api_version()))
}

fn table_response(rr: &ResourceRequest, items: &[Arc<Stored>], rev: u64) -> Response<Body> {
    let cols = rr
        .info
        .printer_columns
        .get(&rr.version)
        .cloned()
        .unwrap_or_default();
    let t = table::table(&rr.info, &rr.version, &cols, items, rev);
    crate::kernel::http::json(StatusCode::OK, &t)
}

pub fn filter(rr: &ResourceRequest, q: &Query) -> Result<Filter, ApiError> {
    Filter::parse(
        rr.namespace.clone(),
        q.get("labelSelector"),
        q.get("fieldSelector"),
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))
}

fn encode_continue(id: u64, offset: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{id}:{offset}"))
}

fn decode_continue(token: &str) -> Option<(u64, usize)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (id, off) = s.split_once(':')?;
    Some((id.parse().ok()?, off.parse().ok()?))
}

/// `resourceVersionMatch`, checked as kube's ListOptions validation does; the revision
/// a list must be served at exactly (`Exact`), if any.
fn exact_rv(q: &Query) -> Result<Option<u64>, ApiError> {
    let Some(m) = q.get("resourceVersionMatch").filter(|m| !m.is_empty()) else {
        return Ok(None);
    };
    let invalid = |why: String| ApiError::invalid_option("ListOptions", why);
    let rv = q.get("resourceVersion").unwrap_or("");
    if rv.is_empty() {
        return Err(invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into()));
    }
    if q.get("continue").is_some_and(|c| !c.is_empty()) {
        return Err(invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".into()));
    }
    match m {
        "NotOlderThan" => Ok(None),
        "Exact" if rv == "0" => Err(invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
        )),
        // read_rv already refused a malformed or future revision.
        "Exact" => Ok(rv.parse().ok()),
        other => Err(invalid(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
        ))),
    }
}

pub fn list(
    state: &ServerState,
    rr: &ResourceRequest,
    q: &Query,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let limit = q.u64("limit").filter(|l| *l > 0).map(|l| l as usize);
    let (id, rev, items, offset) = match q.get("continue") {
        Some(token) => {
            let (id, offset) = decode_continue(token)
                .ok_or_else(|| ApiError::bad_request("invalid continue token"))?;
            let (rev, items) = state.continues.get(id).ok_or_else(|| {
                ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter.",
                )
            })?;
            (Some(id), rev, items, offset)
        }
        None => match exact_rv(q)? {
            Some(at) => {
                let items = state
                    .store
                    .list_at(&rr.info.key(), &filter(rr, q)?, at)
                    .map_err(|_| {
                        ApiError::gone("The resourceVersion for the provided list is too old.")
                    })?;
                (None, at, Arc::new(items), 0)
            }
            None => {
                let (rev, items) = state.store.list(&rr.info.key(), &filter(rr, q)?);
                (None, rev, Arc::new(items), 0)
            }
        },
    };
    let offset = offset.min(items.len());
    let end = limit.map_or(items.len(), |l| (offset + l).min(items.len()));
    let mut metadata = json!({"resourceVersion": rev.to_string()});
    if end < items.len() {
        let id = id.unwrap_or_else(|| state.continues.put(rev, items.clone()));
        metadata["continue"] = encode_continue(id, end).into();
        metadata["remainingItemCount"] = (items.len() - end).into();
    }
    if table::wants_table(accept) {
        let cols = rr
            .info
            .printer_columns
            .get(&rr.version)
            .cloned()
            .unwrap_or_default();
        let mut t = table::table(&rr.info, &rr.version, &cols, &items[offset..end], rev);
        // Tables carry the continue token too, for kubectl's chunked listing.
        t["metadata"] = metadata;
        return Ok(crate::kernel::http::json(StatusCode::OK, &t));
    }
    let api_version = rr.api_version();
    let head = json!({"apiVersion": api_version, "kind": format!("{}List", rr.info.kind), "metadata": metadata});
    let mut resp = Response::new(list_body(&head, items, offset..end, api_version));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// What a list body is sent in: a slow client holds one chunk, not a copy of the list.
const LIST_CHUNK: usize = 64 << 10;

/// `{"apiVersion":..,"kind":..,"metadata":..,"items":[..]}` without re-parsing the items,
/// rendered chunk by chunk as the client takes them.
fn list_body(
    head: &Value,
    items: Arc<Vec<Arc<Stored>>>,
    range: std::ops::Range<usize>,
    api_version: String,
) -> Body {
    let head = serde_json::to_vec(head).unwrap_or_default();
    let mut out = BytesMut::with_capacity(LIST_CHUNK + 4096);
    out.put_slice(&head[..head.len().saturating_sub(1)]);
    out.put_slice(b",\"items\":[");
    let stream = async_stream::stream! {
        for i in range.clone() {
            if i > range.start {
                out.put_u8(b',');
            }
            out.put_slice(&render(&items[i], &api_version));
            if out.len() >= LIST_CHUNK {
                yield out.split().freeze();
            }
        }
        out.put_slice(b"]}");
        yield out.split().freeze();
    };
    StreamBody::new(stream.map(|b| Ok::<_, Infallible>(Frame::data(b)))).boxed_unsync()
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// How a watch writes its events: JSON lines, or protobuf frames for clients that prefer
/// them on built-in types.
#[derive(Clone, Copy, PartialEq)]
enum WatchCodec {
    Json,
    Proto,
}

impl WatchCodec {
    fn pick(accept: Option<&str>, api_version: &str, kind: &str) -> Self {
        if crate::apiserver::proto::wants(accept)
            && crate::apiserver::proto::supports(api_version, kind)
        {
            WatchCodec::Proto
        } else {
            WatchCodec::Json
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            WatchCodec::Json => "application/json",
            WatchCodec::Proto => crate::apiserver::proto::WATCH_MEDIA,
        }
    }

    fn event(self, kind: &str, object: &[u8]) -> Bytes {
        match self {
            WatchCodec::Json => event_line(kind, object),
            WatchCodec::Proto => {
                let frame = serde_json::from_slice::<Value>(object)
                    .map_err(|e| e.to_string())
                    .and_then(|v| crate::apiserver::proto::watch_frame(kind, &v));
                match frame {
                    Ok(f) => Bytes::from(f),
                    Err(e) => {
                        tracing::warn!(error = %e, "watch event does not fit its protobuf message");
                        Bytes::new()
                    }
                }
            }
        }
    }

    fn bookmark(self, kind: &str, api_version: &str, rev: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rev.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
        self.event("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
    }
}

/// A response whose body is `stream`, chunk by chunk, as it comes.
pub fn streaming_as(
    content_type: &'static str,
    stream: impl futures::Stream<Item = Bytes> + Send + 'static,
) -> Response<Body> {
    let body = StreamBody::new(stream.map(|b| Ok::<_, Infallible>(Frame::data(b)))).boxed_unsync();
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    // Content negotiation must not wait for the end of a stream.
    resp.extensions_mut().insert(Streaming);
    resp
}

/// Marks a response whose body is a stream.
#[derive(Clone, Copy)]
pub struct Streaming;

pub async fn watch(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    q: &Query,
    accept: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let filter = filter(rr, q)?;
    let initial = q.flag("sendInitialEvents");
    let from = super::read_rv(&state.store, q).await?.filter(|_| !initial);
    let bookmarks = q.flag("allowWatchBookmarks");
    let timeout = q
        .u64("timeoutSeconds")
        .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
    let key = rr.info.key();
    let api_version = rr.api_version();
    let kind = rr.info.kind.clone();
    let codec = WatchCodec::pick(accept, &api_version, &kind);
    let start = match state.store.watch(&key, from, filter, initial) {
        Ok(s) => s,
        Err(e) => {
            let status = ApiError::gone(format!(
                "too old resource version: {} ({})",
                e.requested, e.oldest
            ))
            .status_object();
            let line = codec.event("ERROR", &serde_json::to_vec(&status).unwrap_or_default());
            return Ok(streaming_as(
                codec.content_type(),
                futures::stream::once(async move { line }),
            ));
        }
    };
    let state = state.clone();
    let interval = state.bookmark_interval;
    let stream = async_stream::stream! {
        let mut rx = start.rx;
        for (k, obj) in start.initial {
            yield codec.event(k.as_str(), &render(&obj, &api_version));
        }
        if initial {
            yield codec.bookmark(&kind, &api_version, start.rev, true);
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        let mut closing = false;
        loop {
            tokio::select! {
                item = rx.recv() => match item {
                    Some(WatchItem::Event(k, obj)) => yield codec.event(k.as_str(), &render(&obj, &api_version)),
                    Some(WatchItem::Bookmark(rev)) => {
                        if bookmarks {
                            yield codec.bookmark(&kind, &api_version, rev, false);
                        }
                        if closing {
                            break;
                        }
                    }
                    None => break,
                },
                _ = tick.tick(), if bookmarks && !closing => {
                    if !state.store.bookmark(&key, start.id) {
                        break;
                    }
                }
                _ = &mut deadline, if !closing => {
                    // A last bookmark so the client resumes from the newest revision.
                    closing = true;
                    if !bookmarks || !state.store.bookmark(&key, start.id) {
                        break;
                    }
                }
            }
        }
    };
    Ok(streaming_as(codec.content_type(), stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        assert_eq!(decode_continue(&encode_continue(7, 500)), Some((7, 500)));
        assert_eq!(decode_continue("!!"), None);
    }

    #[test]
    fn continue_snapshots_hold_at_most_their_byte_budget_but_the_newest_stays() {
        let obj = |kib: usize| {
            let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a"}, "data": {"v": "x".repeat(kib << 10)}});
            Arc::new(vec![Arc::new(Stored::new(1, &v))])
        };
        let cache = super::super::ContinueCache::with_budget(100 << 10);
        let first = cache.put(1, obj(40));
        let second = cache.put(2, obj(40));
        assert!(cache.get(first).is_some() && cache.get(second).is_some());
        let third = cache.put(3, obj(40));
        assert!(cache.get(first).is_none(), "the oldest gave way");
        assert!(cache.get(second).is_some() && cache.get(third).is_some());
        assert!(cache.held_bytes() <= 100 << 10);
        let huge = cache.put(4, obj(300));
        assert!(
            cache.get(huge).is_some(),
            "a list bigger than the budget still pages"
        );
        assert!(cache.get(third).is_none());
    }

    #[test]
    fn list_body_is_valid_json() {
        let a = Arc::new(Stored::new(
            1,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"x": "y".repeat(40_000)}}}),
        ));
        let whole = |head: Value, items: Vec<Arc<Stored>>| {
            let n = items.len();
            let body = list_body(&head, Arc::new(items), 0..n, "v1".into());
            let bytes = futures::executor::block_on(body.collect())
                .unwrap()
                .to_bytes();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        };
        let head = json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}});
        let v = whole(head, vec![a.clone(), a.clone(), a]);
        assert_eq!(v["items"].as_array().unwrap().len(), 3, "across chunks");
        assert_eq!(whole(json!({"kind": "X"}), vec![])["items"], json!([]));
    }
}
