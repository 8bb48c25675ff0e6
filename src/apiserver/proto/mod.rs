//! `application/vnd.kubernetes.protobuf`: what client-go (kubectl's typed clients among
//! them) sends and asks for with built-in types. Objects stay JSON in the store; bodies are
//! transcoded at the edge through Kubernetes' own message descriptors.
//!
//! Wire format (apimachinery `runtime/serializer/protobuf`): the 4 bytes `k8s\0`, then a
//! `runtime.Unknown` whose `typeMeta` names the object and whose `raw` is the object's
//! message. A watch stream is a sequence of 4-byte big-endian lengths, each followed by a
//! `meta.v1.WatchEvent` (without the prefix) whose `object.raw` holds an enveloped object.

mod check;
mod mismatch;
pub mod pool;
mod special;
pub mod transcode;

use prost::Message;
use prost_reflect::{DynamicMessage, Value as Pv};
use serde_json::Value;

pub use check::TypeError;
pub use special::{format_duration, parse_duration};

pub const MEDIA: &str = "application/vnd.kubernetes.protobuf";
pub const WATCH_MEDIA: &str = "application/vnd.kubernetes.protobuf;stream=watch";
const MAGIC: &[u8; 4] = b"k8s\0";
const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";
const WATCH_EVENT: &str = "apimachinery.pkg.apis.meta.v1.WatchEvent";

/// Whether a Content-Type or Accept entry names protobuf.
pub fn is_protobuf(media: &str) -> bool {
    media.split(';').next().unwrap_or("").trim() == MEDIA
}

/// The message for an object: its own group's, else meta/v1's (Status, DeleteOptions and
/// the other option types are registered in every group version).
fn message_for(api_version: &str, kind: &str) -> Option<prost_reflect::MessageDescriptor> {
    let k = pool::kube();
    k.message(api_version, kind)
        .or_else(|| k.message("meta.k8s.io/v1", kind))
}

/// Whether objects of this apiVersion and kind have a protobuf form (built-in types).
pub fn supports(api_version: &str, kind: &str) -> bool {
    message_for(api_version, kind).is_some()
}

/// What the client asked for, in order of its Accept header: protobuf when it comes before
/// any JSON entry and the object has a message. `as=` forms (Table) are JSON-only here, as
/// in kube-apiserver.
pub fn wants(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    for entry in accept.split(',') {
        let entry = entry.trim();
        if is_protobuf(entry) {
            if !entry.contains("as=") {
                return true;
            }
            continue;
        }
        if !entry.is_empty() {
            return false;
        }
    }
    false
}

/// An Accept header that lists only protobuf: a JSON-only object cannot be served (406).
pub fn only_protobuf(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.split(',').all(|e| is_protobuf(e.trim())))
}

/// Type-checks a built-in object: `None` when its kind has no message (custom resources),
/// else the fields it has that its type lacks, or the first wrongly typed one.
pub fn check(api_version: &str, kind: &str, obj: &Value) -> Option<Result<Vec<String>, TypeError>> {
    let desc = pool::kube().message(api_version, kind)?;
    Some(check::check(obj, &desc))
}

/// Decodes an enveloped object into its JSON form, with apiVersion and kind set.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or("the protobuf body does not start with the k8s\\0 prefix")?;
    let k = pool::kube();
    let unknown = DynamicMessage::decode(k.named(UNKNOWN), body)
        .map_err(|e| format!("decoding the protobuf envelope: {e}"))?;
    // Read the envelope's fields directly: turning it into JSON would base64 the object.
    let text = |m: &DynamicMessage, f: &str| match m.get_field_by_name(f).as_deref() {
        Some(Pv::String(s)) => s.clone(),
        _ => String::new(),
    };
    let (api_version, kind) = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Pv::Message(tm)) => (text(tm, "apiVersion"), text(tm, "kind")),
        _ => (String::new(), String::new()),
    };
    let (api_version, kind) = (api_version.as_str(), kind.as_str());
    let enc = text(&unknown, "contentEncoding");
    if !enc.is_empty() {
        return Err(format!("unsupported protobuf content encoding {enc:?}"));
    }
    let desc = message_for(api_version, kind)
        .ok_or_else(|| format!("no protobuf message for {api_version}, Kind={kind}"))?;
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Pv::Bytes(b)) => b.clone(),
        _ => Default::default(),
    };
    let msg = DynamicMessage::decode(desc, raw)
        .map_err(|e| format!("decoding {api_version}, Kind={kind}: {e}"))?;
    let mut obj = transcode::to_json(&msg);
    if let Value::Object(m) = &mut obj {
        m.insert("apiVersion".into(), api_version.into());
        m.insert("kind".into(), kind.into());
    }
    Ok(obj)
}

/// Encodes an object (which names its apiVersion and kind) in the envelope.
pub fn encode(obj: &Value) -> Result<Vec<u8>, String> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let desc = message_for(api_version, kind)
        .ok_or_else(|| format!("no protobuf message for {api_version}, Kind={kind}"))?;
    let msg = transcode::to_message(obj, &desc, kind).map_err(|e| e.to_string())?;
    Ok(envelope(api_version, kind, msg.encode_to_vec()))
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let k = pool::kube();
    let desc = k.named(UNKNOWN);
    let mut unknown = DynamicMessage::new(desc.clone());
    let type_meta = match desc.get_field_by_name("typeMeta").map(|f| f.kind()) {
        Some(prost_reflect::Kind::Message(tm)) => {
            let mut m = DynamicMessage::new(tm);
            m.set_field_by_name("apiVersion", Pv::String(api_version.into()));
            m.set_field_by_name("kind", Pv::String(kind.into()));
            m
        }
        _ => unreachable!("runtime.Unknown.typeMeta is a message"),
    };
    unknown.set_field_by_name("typeMeta", Pv::Message(type_meta));
    unknown.set_field_by_name("raw", Pv::Bytes(raw.into()));
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// One frame of a protobuf watch stream: length, then the WatchEvent.
pub fn watch_frame(event_type: &str, obj: &Value) -> Result<Vec<u8>, String> {
    let object = encode(obj)?;
    let k = pool::kube();
    let desc = k.named(WATCH_EVENT);
    let mut ev = DynamicMessage::new(desc.clone());
    ev.set_field_by_name("type", Pv::String(event_type.into()));
    let raw_ext = match desc.get_field_by_name("object").map(|f| f.kind()) {
        Some(prost_reflect::Kind::Message(re)) => {
            let mut m = DynamicMessage::new(re);
            m.set_field_by_name("raw", Pv::Bytes(object.into()));
            m
        }
        _ => unreachable!("WatchEvent.object is a message"),
    };
    ev.set_field_by_name("object", Pv::Message(raw_ext));
    let body = ev.encode_to_vec();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    Ok(out)
}

#[cfg(test)]
mod tests;
