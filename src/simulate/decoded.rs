//! The recording's changes decoded into the kinds the replay reads, on a thread of their
//! own while the replay runs: unpacking and decoding are most of a replay's work that is
//! not scheduling, and the machine has a second core for them.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;
use serde_json::Value;

use super::recording::{Op, RawChange, Reader};
use crate::api::slo::NodeMetric;

/// Changes handed over at once (a channel message per change costs more than decoding a
/// small object); batches read or decoded ahead of the replay at most, per decoder (enough
/// to decode what arrives while the replay loads its initial state).
const BATCH: usize = 256;
const AHEAD: usize = 32;
/// Decoders side by side: decoding is most of the reading, and it splits by batch.
const DECODERS: usize = 2;

/// An object of a change, decoded.
pub enum Object {
    /// A list marker, a delete, or an object that did not decode (warned): only the key.
    Absent,
    Node(Arc<Node>),
    /// Shared as it is: the replay's world and its scheduler keep this one copy.
    Pod(Arc<Pod>),
    NodeMetric(Arc<NodeMetric>),
    Other(Value),
}

/// One change of the recording, decoded.
pub struct Event {
    pub t: u64,
    pub op: Op,
    pub kind: String,
    /// `name` for nodes and NodeMetrics, `namespace/name` for the rest (the world's keys).
    pub key: String,
    pub object: Object,
}

impl Event {
    /// The object's name.
    pub fn name(&self) -> &str {
        self.key.rsplit('/').next().unwrap_or("")
    }
}

/// What the reader hands a decoder, in turn.
enum Raw {
    Batch(Vec<RawChange>),
    /// The recording ended, with the reader's warnings (a line cut short).
    End(Vec<String>),
}

enum Msg {
    Batch(Vec<Event>),
    End(Vec<String>),
}

/// The events of a recording, in order, read on one thread and decoded on
/// [`DECODERS`] others (batch `i` by decoder `i % DECODERS`); its warnings (a line cut
/// short, an object that did not decode) once the stream has ended.
pub struct Events {
    decoders: Vec<Receiver<Msg>>,
    turn: usize,
    batch: std::vec::IntoIter<Event>,
    pub warnings: Vec<String>,
}

impl Events {
    pub fn spawn(reader: Reader<RawChange>) -> std::io::Result<Events> {
        let mut to_decoders = Vec::new();
        let mut decoders = Vec::new();
        for i in 0..DECODERS {
            let (raw_tx, raw_rx) = sync_channel(AHEAD);
            let (tx, rx) = sync_channel(AHEAD);
            let named = std::thread::Builder::new().name(format!("replay-decode-{i}"));
            named.spawn(move || decode_batches(raw_rx, tx))?;
            to_decoders.push(raw_tx);
            decoders.push(rx);
        }
        let named = std::thread::Builder::new().name("replay-read".into());
        named.spawn(move || read_all(reader, to_decoders))?;
        Ok(Events {
            decoders,
            turn: 0,
            batch: Vec::new().into_iter(),
            warnings: Vec::new(),
        })
    }
}

impl Iterator for Events {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.batch.next() {
                return Some(e);
            }
            let from = self.decoders.get(self.turn)?;
            self.turn = (self.turn + 1) % self.decoders.len();
            let Ok(msg) = from.recv() else {
                // A decoder gone without the end: what came before stands, the rest is lost.
                self.warnings
                    .push("the recording's decoding stopped early; the rest is ignored".into());
                self.decoders.clear();
                return None;
            };
            match msg {
                Msg::Batch(b) => self.batch = b.into_iter(),
                Msg::End(w) => {
                    self.warnings.extend(w);
                    // The end was dealt last: the other decoders have only their own
                    // warnings left to hand over before they stop.
                    for d in &self.decoders {
                        while let Ok(m) = d.recv() {
                            if let Msg::End(w) = m {
                                self.warnings.extend(w);
                            }
                        }
                    }
                    self.decoders.clear();
                    return None;
                }
            }
        }
    }
}

