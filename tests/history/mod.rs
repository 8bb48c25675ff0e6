//! An etcd-style robustness run of the embedded API server: clients create, update and
//! delete (with resourceVersion preconditions), get and list (plain and `Exact`) a few
//! ConfigMaps while watchers follow them, and the `koord --embedded` process is killed
//! with SIGKILL and restarted on the same data directory several times. Every call and
//! every watch event is recorded; [`check::check`] then verifies the history. Shared by
//! the integration test (small) and `benches/history.rs` (bigger).

pub mod check;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use check::{Call, Change, Event, History, Op, Outcome, Segment};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, PostParams, Preconditions, VersionMatch, WatchEvent, WatchParams,
};

const LABEL: &str = "app=history";

/// The size of a run.
#[derive(Clone, Debug)]
pub struct Config {
    pub keys: usize,
    pub clients: usize,
    pub watchers: usize,
    /// Server lifetimes; each but the last ends in SIGKILL.
    pub lives: usize,
    /// How long clients run in each lifetime before the kill (at random in [½, 1]×).
    pub life: Duration,
    /// In each lifetime, the server is also stopped (SIGSTOP) this long and continued
    /// (SIGCONT) halfway, as a long GC pause or a frozen VM would; zero: never.
    pub pause: Duration,
    pub seed: u64,
}

/// What a run did and what the checker found.
pub struct Report {
    pub ops: usize,
    pub acknowledged_writes: usize,
    pub unknown: usize,
    pub events: usize,
    pub relists: usize,
    pub violations: Vec<String>,
}

/// Runs `koord` (`bin`) with its data in `dir`, its API on `api_port` and its admin server
/// on `admin_port`, through `cfg.lives` lifetimes, and checks the history.
pub async fn run(bin: &Path, dir: &Path, api_port: u16, admin_port: u16, cfg: &Config) -> Report {
    let mut server = Server::start(bin, dir, api_port, admin_port);
    let client = server.client(dir).await;
    let rec = Recorder::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..cfg.clients {
        let seed = cfg.seed.wrapping_mul(2 * c as u64 + 1) | 1;
        let w = Worker::new(c, client.clone(), rec.clone(), seed, cfg.keys);
        tasks.push(tokio::spawn(w.run(stop.clone())));
    }
    for w in 0..cfg.watchers {
        tasks.push(tokio::spawn(watcher(
            w,
            client.clone(),
            rec.clone(),
            stop.clone(),
        )));
    }
    let mut rng = cfg.seed | 1;
    for life in 1..cfg.lives {
        let half = cfg.life.as_millis() as u64 / 2;
        let ran = Duration::from_millis(half + xorshift(&mut rng) % half.max(1));
        if cfg.pause.is_zero() {
            tokio::time::sleep(ran).await;
        } else {
            tokio::time::sleep(ran / 2).await;
            server.signal(libc::SIGSTOP);
            tokio::time::sleep(cfg.pause).await;
            server.signal(libc::SIGCONT);
            tokio::time::sleep(ran / 2).await;
        }
        server.kill();
        server = Server::start(bin, dir, api_port, admin_port);
        server.ready(&client, life).await;
    }
    tokio::time::sleep(cfg.life / 2).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    // A last read of everything after the clients stopped: every acknowledged write shows.
    Worker::new(usize::MAX, client, rec.clone(), 1, cfg.keys)
        .list()
        .await;
    drop(server);
    rec.report()
}

/// The `koord --embedded` process of one lifetime; SIGKILLed on drop (a stopped one too).
struct Server(Child);

