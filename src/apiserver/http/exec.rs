//! `pods/exec` over WebSocket (`v5.channel.k8s.io`, and `v4`), as kubectl 1.30+ and kube-rs
//! speak it: every binary message starts with a channel byte (0 stdin, 1 stdout,
//! 2 stderr, 3 the final Status, 4 terminal resize; in v5, 255 closes the channel named by
//! the next byte). The command runs in the pod's container through the embedded node
//! runtime. There is no pseudo-terminal: with `tty=true`, stderr joins stdout.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::{ResourceRequest, ServerState};
use crate::apiserver::error::ApiError;
use crate::kernel::http::{Body, full};

const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

struct Options {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    tty: bool,
}

fn options(query: Option<&str>) -> Options {
    let mut o = Options {
        command: Vec::new(),
        container: None,
        stdin: false,
        tty: false,
    };
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let on = matches!(v.as_ref(), "true" | "1");
        match k.as_ref() {
            "command" => o.command.push(v.into_owned()),
            "container" if !v.is_empty() => o.container = Some(v.into_owned()),
            "stdin" => o.stdin = on,
            "tty" => o.tty = on,
            _ => {}
        }
    }
    o
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The channel protocol both sides speak, from the client's offer.
fn protocol(req: &Request<Incoming>) -> Option<&'static str> {
    let offered = header(req, "sec-websocket-protocol")?;
    PROTOCOLS
        .into_iter()
        .find(|p| offered.split(',').any(|o| o.trim() == *p))
}

pub async fn serve(
    state: &Arc<ServerState>,
    rr: &ResourceRequest,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let name = rr.name.clone().unwrap_or_default();
    let stored = state
        .store
        .get(&rr.info.key(), rr.ns(), &name)
        .ok_or_else(|| ApiError::not_found(&rr.info, &name))?;
    let pod: Pod = serde_json::from_slice(&stored.bytes)
        .map_err(|e| ApiError::internal(format!("stored pod {name}: {e}")))?;
    let opts = options(req.uri().query());
    let wants_ws = header(&req, "upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let (Some(key), Some(proto), true) =
        (header(&req, "sec-websocket-key"), protocol(&req), wants_ws)
    else {
        return Err(ApiError::bad_request(format!(
            "pods/exec needs a WebSocket upgrade with one of the protocols {}",
            PROTOCOLS.join(", ")
        )));
    };
    if opts.command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    let containers: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect();
    let container = match (&opts.container, containers.as_slice()) {
        (Some(c), _) => c.clone(),
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let exec = state.exec.get().ok_or_else(|| {
        ApiError::bad_request("pods/exec is served only for pods of the embedded node runtime")
    })?;
    let child = exec
        .spawn(&pod, &container, &opts.command, opts.stdin)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let accept = derive_accept_key(key.as_bytes());
    let v5 = proto == PROTOCOLS[0];
    let (command, tty) = (opts.command.clone(), opts.tty);
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(up) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, None).await;
                session(ws, child, &command, tty, v5).await;
            }
            Err(e) => tracing::debug!(error = %e, "exec upgrade failed"),
        }
    });
    let mut resp = Response::new(full(bytes::Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert("upgrade", "websocket".parse().expect("static header"));
    h.insert("connection", "Upgrade".parse().expect("static header"));
    h.insert(
        "sec-websocket-protocol",
        proto.parse().expect("static header"),
    );
    if let Ok(v) = accept.parse() {
        h.insert("sec-websocket-accept", v);
    }
    Ok(resp)
}

/// Copies one output stream to the client, tagged with its channel.
fn pump(mut from: impl AsyncRead + Unpin + Send + 'static, channel: u8, tx: mpsc::Sender<Message>) {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from.read(&mut buf[1..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf[0] = channel;
                    if tx.send(Message::binary(buf[..=n].to_vec())).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// The final Status on the error channel: success, or the exit code as kubectl reads it.
fn final_status(command: &[String], code: Option<i32>) -> Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        Some(c) => json!({
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {c}", command.join(" ")),
            "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]},
        }),
        None => json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
                       "message": "the command was killed by a signal"}),
    }
}

async fn session<S>(
    ws: WebSocketStream<S>,
    mut child: tokio::process::Child,
    command: &[String],
    tty: bool,
    v5: bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut incoming) = ws.split();
    let (tx, mut rx) = mpsc::channel::<Message>(16);
    if let Some(out) = child.stdout.take() {
        pump(out, STDOUT, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        pump(err, if tty { STDOUT } else { STDERR }, tx.clone());
    }
    drop(tx);
    let mut stdin = child.stdin.take();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(m) => {
                    if sink.send(m).await.is_err() {
                        let _ = child.start_kill();
                        return;
                    }
                }
                None => break,
            },
            msg = incoming.next() => match msg {
                Some(Ok(Message::Binary(data))) => match data.first() {
                    Some(&STDIN) => {
                        if let Some(w) = stdin.as_mut()
                            && w.write_all(&data[1..]).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    Some(&CLOSE) if v5 && data.get(1) == Some(&STDIN) => stdin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    return;
                }
                Some(Ok(_)) => {}
            },
        }
    }
    drop(stdin);
    let code = child.wait().await.ok().and_then(|s| s.code());
    let mut status = vec![ERROR];
    status.extend(serde_json::to_vec(&final_status(command, code)).unwrap_or_default());
    let _ = sink.send(Message::binary(status)).await;
    // kubectl reads only a normal closure (1000) as the end of its streams.
    let normal = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(normal))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_repeat_and_exit_codes_reach_kubectl() {
        let o = options(Some(
            "command=sh&command=-c&command=exit+3&container=c&stdin=true",
        ));
        assert_eq!(o.command, ["sh", "-c", "exit 3"]);
        assert_eq!(o.container.as_deref(), Some("c"));
        assert!(o.stdin && !o.tty);
        let s = final_status(&o.command, Some(3));
        assert_eq!(s["details"]["causes"][0]["message"], "3");
        assert_eq!(final_status(&o.command, Some(0))["status"], "Success");
    }
}
