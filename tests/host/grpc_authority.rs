//! gRPC clients that send a unix socket's path as `:authority` (grpc-core percent-encodes
//! it, grpc-java sends it as is) reach `koord --role=runtime-proxy` as grpc-go's
//! `localhost` does, instead of being reset with PROTOCOL_ERROR. The request is written by
//! hand (HTTP/2 frames, HPACK literals) since no Rust client sends such an authority.

use super::runtime_proxy::start_proxy;
use crate::common::containerd::Containerd;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK literal header fields without indexing, new names (RFC 7541 §6.2.2).
fn literals(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in headers {
        out.push(0);
        out.push(k.len() as u8);
        out.extend_from_slice(k.as_bytes());
        out.push(v.len() as u8);
        out.extend_from_slice(v.as_bytes());
    }
    out
}

/// Sends one `RuntimeService/Version` call with this `:authority`; the first frame type
/// the server answers the stream with (1 HEADERS: answered, 3 RST_STREAM: refused).
fn version_call(socket: &std::path::Path, authority: &str) -> u8 {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let block = literals(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/runtime.v1.RuntimeService/Version"),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    let mut out = PREFACE.to_vec();
    out.extend(frame(4, 0, 0, &[])); // SETTINGS
    out.extend(frame(1, 0x4, 1, &block)); // HEADERS, END_HEADERS
    out.extend(frame(0, 0x1, 1, &[0, 0, 0, 0, 0])); // DATA: an empty message, END_STREAM
    s.write_all(&out).unwrap();
    loop {
        let mut head = [0u8; 9];
        s.read_exact(&mut head).expect("the server answers");
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).unwrap();
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if stream == 1 && (head[3] == 1 || head[3] == 3) {
            return head[3];
        }
        if head[3] == 4 && head[4] & 1 == 0 {
            s.write_all(&frame(4, 0x1, 0, &[])).unwrap(); // SETTINGS ACK
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_path_authorities_are_answered() {
    let Some(ctrd) = Containerd::start("authority") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hook_dir = dir.path().join("hookserver.d");
    let (proxy, socket) = start_proxy(dir.path(), &ctrd.socket, &hook_dir);
    let path = socket.display().to_string();
    let encoded = path.replace('/', "%2F");
    for authority in ["localhost", encoded.as_str(), path.as_str()] {
        let s = socket.clone();
        let a = authority.to_string();
        let got = tokio::task::spawn_blocking(move || version_call(&s, &a))
            .await
            .unwrap();
        assert_eq!(got, 1, "{authority:?} was refused\n{}", proxy.logs());
    }
}