impl Server {
    fn start(bin: &Path, dir: &Path, api_port: u16, admin_port: u16) -> Server {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("history-koord.log"))
            .unwrap();
        let child = Command::new(bin)
            .args(["--embedded", "--embedded-addr"])
            .arg(format!("127.0.0.1:{api_port}"))
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin_port}"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .env("HOME", dir)
            .env("KOORD_EMBEDDED__REGISTER_LOCAL_NODE", "false")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start koord");
        Server(child)
    }

    fn kubeconfig(dir: &Path) -> PathBuf {
        dir.join("data").join("kubeconfig")
    }

    async fn client(&self, dir: &Path) -> kube::Client {
        let path = Self::kubeconfig(dir);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !path.exists() {
            assert!(Instant::now() < deadline, "no kubeconfig: {}", log(dir));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = koord::kernel::cluster::from_kubeconfig(&path)
            .await
            .unwrap()
            .client;
        self.ready(&client, 0).await;
        client
    }

    async fn ready(&self, client: &kube::Client, life: usize) {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let deadline = Instant::now() + Duration::from_secs(60);
        while cms.list(&ListParams::default().limit(1)).await.is_err() {
            assert!(Instant::now() < deadline, "lifetime {life}: API not ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
        unsafe { libc::kill(self.0.id() as i32, sig) };
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("history-koord.log")).unwrap_or_default()
}

#[derive(Clone, Default)]
struct Recorder {
    ops: Arc<Mutex<Vec<Op>>>,
    segments: Arc<Mutex<Vec<Segment>>>,
    relists: Arc<AtomicU64>,
}

impl Recorder {
    fn op(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }

    fn report(&self) -> Report {
        let h = History {
            ops: std::mem::take(&mut *self.ops.lock().unwrap()),
            segments: std::mem::take(&mut *self.segments.lock().unwrap()),
        };
        let violations = check::check(&h);
        let count = |f: fn(&Outcome) -> bool| h.ops.iter().filter(|o| f(&o.outcome)).count();
        Report {
            ops: h.ops.len(),
            acknowledged_writes: count(|o| matches!(o, Outcome::Wrote(_) | Outcome::Deleted)),
            unknown: count(|o| matches!(o, Outcome::Unknown)),
            events: h.segments.iter().map(|s| s.events.len()).sum(),
            relists: self.relists.load(Ordering::SeqCst) as usize,
            violations,
        }
    }
}

/// One client: a random mix of the calls, each recorded with when it started and ended.
struct Worker {
    id: usize,
    cms: Api<ConfigMap>,
    rec: Recorder,
    rng: u64,
    keys: usize,
    seq: u64,
    lists: Vec<u64>,
}

impl Worker {
    fn new(id: usize, client: kube::Client, rec: Recorder, rng: u64, keys: usize) -> Worker {
        let cms = Api::namespaced(client, "default");
        let (seq, lists) = (0, Vec::new());
        Worker {
            id,
            cms,
            rec,
            rng,
            keys,
            seq,
            lists,
        }
    }

    async fn run(mut self, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            let key = format!("h-{}", xorshift(&mut self.rng) % self.keys as u64);
            let unknown = match xorshift(&mut self.rng) % 20 {
                0..=3 => self.create(&key).await,
                4..=9 => self.update(&key).await,
                10..=12 => self.delete(&key).await,
                13..=16 => self.get(&key).await.is_err(),
                17..=18 => self.list().await,
                _ => self.list_exact().await,
            };
            if unknown {
                // The server is down: do not spin while it restarts.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    fn value(&mut self) -> String {
        self.seq += 1;
        format!("c{}-{}", self.id, self.seq)
    }

    fn record(&self, call: Call, outcome: Outcome, invoked: Instant) -> bool {
        let unknown = matches!(outcome, Outcome::Unknown);
        let returned = Instant::now();
        let client = self.id;
        self.rec.op(Op {
            client,
            call,
            outcome,
            invoked,
            returned,
        });
        unknown
    }

    async fn create(&mut self, key: &str) -> bool {
        let value = self.value();
        let at = Instant::now();
        let got = self
            .cms
            .create(&PostParams::default(), &object(key, &value, None))
            .await;
        let outcome = written(got);
        self.record(
            Call::Create {
                key: key.into(),
                value,
            },
            outcome,
            at,
        )
    }

    async fn update(&mut self, key: &str) -> bool {
        let Ok(Some((_, from))) = self.get(key).await else {
            return false;
        };
        let value = self.value();
        let at = Instant::now();
        let cm = object(key, &value, Some(from));
        let got = self.cms.replace(key, &PostParams::default(), &cm).await;
        let outcome = written(got);
        self.record(
            Call::Update {
                key: key.into(),
                value,
                from,
            },
            outcome,
            at,
        )
    }

    async fn delete(&mut self, key: &str) -> bool {
        let Ok(Some((_, from))) = self.get(key).await else {
            return false;
        };
        let at = Instant::now();
        let pre = Preconditions {
            resource_version: Some(from.to_string()),
            uid: None,
        };
        let dp = DeleteParams {
            preconditions: Some(pre),
            ..Default::default()
        };
        let outcome = match self.cms.delete(key, &dp).await {
            Ok(_) => Outcome::Deleted,
            Err(e) => failed(&e),
        };
        self.record(
            Call::Delete {
                key: key.into(),
                from,
            },
            outcome,
            at,
        )
    }

    /// The value and version read; `Err` when no answer came.
    async fn get(&mut self, key: &str) -> Result<Option<(String, u64)>, ()> {
        let at = Instant::now();
        let outcome = match self.cms.get_opt(key).await {
            Ok(cm) => Outcome::Got(cm.map(|c| (value_of(&c), rv_of(&c)))),
            Err(e) => failed(&e),
        };
        let seen = match &outcome {
            Outcome::Got(g) => Ok(g.clone()),
            _ => Err(()),
        };
        self.record(Call::Get { key: key.into() }, outcome, at);
        seen
    }

    async fn list(&mut self) -> bool {
        let at = Instant::now();
        let outcome = listed(self.cms.list(&ListParams::default().labels(LABEL)).await);
        if let Outcome::Listed { rv, .. } = &outcome {
            self.lists.push(*rv);
        }
        self.record(Call::List, outcome, at)
    }

    /// A list at the revision of one of this client's earlier lists.
    async fn list_exact(&mut self) -> bool {
        if self.lists.is_empty() {
            return self.list().await;
        }
        let pick = self.lists[xorshift(&mut self.rng) as usize % self.lists.len()];
        let lp = ListParams::default()
            .labels(LABEL)
            .at(&pick.to_string())
            .matching(VersionMatch::Exact);
        let at = Instant::now();
        let outcome = listed(self.cms.list(&lp).await);
        self.record(Call::ListExact { at: pick }, outcome, at)
    }
}

fn object(key: &str, value: &str, rv: Option<u64>) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": key, "labels": {"app": "history"},
            "resourceVersion": rv.map(|r| r.to_string())},
        "data": {"v": value},
    }))
    .unwrap()
}

