//! NRI's wire: one unix connection multiplexed into logical connections
//! (`github.com/containerd/nri/pkg/net/multiplex`: an 8-byte frame header, connection id and
//! payload length, big-endian), each carrying ttrpc (`github.com/containerd/ttrpc`: a
//! 10-byte message header — length, stream id, type, flags — then a protobuf `Request` or
//! `Response`). The plugin serves `nri.pkg.api.v1alpha1.Plugin` on connection 1 and calls
//! `nri.pkg.api.v1alpha1.Runtime` on connection 2.

use std::collections::HashMap;

use prost::Message as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The runtime calls the plugin here.
pub const PLUGIN_CONN: u32 = 1;
/// The plugin calls the runtime here.
pub const RUNTIME_CONN: u32 = 2;
const MUX_HEADER: usize = 8;
const TTRPC_HEADER: usize = 10;
/// ttrpc's largest message (`messageLengthMax`).
pub const MESSAGE_MAX: usize = 4 << 20;
/// The multiplexer's largest frame: one whole ttrpc message.
const MUX_FRAME_MAX: usize = TTRPC_HEADER + MESSAGE_MAX;
pub const TYPE_REQUEST: u8 = 1;
pub const TYPE_RESPONSE: u8 = 2;

/// ttrpc's `Request` (`request.proto`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    #[prost(string, tag = "1")]
    pub service: String,
    #[prost(string, tag = "2")]
    pub method: String,
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
}

/// `google.rpc.Status`, as ttrpc carries it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// ttrpc's `Response`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// gRPC codes ttrpc answers with.
pub const CODE_UNIMPLEMENTED: i32 = 12;
pub const CODE_INTERNAL: i32 = 13;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("NRI connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("NRI connection: a {what} of {len} bytes is over the {max}-byte limit")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("NRI connection: undecodable {what}: {err}")]
    Decode {
        what: &'static str,
        err: prost::DecodeError,
    },
}

/// One ttrpc message on a logical connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub conn: u32,
    pub stream: u32,
    pub kind: u8,
    pub flags: u8,
    pub body: Vec<u8>,
}

/// The bytes of one ttrpc message inside as many multiplexer frames as it needs.
pub fn encode(m: &Frame) -> Result<Vec<u8>, WireError> {
    if m.body.len() > MESSAGE_MAX {
        return Err(WireError::TooLarge {
            what: "message",
            len: m.body.len(),
            max: MESSAGE_MAX,
        });
    }
    let mut ttrpc = Vec::with_capacity(TTRPC_HEADER + m.body.len());
    ttrpc.extend_from_slice(&(m.body.len() as u32).to_be_bytes());
    ttrpc.extend_from_slice(&m.stream.to_be_bytes());
    ttrpc.extend_from_slice(&[m.kind, m.flags]);
    ttrpc.extend_from_slice(&m.body);
    let mut out = Vec::with_capacity(ttrpc.len() + MUX_HEADER);
    for part in ttrpc.chunks(MUX_FRAME_MAX) {
        out.extend_from_slice(&m.conn.to_be_bytes());
        out.extend_from_slice(&(part.len() as u32).to_be_bytes());
        out.extend_from_slice(part);
    }
    Ok(out)
}

pub async fn write<W: AsyncWrite + Unpin>(w: &mut W, m: &Frame) -> Result<(), WireError> {
    w.write_all(&encode(m)?).await?;
    w.flush().await?;
    Ok(())
}

