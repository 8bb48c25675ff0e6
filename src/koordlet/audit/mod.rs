//! Audit events (Koordinator's `pkg/koordlet/audit`, gates `AuditEvents` and
//! `AuditEventsHTTPHandler`): what the koordlet changed on the node — each cgroup value the
//! QoS executor writes, each eviction — as JSON lines under `koordlet.audit.logDir`
//! (`-audit-log-dir`, `/var/log/koordlet`), read newest first from `/events` on the
//! koordlet's admin port in pages (`size`, `pageToken`; JSON with `Accept:
//! application/json`, else one event a line and a `Next-Page-Token` header).

pub mod http;
pub mod log;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// `koordlet.audit` (Koordinator's audit flags and defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    pub log_dir: std::path::PathBuf,
    /// Events above this verbosity are dropped (0: none are).
    pub verbose: i32,
    #[serde(rename = "maxDiskSpaceMB")]
    pub max_disk_space_mb: u64,
    pub max_concurrent_readers: usize,
    /// The largest `size` one request may ask.
    pub max_events_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            log_dir: "/var/log/koordlet".into(),
            verbose: 3,
            max_disk_space_mb: 16,
            max_concurrent_readers: 4,
            max_events_limit: 2048,
        }
    }
}

/// Events a request gets without `size`.
const DEFAULT_EVENTS_LIMIT: usize = 256;
/// A reader not asked for this long is dropped.
const ACTIVE_READER_TTL: Duration = Duration::from_secs(600);

/// One event, as Koordinator writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created_at: String,
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub level: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Event {
    pub fn node() -> Event {
        Event {
            kind: "node".into(),
            ..Event::default()
        }
    }

    pub fn pod(namespace: &str, name: &str) -> Event {
        Event {
            kind: "pod".into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Event::default()
        }
    }

    pub fn group(name: &str) -> Event {
        Event {
            kind: "group".into(),
            name: name.into(),
            ..Event::default()
        }
    }

    pub fn reason(mut self, r: &str) -> Event {
        self.reason = r.into();
        self
    }

    pub fn message(mut self, m: impl Into<String>) -> Event {
        self.message = m.into();
        self
    }
}

struct Reader {
    token: String,
    refreshed: Instant,
    lines: Arc<Mutex<log::ReverseLines>>,
}

pub struct Auditor {
    config: Config,
    writer: Mutex<log::Writer>,
    readers: Mutex<Vec<Reader>>,
}

/// What `/events` answers.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub next_page_token: Option<String>,
}

impl Answer {
    fn error(status: u16, msg: String) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: msg + "\n",
            next_page_token: None,
        }
    }
}

impl Auditor {
    pub fn new(config: Config) -> Auditor {
        let writer = log::Writer::new(config.log_dir.clone(), config.max_disk_space_mb);
        Auditor {
            config,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        }
    }

    /// Records `event` at `verbose` (Koordinator's `V(n)...Do()`).
    pub fn log(&self, verbose: i32, mut event: Event) {
        if self.config.verbose > 0 && verbose > self.config.verbose {
            return;
        }
        event.created_at = k8s_openapi::jiff::Timestamp::now().to_string();
        let Ok(line) = serde_json::to_vec(&event) else {
            return;
        };
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = w.append(&line) {
            tracing::warn!(dir = %self.config.log_dir.display(), error = %e, "audit event not written");
        }
    }

    /// One page of events, newest first (`HttpHandler`).
    pub fn query(&self, size: Option<&str>, page_token: Option<&str>, json: bool) -> Answer {
        let mut want = DEFAULT_EVENTS_LIMIT;
        if let Some(s) = size.and_then(|s| s.parse::<usize>().ok()) {
            if s > self.config.max_events_limit {
                let limit = self.config.max_events_limit;
                return Answer::error(400, format!("size({s}) exceeds the limit({limit})"));
            }
            want = s;
        }
        let (token, lines) = match page_token.filter(|t| !t.is_empty()) {
            None => self.new_reader(),
            Some(t) => match self.find_reader(t) {
                Some(l) => (t.to_string(), l),
                None => return Answer::error(409, format!("invalid pageToken {t}")),
            },
        };
        let mut events = Vec::with_capacity(want.min(DEFAULT_EVENTS_LIMIT));
        let mut eof = false;
        {
            let mut it = lines.lock().unwrap_or_else(|e| e.into_inner());
            while events.len() < want {
                match it.next() {
                    Some(l) => events.extend(serde_json::from_str::<Event>(&l).ok()),
                    None => {
                        eof = true;
                        break;
                    }
                }
            }
        }
        let next = (!eof).then_some(token);
        if json {
            let body = serde_json::json!({"NextPageToken": next.clone().unwrap_or_default(), "Events": events});
            return Answer {
                status: 200,
                content_type: "application/json; charset=utf-8",
                body: body.to_string(),
                next_page_token: None,
            };
        }
        let body = events
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|l| l + "\n")
            .collect();
        Answer {
            status: 200,
            content_type: "text/plain; charset=utf-8",
            body,
            next_page_token: next,
        }
    }

    fn new_reader(&self) -> (String, Arc<Mutex<log::ReverseLines>>) {
        let token = uuid::Uuid::new_v4().to_string();
        let lines = Arc::new(Mutex::new(log::ReverseLines::open(&self.config.log_dir)));
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.retain(|r| r.refreshed.elapsed() < ACTIVE_READER_TTL);
        readers.push(Reader {
            token: token.clone(),
            refreshed: Instant::now(),
            lines: lines.clone(),
        });
        let excess = readers
            .len()
            .saturating_sub(self.config.max_concurrent_readers);
        readers.drain(..excess);
        (token, lines)
    }

    fn find_reader(&self, token: &str) -> Option<Arc<Mutex<log::ReverseLines>>> {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.retain(|r| r.refreshed.elapsed() < ACTIVE_READER_TTL);
        let r = readers.iter_mut().find(|r| r.token == token)?;
        r.refreshed = Instant::now();
        Some(r.lines.clone())
    }
}

static DEFAULT: OnceLock<Arc<Auditor>> = OnceLock::new();

/// Starts recording (gate `AuditEvents`); the first call's configuration stays.
pub fn setup(config: Config) -> Arc<Auditor> {
    DEFAULT
        .get_or_init(|| Arc::new(Auditor::new(config)))
        .clone()
}

/// Records an event when recording is on; the event is only built then (the executor
/// calls this on every write it makes).
pub fn record(verbose: i32, event: impl FnOnce() -> Event) {
    if let Some(a) = DEFAULT.get() {
        a.log(verbose, event());
    }
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