fn value_of(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

fn rv_of(cm: &ConfigMap) -> u64 {
    let rv = cm.metadata.resource_version.as_deref().unwrap_or_default();
    rv.parse()
        .unwrap_or_else(|_| panic!("resourceVersion {rv:?} is not a number"))
}

/// A 4xx changed nothing (409 conflict, 404, 429 before it ran); anything else may have.
fn failed(e: &kube::Error) -> Outcome {
    match e {
        kube::Error::Api(s) if s.code == 410 => Outcome::Gone,
        kube::Error::Api(s) if (400..500).contains(&s.code) => Outcome::Refused,
        _ => Outcome::Unknown,
    }
}

fn written(got: Result<ConfigMap, kube::Error>) -> Outcome {
    match got {
        Ok(cm) => Outcome::Wrote(rv_of(&cm)),
        Err(e) => failed(&e),
    }
}

fn listed(got: Result<kube::api::ObjectList<ConfigMap>, kube::Error>) -> Outcome {
    match got {
        Ok(list) => {
            let rv = list
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default();
            let items: BTreeMap<_, _> = list
                .items
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap_or_default(),
                        (value_of(c), rv_of(c)),
                    )
                })
                .collect();
            Outcome::Listed {
                rv: rv.parse().unwrap_or(0),
                items,
            }
        }
        Err(e) => failed(&e),
    }
}

/// Lists, then watches from the list's revision; when the stream ends it resumes from the
/// last event's revision, and on 410 it lists again (a new segment).
async fn watcher(id: usize, client: kube::Client, rec: Recorder, stop: Arc<AtomicBool>) {
    let mut w = Worker::new(1000 + id, client, rec.clone(), 1, 1);
    while !stop.load(Ordering::SeqCst) {
        w.list().await;
        let Some(&from) = w.lists.last() else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut seg = Segment {
            watcher: id,
            from,
            events: Vec::new(),
        };
        follow(&w.cms, &mut seg, &stop).await;
        rec.segments.lock().unwrap().push(seg);
        rec.relists.fetch_add(1, Ordering::SeqCst);
        w.lists.clear();
    }
}

/// Follows one segment until a 410 or the stop flag.
async fn follow(cms: &Api<ConfigMap>, seg: &mut Segment, stop: &AtomicBool) {
    let wp = WatchParams::default().labels(LABEL).timeout(30);
    while !stop.load(Ordering::SeqCst) {
        let rv = seg.events.last().map_or(seg.from, |e| e.rv).to_string();
        let mut stream = match cms.watch(&wp, &rv).await {
            Ok(s) => s.boxed(),
            Err(kube::Error::Api(s)) if s.code == 410 => return,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let next = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
            let event = match next {
                Err(_) => continue,
                Ok(None) | Ok(Some(Err(_))) => break,
                Ok(Some(Ok(e))) => e,
            };
            let (cm, change) = match event {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    let v = value_of(&cm);
                    (cm, Change::Put(v))
                }
                WatchEvent::Deleted(cm) => (cm, Change::Delete),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(s) if s.code == 410 => return,
                WatchEvent::Error(_) => break,
            };
            let key = cm.metadata.name.clone().unwrap_or_default();
            seg.events.push(Event {
                key,
                change,
                rv: rv_of(&cm),
            });
        }
    }
}

pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
