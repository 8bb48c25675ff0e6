//! `pods/log` for pods of the embedded node runtime, read from the files it writes
//! (`<dataDir>/noderuntime/logs/<ns>_<name>_<uid>/<container>/<attempt>.log`): `container`,
//! `previous`, `sinceSeconds`/`sinceTime`, `tailLines`, `timestamps`, `limitBytes` and
//! `follow`. Line times come from the runtime's growth notes (`noderuntime::logstamp`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::{Query, ResourceRequest, ServerState};
use crate::apiserver::error::ApiError;
use crate::kernel::http::{Body, respond};
use crate::noderuntime::logstamp;
use k8s_openapi::jiff::Timestamp;

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
    let stamps = logstamp::read(&file);
    let stamped = q.flag("timestamps");
    let mut start = match since(q)? {
        Some(cutoff) => first_line_after(&text, &stamps, cutoff),
        None => 0,
    };
    if let Some(n) = q.u64("tailLines") {
        start = start.max(text.len() - tail(&text, n as usize).len());
    }
    let mut first = render(&text, start, &stamps, stamped);
    if let Some(limit) = q.u64("limitBytes") {
        first.truncate(limit as usize);
        if !q.flag("follow") || first.len() as u64 >= limit {
            return Ok(respond(StatusCode::OK, "text/plain", first));
        }
    }
    if !q.flag("follow") {
        return Ok(respond(StatusCode::OK, "text/plain", first));
    }
    Ok(follow(
        state.clone(),
        rr.info.key(),
        (pod.namespace.clone(), pod.name.clone()),
        file,
        Bytes::from(first),
        (text.len(), stamped),
    ))
}

/// `sinceSeconds` or `sinceTime` (at most one), as the earliest time wanted.
fn since(q: &Query) -> Result<Option<Timestamp>, ApiError> {
    match (q.get("sinceSeconds"), q.get("sinceTime")) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "at most one of sinceTime or sinceSeconds may be specified",
        )),
        (Some(s), None) => {
            let secs: i64 = s.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "sinceSeconds: Invalid value: {s:?}: must be greater than 0"
                ))
            })?;
            Ok(Timestamp::now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .ok())
        }
        (None, Some(t)) => t
            .parse()
            .map(Some)
            .map_err(|e| ApiError::bad_request(format!("sinceTime: Invalid value: {t:?}: {e}"))),
        (None, None) => Ok(None),
    }
}

/// Offset of the first line written at or after `cutoff`.
fn first_line_after(text: &[u8], stamps: &[(u64, Timestamp)], cutoff: Timestamp) -> usize {
    let mut start = 0;
    for line in text.split_inclusive(|b| *b == b'\n') {
        let end = start + line.len();
        if logstamp::time_of(stamps, end as u64) >= cutoff {
            return start;
        }
        start = end;
    }
    text.len()
}

/// `text[start..]`, each line prefixed with its time when `stamped`.
fn render(text: &[u8], start: usize, stamps: &[(u64, Timestamp)], stamped: bool) -> Vec<u8> {
    if !stamped {
        return text[start..].to_vec();
    }
    let mut out = Vec::with_capacity((text.len() - start) * 2);
    let mut end = start;
    for line in text[start..].split_inclusive(|b| *b == b'\n') {
        end += line.len();
        out.extend_from_slice(logstamp::format(logstamp::time_of(stamps, end as u64)).as_bytes());
        out.push(b' ');
        out.extend_from_slice(line);
    }
    out
}

/// Streams what is already there, then what the container appends, until the pod is gone.
/// New lines are stamped as they are seen (whole lines only, when stamping).
fn follow(
    state: Arc<ServerState>,
    key: (String, String),
    (ns, name): (String, String),
    file: PathBuf,
    first: Bytes,
    (mut offset, stamped): (usize, bool),
) -> Response<Body> {
    let stream = async_stream::stream! {
        yield first;
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let text = std::fs::read(&file).unwrap_or_default();
            let upto = if stamped {
                text[offset.min(text.len())..]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(offset, |i| offset + i + 1)
            } else {
                text.len()
            };
            if upto > offset {
                yield Bytes::from(render(&text[..upto], offset, &[], stamped));
                offset = upto;
            }
            if state.store.get(&key, &ns, &name).is_none() {
                break;
            }
        }
    };
    super::read::streaming_as("text/plain", stream)
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

    #[test]
    fn since_and_timestamps_use_the_growth_notes() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let text = b"old\nnew\nnewer\n";
        let stamps = [(4, t(100)), (8, t(200)), (14, t(300))];
        assert_eq!(first_line_after(text, &stamps, t(150)), 4);
        assert_eq!(first_line_after(text, &stamps, t(400)), text.len());
        let out = String::from_utf8(render(text, 4, &stamps, true)).unwrap();
        assert_eq!(
            out,
            "1970-01-01T00:03:20.000000000Z new\n1970-01-01T00:05:00.000000000Z newer\n"
        );
    }
}
