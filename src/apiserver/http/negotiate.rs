//! Content negotiation for responses: handlers answer in JSON, and a client that puts
//! protobuf first in its Accept header gets the same object transcoded, when the object is a
//! built-in type. Custom resources stay JSON, as kube-apiserver serves them (406 when the
//! client accepts nothing else).

use std::convert::Infallible;

use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::apiserver::error::ApiError;
use crate::apiserver::proto;
use crate::kernel::http::{Body, respond};

/// The Accept header of a request, if any.
pub fn accept_of<B>(req: &hyper::Request<B>) -> Option<String> {
    req.headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Re-encodes a complete JSON response as protobuf when the client prefers it.
pub async fn negotiate(resp: Response<Body>, accept: Option<&str>) -> Response<Body> {
    if !proto::wants(accept) || !is_json(&resp) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match collect_up_to(body, MAX_TRANSCODED).await {
        Ok(b) => b,
        Err(whole) => {
            // Too big to transcode in memory: the JSON as it streams, which clients that
            // prefer protobuf accept too (client-go asks for both).
            if proto::only_protobuf(accept) {
                let why = format!(
                    "a protobuf response of more than {} MiB of JSON is not served; accept application/json",
                    MAX_TRANSCODED >> 20
                );
                return ApiError::new(406, "NotAcceptable", why).into_response();
            }
            return Response::from_parts(parts, whole);
        }
    };
    let json_again = |bytes: bytes::Bytes| {
        let mut r = Response::from_parts(parts.clone(), crate::kernel::http::full(bytes));
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        r
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return json_again(bytes);
    };
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !proto::supports(api_version, kind) {
        if proto::only_protobuf(accept) && parts.status.is_success() {
            return ApiError::not_acceptable(proto::MEDIA).into_response();
        }
        return json_again(bytes);
    }
    match proto::encode(&value) {
        Ok(encoded) => {
            let mut r = respond(parts.status, proto::MEDIA, encoded);
            for (k, v) in &parts.headers {
                if k != hyper::header::CONTENT_TYPE && k != hyper::header::CONTENT_LENGTH {
                    r.headers_mut().insert(k, v.clone());
                }
            }
            r
        }
        Err(e) => {
            tracing::warn!(kind, error = %e, "object does not fit its protobuf message");
            ApiError::internal(format!("encoding {kind} as protobuf: {e}")).into_response()
        }
    }
}

/// The most JSON a response is held in memory for, to be transcoded to protobuf: a
/// transcode holds the JSON, its parsed tree and the encoding at once.
pub const MAX_TRANSCODED: usize = 16 << 20;

/// The whole body when it is at most `max` bytes; else a body that replays what was read
/// and streams the rest.
async fn collect_up_to(mut body: Body, max: usize) -> Result<bytes::Bytes, Body> {
    let mut chunks: Vec<bytes::Bytes> = Vec::new();
    let mut total = 0;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.unwrap_or_else(|never| match never {}).into_data() else {
            continue;
        };
        total += data.len();
        chunks.push(data);
        if total > max {
            let rest = body.into_data_stream();
            let all = futures::stream::iter(chunks.into_iter().map(Ok)).chain(rest);
            let frames = all.map(|b: Result<bytes::Bytes, Infallible>| b.map(Frame::data));
            return Err(StreamBody::new(frames).boxed_unsync());
        }
    }
    let mut all = bytes::BytesMut::with_capacity(total);
    for c in chunks {
        all.extend_from_slice(&c);
    }
    Ok(all.freeze())
}

fn is_json(resp: &Response<Body>) -> bool {
    resp.status() != StatusCode::SWITCHING_PROTOCOLS
        && resp.extensions().get::<super::read::Streaming>().is_none()
        && resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.split(';').next() == Some("application/json"))
}
