//! The in-process event bus: when several roles run in one process (`--role=all`), one
//! list+watch per kind and selector feeds them all. The first subscriber starts the shared
//! watch (through the pump, so it is decoded once); every subscriber gets a re-list from the
//! shared cache when it joins, then each change. A subscriber that falls behind (its
//! queue full) does not stall the others or lose state: its queue is not written until it
//! has room for a re-list from the cache, which then replaces what it missed. A selector on
//! one field set once (`metadata.name=…`, `spec.nodeName=…`) is served from the kind's
//! unselected watch, filtered here.
//!
//! Roles do not call the bus: `kernel::pump` subscribes here when the bus is on, so
//! a role's code path is the same with or without it.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kube::Client;
use kube::runtime::watcher;
use tokio::sync::mpsc;

use super::index::Index;
use super::watch::Watchable;

/// Changes queued per subscriber before it counts as behind.
const QUEUE: usize = 4096;

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum Msg<K> {
    Apply(K),
    Delete(K),
    Reset(Vec<K>),
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns the bus on for this process (before the roles start watching).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// (group/kind, namespace, label selector, field selector).
type Key = (String, Option<String>, Option<String>, Option<String>);

fn topics() -> &'static Mutex<HashMap<Key, Box<dyn Any + Send>>> {
    static TOPICS: OnceLock<Mutex<HashMap<Key, Box<dyn Any + Send>>>> = OnceLock::new();
    TOPICS.get_or_init(Default::default)
}

struct Sub<K> {
    tx: mpsc::Sender<Msg<K>>,
    behind: bool,
    /// A field selector served from an unselected watch (`metadata.name=…`,
    /// `spec.nodeName=…`): only matching objects reach this subscriber.
    only: Option<Field>,
}

/// A field selector the bus evaluates itself: one field equal to one value.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    pointer: &'static str,
    value: String,
}

impl Field {
    /// The selectors the bus can serve from the unselected watch of a kind.
    fn parse(selector: &str) -> Option<Field> {
        let (k, v) = selector.split_once('=')?;
        // spec.nodeName only for pods (the one kind that has it).
        let pointer = match k {
            "metadata.name" => "/metadata/name",
            "spec.nodeName" => "/spec/nodeName",
            _ => return None,
        };
        (!v.contains([',', '=', '!'])).then(|| Field {
            pointer,
            value: v.to_string(),
        })
    }

    fn matches<K: Watchable>(&self, o: &K) -> bool {
        // Both fields are set once (a name, a binding), so an object never leaves a
        // selection it was in.
        let v = match self.pointer {
            "/metadata/name" => o.meta().name.as_deref(),
            _ => (o as &dyn Any)
                .downcast_ref::<k8s_openapi::api::core::v1::Pod>()
                .and_then(|p| p.spec.as_ref()?.node_name.as_deref()),
        };
        v == Some(self.value.as_str())
    }
}

fn filtered<K: Watchable>(msg: &Msg<K>, only: &Option<Field>) -> Option<Msg<K>> {
    let Some(f) = only else {
        return Some(msg.clone());
    };
    match msg {
        Msg::Apply(o) | Msg::Delete(o) if !f.matches(o) => None,
        Msg::Reset(all) => Some(Msg::Reset(
            all.iter().filter(|o| f.matches(*o)).cloned().collect(),
        )),
        m => Some(m.clone()),
    }
}

/// One shared watch: its objects (by namespace/name) and its subscribers.
pub struct Topic<K> {
    cache: BTreeMap<String, K>,
    listed: bool,
    subs: Vec<Sub<K>>,
}

impl<K> Default for Topic<K> {
    fn default() -> Self {
        Self {
            cache: BTreeMap::new(),
            listed: false,
            subs: Vec::new(),
        }
    }
}

fn key_of<K: Watchable>(o: &K) -> String {
    let m = o.meta();
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    )
}

impl<K: Watchable> Topic<K> {
    fn snapshot(&self) -> Msg<K> {
        Msg::Reset(self.cache.values().cloned().collect())
    }

    /// Adds a subscriber; it starts from the cache once the first list is in.
    fn join(&mut self, only: Option<Field>) -> mpsc::Receiver<Msg<K>> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let first = self
            .listed
            .then(|| filtered(&self.snapshot(), &only))
            .flatten();
        let behind = first.is_some_and(|m| tx.try_send(m).is_err());
        self.subs.push(Sub { tx, behind, only });
        rx
    }

    /// Sends `msg` to every subscriber that keeps up; one that is behind gets a re-list
    /// instead, once it has room. Gone subscribers are dropped.
    fn publish(&mut self, msg: Msg<K>) {
        let snapshot = self.subs.iter().any(|s| s.behind).then(|| self.snapshot());
        self.subs.retain_mut(|s| {
            let out = if s.behind {
                snapshot.as_ref().unwrap_or(&msg)
            } else {
                &msg
            };
            let Some(out) = filtered(out, &s.only) else {
                return true;
            };
            match s.tx.try_send(out) {
                Ok(()) => {
                    s.behind = false;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    s.behind = true;
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }
}

/// The shared watch's index: keeps the topic's cache and fans changes out.
struct FanOut<K>(Arc<Mutex<Topic<K>>>);

impl<K: Watchable> Index<K> for FanOut<K> {
    fn apply(&mut self, obj: K) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        t.cache.insert(key_of(&obj), obj.clone());
        t.publish(Msg::Apply(obj));
    }

    fn delete(&mut self, obj: K) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        t.cache.remove(&key_of(&obj));
        t.publish(Msg::Delete(obj));
    }

    fn reset(&mut self, objs: Vec<K>) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        t.cache = objs.iter().map(|o| (key_of(o), o.clone())).collect();
        t.listed = true;
        t.publish(Msg::Reset(objs));
    }
}