/// Reads the recording into batches, dealt to the decoders in turn; runs until the
/// recording ends or the replay stops listening.
fn read_all(mut reader: Reader<RawChange>, decoders: Vec<SyncSender<Raw>>) {
    let mut turn = 0;
    let mut batch = Vec::with_capacity(BATCH);
    let mut deal = |raw: Raw| {
        let sent = decoders[turn].send(raw).is_ok();
        turn = (turn + 1) % decoders.len();
        sent
    };
    for raw in reader.by_ref() {
        batch.push(raw);
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if !deal(Raw::Batch(full)) {
                return;
            }
        }
    }
    if !batch.is_empty() && !deal(Raw::Batch(batch)) {
        return;
    }
    deal(Raw::End(reader.warnings));
}

/// Decodes the batches it is dealt; its own warnings are handed over at the end.
fn decode_batches(rx: Receiver<Raw>, tx: SyncSender<Msg>) {
    let mut warnings = Vec::new();
    for raw in rx {
        let msg = match raw {
            Raw::Batch(b) => Msg::Batch(b.into_iter().map(|c| decode(c, &mut warnings)).collect()),
            Raw::End(mut w) => {
                w.splice(0..0, std::mem::take(&mut warnings));
                Msg::End(w)
            }
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
    if !warnings.is_empty() {
        let _ = tx.send(Msg::End(warnings));
    }
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    metadata: Meta,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// One change decoded; an object that does not decode becomes a warning and `Absent`
/// (what the replay does with a change it cannot read: it skips it).
fn decode(raw: RawChange, warnings: &mut Vec<String>) -> Event {
    let text = raw.object.as_ref().map_or("null", |o| o.get());
    let object = match raw.op {
        Op::Sync | Op::Apply => typed(&raw.kind, text).unwrap_or_else(|e| {
            warnings.push(format!("a {} in the recording skipped: {e}", raw.kind));
            Object::Absent
        }),
        _ => Object::Absent,
    };
    let key = match &object {
        Object::Node(n) => key(&raw.kind, None, n.metadata.name.as_deref()),
        Object::Pod(p) => key(
            &raw.kind,
            p.metadata.namespace.as_deref(),
            p.metadata.name.as_deref(),
        ),
        Object::NodeMetric(m) => key(&raw.kind, None, m.metadata.name.as_deref()),
        Object::Other(v) => {
            let s = |p: &str| v.pointer(p).and_then(Value::as_str);
            key(&raw.kind, s("/metadata/namespace"), s("/metadata/name"))
        }
        Object::Absent => {
            let m = serde_json::from_str::<Named>(text)
                .map(|n| n.metadata)
                .unwrap_or_default();
            key(&raw.kind, m.namespace.as_deref(), m.name.as_deref())
        }
    };
    Event {
        t: raw.t,
        op: raw.op,
        kind: raw.kind,
        key,
        object,
    }
}

fn typed(kind: &str, text: &str) -> Result<Object, serde_json::Error> {
    use crate::api::decode::from_str;
    Ok(match kind {
        "Node" => Object::Node(Arc::new(from_str(text)?)),
        "Pod" => Object::Pod(Arc::new(from_str(text)?)),
        "NodeMetric" => Object::NodeMetric(Arc::new(from_str(text)?)),
        _ => Object::Other(serde_json::from_str(text)?),
    })
}

/// The world's key of an object of `kind`.
fn key(kind: &str, namespace: Option<&str>, name: Option<&str>) -> String {
    let name = name.unwrap_or("");
    match kind {
        "Node" | "NodeMetric" => name.to_string(),
        _ => format!("{}/{name}", namespace.unwrap_or("")),
    }
}

#[cfg(test)]
#[path = "decoded_tests.rs"]
mod tests;