/// Reads multiplexer frames and hands out whole ttrpc messages, per logical connection.
pub struct Reader<R> {
    inner: R,
    pending: HashMap<u32, Vec<u8>>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            pending: HashMap::new(),
        }
    }

    /// The next whole message; `None` when the peer closed the connection.
    pub async fn next(&mut self) -> Result<Option<Frame>, WireError> {
        loop {
            if let Some(m) = self.take_whole()? {
                return Ok(Some(m));
            }
            let mut hdr = [0u8; MUX_HEADER];
            match self.inner.read_exact(&mut hdr).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            let conn = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]) as usize;
            if len > MUX_FRAME_MAX {
                return Err(WireError::TooLarge {
                    what: "multiplexer frame",
                    len,
                    max: MUX_FRAME_MAX,
                });
            }
            let buf = self.pending.entry(conn).or_default();
            let at = buf.len();
            buf.resize(at + len, 0);
            self.inner.read_exact(&mut buf[at..]).await?;
        }
    }

    fn take_whole(&mut self) -> Result<Option<Frame>, WireError> {
        for (conn, buf) in self.pending.iter_mut() {
            if buf.len() < TTRPC_HEADER {
                continue;
            }
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if len > MESSAGE_MAX {
                return Err(WireError::TooLarge {
                    what: "message",
                    len,
                    max: MESSAGE_MAX,
                });
            }
            if buf.len() < TTRPC_HEADER + len {
                continue;
            }
            let rest = buf.split_off(TTRPC_HEADER + len);
            let whole = std::mem::replace(buf, rest);
            return Ok(Some(Frame {
                conn: *conn,
                stream: u32::from_be_bytes([whole[4], whole[5], whole[6], whole[7]]),
                kind: whole[8],
                flags: whole[9],
                body: whole[TTRPC_HEADER..].to_vec(),
            }));
        }
        Ok(None)
    }
}

pub fn decode<M: prost::Message + Default>(what: &'static str, b: &[u8]) -> Result<M, WireError> {
    M::decode(b).map_err(|err| WireError::Decode { what, err })
}

/// A response message answering `stream` on the plugin's connection.
pub fn response(stream: u32, result: Result<Vec<u8>, Status>) -> Frame {
    let resp = match result {
        Ok(payload) => Response {
            status: None,
            payload,
        },
        Err(s) => Response {
            status: Some(s),
            payload: Vec::new(),
        },
    };
    Frame {
        conn: PLUGIN_CONN,
        stream,
        kind: TYPE_RESPONSE,
        flags: 0,
        body: resp.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_a_mux_header_then_a_ttrpc_header_then_the_body() {
        let m = Frame {
            conn: RUNTIME_CONN,
            stream: 3,
            kind: TYPE_REQUEST,
            flags: 0,
            body: vec![0xAA, 0xBB],
        };
        let bytes = encode(&m).unwrap();
        assert_eq!(
            bytes,
            [
                0, 0, 0, 2, 0, 0, 0, 12, // conn 2, 12 bytes follow
                0, 0, 0, 2, 0, 0, 0, 3, 1, 0, // body length 2, stream 3, request, no flags
                0xAA, 0xBB
            ]
        );
    }

    #[tokio::test]
    async fn messages_split_across_frames_and_interleaved_connections_come_out_whole() {
        let a = encode(&Frame {
            conn: PLUGIN_CONN,
            stream: 1,
            kind: TYPE_REQUEST,
            flags: 0,
            body: b"hello".to_vec(),
        })
        .unwrap();
        // The same message cut into two frames, with a frame of connection 2 between them.
        let ttrpc = &a[MUX_HEADER..];
        let mut wire = Vec::new();
        let frame = |conn: u32, b: &[u8], out: &mut Vec<u8>| {
            out.extend_from_slice(&conn.to_be_bytes());
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        };
        frame(PLUGIN_CONN, &ttrpc[..7], &mut wire);
        let other = encode(&Frame {
            conn: RUNTIME_CONN,
            stream: 2,
            kind: TYPE_RESPONSE,
            flags: 0,
            body: vec![],
        })
        .unwrap();
        wire.extend_from_slice(&other);
        frame(PLUGIN_CONN, &ttrpc[7..], &mut wire);
        let mut r = Reader::new(&wire[..]);
        let first = r.next().await.unwrap().unwrap();
        assert_eq!((first.conn, first.stream, first.kind), (RUNTIME_CONN, 2, 2));
        let second = r.next().await.unwrap().unwrap();
        assert_eq!((second.conn, second.stream), (PLUGIN_CONN, 1));
        assert_eq!(second.body, b"hello");
        assert!(r.next().await.unwrap().is_none(), "end of stream");
    }

    #[tokio::test]
    async fn an_oversized_frame_is_refused_before_it_is_read() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&1u32.to_be_bytes());
        wire.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = Reader::new(&wire[..]).next().await.unwrap_err();
        assert!(err.to_string().contains("over the"), "{err}");
    }
}
