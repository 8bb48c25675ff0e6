//! `pods/log` for pods of the embedded node runtime, read from the files it writes
//! (`<dataDir>/noderuntime/logs/<ns>_<name>_<uid>/<container>/<attempt>.log`): `container`,
//! `previous`, `tailLines`, `limitBytes` and `follow`. The runtime keeps no timestamps, so
//! `timestamps` and `sinceSeconds` are accepted and have no effect.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::http::status::ApiError;
use super::http::{Query, ResourceRequest, ServerState};
use crate::kernel::http::{Body, respond};

/// Attempts of one container, oldest first.
fn attempts(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let n = p.file_stem()?.to_str()?.parse().ok()?;
            (p.extension()? == "log").then_some((n, p))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

fn container_names(pod: &Value) -> Vec<String> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| {
            pod.pointer(&format!("/spec/{k}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("name")?.as_str().map(str::to_string))
        .collect()
}

/// The last `n` lines of `text`.
fn tail(text: &[u8], n: usize) -> &[u8] {
    let mut seen = 0;
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &text[i + 1..];
            }
        }
    }
    text
}

pub async fn serve(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let name = rr.name.clone().unwrap_or_default();
    let pod = state
        .store
        .get(&rr.info.key(), rr.ns(), &name)
        .ok_or_else(|| ApiError::not_found(&rr.info, &name))?;
    let value = pod.value();
    let names = container_names(&value);
    let container = match q.get("container") {
        Some(c) if names.iter().any(|n| n == c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let Some(root) = &state.pod_logs else {
        return Err(ApiError::bad_request(
            "pod logs are served only for pods of the embedded node runtime",
        ));
    };
    let dir = root
        .join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid))
        .join(&container);
    let mut all = attempts(&dir);
    if q.flag("previous") {
        all.pop();
    }
    let Some(file) = all.pop() else {
        let what = if q.flag("previous") {
            "previous terminated container"
        } else {
            "container"
        };
        return Err(ApiError::bad_request(format!(
            "{what} \"{container}\" in pod \"{name}\" is waiting to start or has no log"
        )));
    };
    let text = std::fs::read(&file).unwrap_or_default();
    let mut start = match q.u64("tailLines") {
        Some(n) => text.len() - tail(&text, n as usize).len(),
        None => 0,
    };
    if let Some(limit) = q.u64("limitBytes") {
        start = start.max(text.len().saturating_sub(limit as usize));
    }
    let first = Bytes::copy_from_slice(&text[start..]);
    if !q.flag("follow") {
        return Ok(respond(StatusCode::OK, "text/plain", first));
    }
    Ok(follow(
        state.clone(),
        rr.info.key(),
        pod.namespace.clone(),
        pod.name.clone(),
        file,
        first,
        text.len(),
    ))
}

/// Streams what is already there, then what the container appends, until the pod is gone.
fn follow(
    state: Arc<ServerState>,
    key: (String, String),
    ns: String,
    name: String,
    file: PathBuf,
    first: Bytes,
    mut offset: usize,
) -> Response<Body> {
    let stream = async_stream::stream! {
        yield first;
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let text = std::fs::read(&file).unwrap_or_default();
            if text.len() > offset {
                yield Bytes::copy_from_slice(&text[offset..]);
                offset = text.len();
            }
            if state.store.get(&key, &ns, &name).is_none() {
                break;
            }
        }
    };
    super::http::read::streaming_as("text/plain", stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_lines() {
        assert_eq!(tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", 1), b"c");
        assert_eq!(tail(b"a\n", 5), b"a\n");
        assert_eq!(tail(b"", 1), b"");
    }
}
