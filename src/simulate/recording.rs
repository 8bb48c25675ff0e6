//! The recording file: gzip-compressed JSON lines, written as the watches deliver them so
//! a recording cut short (a crash, the size bound) is still readable up to its last line.
//!
//! Line 1 is the header; every other line is one change, in the order it was seen:
//! `{"t": MS, "op": OP, "kind": KIND, "object": {...}}` with `t` milliseconds since the
//! recording began. `op` is `init` (a kind's list begins), `sync` (an object of that list),
//! `synced` (the list is complete: objects of the kind not listed since `init` are gone),
//! `apply` (created or changed) or `delete`.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const FORMAT: &str = "koord.recording/v1";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub format: String,
    /// When the recording began (RFC 3339).
    pub started_at: String,
    /// The API server recorded.
    pub server: String,
    /// The kinds recorded (and the ones the server does not serve, skipped).
    pub kinds: Vec<String>,
    pub skipped: Vec<String>,
    /// The cluster is koord's embedded one (its scheduler also serves default-scheduler).
    #[serde(default)]
    pub embedded: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Init,
    Sync,
    Synced,
    Apply,
    Delete,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub t: u64,
    pub op: Op,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub object: Value,
}

/// A change as read for a replay: the object left as text, decoded once into its own
/// kind (no `Value` tree between).
#[derive(Debug, Deserialize)]
pub struct RawChange {
    pub t: u64,
    pub op: Op,
    pub kind: String,
    #[serde(default)]
    pub object: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: line {line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
}

/// Writes a recording, counting the bytes it has written (before compression).
pub struct Writer {
    out: GzEncoder<BufWriter<std::fs::File>>,
    pub raw_bytes: u64,
    pub changes: u64,
}

impl Writer {
    /// Creates `path` (private to the user: a recording holds the cluster's objects).
    pub fn create(path: &Path, header: &Header) -> std::io::Result<Writer> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        let out = GzEncoder::new(BufWriter::new(file), Compression::fast());
        let mut w = Writer {
            out,
            raw_bytes: 0,
            changes: 0,
        };
        w.line(&serde_json::to_value(header).unwrap_or_default())?;
        Ok(w)
    }

    pub fn change(&mut self, c: &Change) -> std::io::Result<()> {
        self.changes += 1;
        self.line(&serde_json::to_value(c).unwrap_or_default())
    }

    fn line(&mut self, v: &Value) -> std::io::Result<()> {
        let mut text = serde_json::to_vec(v).map_err(std::io::Error::other)?;
        text.push(b'\n');
        self.raw_bytes += text.len() as u64;
        self.out.write_all(&text)
    }

    /// Flushes and closes the compressed stream.
    pub fn finish(self) -> std::io::Result<()> {
        let mut inner = self.out.finish()?;
        inner.flush()
    }
}

/// A recording read back whole: its header and every change in order.
pub struct Recording {
    pub header: Header,
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
}

/// The changes of a recording, one line at a time. A line cut short or not a change ends
/// the stream with a warning (a recording interrupted mid-write): what came before stands.
pub struct Reader<T = Change> {
    lines: std::io::Lines<BufReader<GzDecoder<std::fs::File>>>,
    file: String,
    line: usize,
    pub warnings: Vec<String>,
    ended: bool,
    item: std::marker::PhantomData<T>,
}

impl<T: serde::de::DeserializeOwned> Iterator for Reader<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.ended {
            return None;
        }
        let text = self.lines.next()?;
        self.line += 1;
        let n = self.line;
        let parsed = text
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<T>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(c) => Some(c),
            Err(e) => {
                let file = &self.file;
                self.warnings
                    .push(format!("{file}: line {n}: {e}; the rest is ignored"));
                // Nothing after a broken line is trusted (and a broken stream repeats its
                // error at every read).
                self.ended = true;
                None
            }
        }
    }
}

/// Opens a recording: its header, and its changes to stream (as [`Change`] or
/// [`RawChange`]).
pub fn open<T>(path: &Path) -> Result<(Header, Reader<T>), RecordingError> {
    let file = path.display().to_string();
    let io = |source| RecordingError::Io {
        file: file.clone(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut lines = BufReader::with_capacity(1 << 16, GzDecoder::new(f)).lines();
    let bad = |message: String| RecordingError::Line {
        file: file.clone(),
        line: 1,
        message,
    };
    let first = lines
        .next()
        .ok_or_else(|| bad("empty: no header".into()))?
        .map_err(io)?;
    let header: Header =
        serde_json::from_str(&first).map_err(|e| bad(format!("not a recording header: {e}")))?;
    if header.format != FORMAT {
        return Err(bad(format!(
            "format {:?}, expected {FORMAT:?}",
            header.format
        )));
    }
    let reader = Reader {
        lines,
        file: file.clone(),
        line: 1,
        warnings: Vec::new(),
        ended: false,
        item: std::marker::PhantomData,
    };
    Ok((header, reader))
}

/// A whole recording in memory.
pub fn read(path: &Path) -> Result<Recording, RecordingError> {
    let (header, mut reader) = open::<Change>(path)?;
    let changes = reader.by_ref().collect();
    Ok(Recording {
        header,
        changes,
        warnings: reader.warnings,
    })
}

#[cfg(test)]
#[path = "recording_tests.rs"]
mod tests;