/// Subscribes to `K` (in `namespace`, with `cfg`'s selectors), starting the shared watch
/// on first use. It runs as long as the process does.
pub fn subscribe<K: Watchable>(
    client: &Client,
    namespace: Option<&str>,
    cfg: &watcher::Config,
) -> mpsc::Receiver<Msg<K>> {
    // A one-field selector is served from the kind's unselected watch.
    let only = cfg
        .label_selector
        .is_none()
        .then(|| {
            cfg.field_selector
                .as_deref()
                .and_then(Field::parse)
                .filter(|f| {
                    f.pointer == "/metadata/name"
                        || std::any::TypeId::of::<K>()
                            == std::any::TypeId::of::<k8s_openapi::api::core::v1::Pod>()
                })
        })
        .flatten();
    let fields = if only.is_some() {
        None
    } else {
        cfg.field_selector.clone()
    };
    let key: Key = (
        format!("{}/{}", K::group(&()), K::kind(&())),
        namespace.map(str::to_string),
        cfg.label_selector.clone(),
        fields,
    );
    let mut all = topics().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = all
        .get(&key)
        .and_then(|b| b.downcast_ref::<Arc<Mutex<Topic<K>>>>())
    {
        tracing::debug!(topic = ?key, "bus: joined a shared watch");
        return t.lock().unwrap_or_else(|p| p.into_inner()).join(only);
    }
    tracing::debug!(topic = ?key, "bus: shared watch started");
    let topic: Arc<Mutex<Topic<K>>> = Arc::default();
    let rx = topic.lock().unwrap_or_else(|p| p.into_inner()).join(only);
    all.insert(key.clone(), Box::new(topic.clone()));
    let mut cfg = cfg.clone();
    cfg.field_selector = key.3.clone();
    let (client, ns) = (client.clone(), namespace.map(str::to_string));
    tokio::spawn(async move {
        let mut index = FanOut(topic);
        super::index::watch_into::<K, _>(
            client,
            ns.as_deref(),
            cfg,
            &mut index,
            std::future::pending(),
        )
        .await;
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, v: &str) -> ConfigMap {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "namespace": "d"},
            "data": {"v": v}}),
        )
        .unwrap()
    }

    fn names(m: &Msg<ConfigMap>) -> Vec<String> {
        match m {
            Msg::Apply(o) | Msg::Delete(o) => vec![o.metadata.name.clone().unwrap()],
            Msg::Reset(all) => all
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect(),
        }
    }

    #[tokio::test]
    async fn late_subscribers_start_from_the_cache_and_laggards_relist() {
        let topic: Arc<Mutex<Topic<ConfigMap>>> = Arc::default();
        let mut fan = FanOut(topic.clone());
        let mut early = topic.lock().unwrap().join(None);
        fan.reset(vec![cm("a", "1")]);
        fan.apply(cm("b", "1"));
        assert_eq!(names(&early.recv().await.unwrap()), ["a"]);
        assert_eq!(names(&early.recv().await.unwrap()), ["b"]);
        // Joining later: the cache as one re-list.
        let mut late = topic.lock().unwrap().join(None);
        assert_eq!(names(&late.recv().await.unwrap()), ["a", "b"]);

        // A subscriber that stops reading falls behind without stalling the others.
        let mut slow = topic.lock().unwrap().join(None);
        for i in 0..QUEUE + 10 {
            fan.apply(cm("c", &i.to_string()));
            let _ = early.try_recv();
            let _ = late.try_recv();
        }
        assert!(topic.lock().unwrap().subs.iter().any(|s| s.behind));
        while slow.try_recv().is_ok() {}
        fan.delete(cm("a", "1"));
        // Its next message is a re-list with everything it missed, the delete included.
        match slow.recv().await.unwrap() {
            Msg::Reset(all) => {
                let n: Vec<_> = all
                    .iter()
                    .map(|o| o.metadata.name.clone().unwrap())
                    .collect();
                assert_eq!(n, ["b", "c"]);
                let c = all
                    .iter()
                    .find(|o| o.metadata.name.as_deref() == Some("c"))
                    .unwrap();
                let last = (QUEUE + 9).to_string();
                assert_eq!(c.data.as_ref().unwrap()["v"], last);
            }
            other => panic!("expected a re-list, got {other:?}"),
        }
        assert!(!topic.lock().unwrap().subs.iter().any(|s| s.behind));
    }

    #[tokio::test]
    async fn one_field_selectors_are_served_from_the_unselected_watch() {
        assert_eq!(
            Field::parse("spec.nodeName=n1").unwrap().pointer,
            "/spec/nodeName"
        );
        assert!(Field::parse("status.phase=Running").is_none());
        assert!(Field::parse("metadata.name=a,metadata.namespace=b").is_none());
        let topic: Arc<Mutex<Topic<ConfigMap>>> = Arc::default();
        let mut fan = FanOut(topic.clone());
        let mut only_b = topic.lock().unwrap().join(Field::parse("metadata.name=b"));
        fan.reset(vec![cm("a", "1"), cm("b", "1")]);
        fan.apply(cm("a", "2"));
        fan.apply(cm("b", "2"));
        assert_eq!(names(&only_b.recv().await.unwrap()), ["b"]);
        match only_b.recv().await.unwrap() {
            Msg::Apply(o) => assert_eq!(o.data.unwrap()["v"], "2"),
            other => panic!("{other:?}"),
        }
        assert!(only_b.try_recv().is_err(), "a's change is not b's");
    }
}
