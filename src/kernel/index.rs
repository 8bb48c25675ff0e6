//! What a watch keeps up to date ([`Index`]: apply, delete, reset), the two indexes every
//! role uses (a kube reflector store, a forwarder), and the direct watch loop behind
//! [`super::pump`] and [`super::bus`]: the kind's watch ([`super::watch::watch`]: per-object
//! decoding, decode failures counted on `/metrics`, kube's backoff), watch errors logged the
//! same way for every role, a re-list handed over as one `reset`.

use std::future::Future;

use futures::StreamExt;
use kube::Client;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;

use super::watch::{DecodeErrors, Watchable, watch};

/// What a watch keeps up to date.
pub trait Index<K> {
    /// An object was added or changed.
    fn apply(&mut self, obj: K);
    /// An object went.
    fn delete(&mut self, obj: K);
    /// A (re)list: these objects are all there is.
    fn reset(&mut self, objs: Vec<K>);
    /// Whether a (re)list is handed over object by object (`relist_begin`, `relist_item`,
    /// `relist_end`) instead of as one `reset`: an index that keeps a slim view of each
    /// object never holds the whole decoded list (10,000 pods were ~90 MiB at once).
    fn streams_relist(&self) -> bool {
        false
    }
    fn relist_begin(&mut self) {}
    fn relist_item(&mut self, _obj: K) {}
    fn relist_end(&mut self) {}
    /// Whoever reads the index is gone: the pump stops.
    fn closed(&self) -> bool {
        false
    }
}

/// Runs `K`'s own watch (in `namespace`, or all, with `cfg`) into `index` until `stop`
/// resolves, the stream ends or the index is closed.
pub async fn watch_into<K, I>(
    client: Client,
    namespace: Option<&str>,
    cfg: watcher::Config,
    index: &mut I,
    stop: impl Future<Output = ()>,
) where
    K: Watchable,
    I: Index<K>,
{
    let what = K::kind(&()).to_string();
    let stream = watch::<K>(client, namespace, cfg, DecodeErrors::default());
    let mut stream = std::pin::pin!(stream);
    let mut stop = std::pin::pin!(stop);
    let mut listing: Vec<K> = Vec::new();
    loop {
        let ev = tokio::select! {
            _ = &mut stop => return,
            ev = stream.next() => ev,
        };
        match ev {
            None => return,
            Some(Err(e)) => tracing::debug!(kind = %what, error = %e, "watch error; retrying"),
            Some(Ok(watcher::Event::Init)) if index.streams_relist() => index.relist_begin(),
            Some(Ok(watcher::Event::InitApply(o))) if index.streams_relist() => {
                index.relist_item(o)
            }
            Some(Ok(watcher::Event::InitDone)) if index.streams_relist() => index.relist_end(),
            Some(Ok(watcher::Event::Init)) => listing.clear(),
            Some(Ok(watcher::Event::InitApply(o))) => listing.push(o),
            Some(Ok(watcher::Event::InitDone)) => index.reset(std::mem::take(&mut listing)),
            Some(Ok(watcher::Event::Apply(o))) => index.apply(o),
            Some(Ok(watcher::Event::Delete(o))) => index.delete(o),
        }
        if index.closed() {
            return;
        }
    }
}

/// A kube reflector store kept by the pump; `changed` hears of every change (`None`: all
/// was re-listed).
pub struct Reflect<K: Watchable, F> {
    writer: reflector::store::Writer<K>,
    changed: F,
}

/// A store and the index that keeps it.
pub fn reflect<K, F>(changed: F) -> (Store<K>, Reflect<K, F>)
where
    K: Watchable,
    F: FnMut(Option<&K>) + Send + 'static,
{
    let (reader, writer) = reflector::store();
    (reader, Reflect { writer, changed })
}

impl<K, F> Index<K> for Reflect<K, F>
where
    K: Watchable,
    F: FnMut(Option<&K>),
{
    fn apply(&mut self, obj: K) {
        let ev = watcher::Event::Apply(obj);
        self.writer.apply_watcher_event(&ev);
        if let watcher::Event::Apply(o) = &ev {
            (self.changed)(Some(o));
        }
    }

    fn delete(&mut self, obj: K) {
        let ev = watcher::Event::Delete(obj);
        self.writer.apply_watcher_event(&ev);
        if let watcher::Event::Delete(o) = &ev {
            (self.changed)(Some(o));
        }
    }

    fn reset(&mut self, objs: Vec<K>) {
        self.writer.apply_watcher_event(&watcher::Event::Init);
        for o in objs {
            self.writer
                .apply_watcher_event(&watcher::Event::InitApply(o));
        }
        self.writer.apply_watcher_event(&watcher::Event::InitDone);
        (self.changed)(None);
    }
}

/// Hands every change to `f` as a watch event (a re-list as `Init`, `InitApply`…,
/// `InitDone`); `f` answers false once its receiver is gone.
pub struct Forward<F> {
    f: F,
    open: bool,
}

pub fn forward<K, F>(f: F) -> Forward<F>
where
    F: FnMut(watcher::Event<K>) -> bool,
{
    Forward { f, open: true }
}

impl<K, F> Index<K> for Forward<F>
where
    F: FnMut(watcher::Event<K>) -> bool,
{
    fn apply(&mut self, obj: K) {
        self.open &= (self.f)(watcher::Event::Apply(obj));
    }

    fn delete(&mut self, obj: K) {
        self.open &= (self.f)(watcher::Event::Delete(obj));
    }

    fn reset(&mut self, objs: Vec<K>) {
        self.relist_begin();
        for o in objs {
            self.relist_item(o);
        }
        self.relist_end();
    }

    fn streams_relist(&self) -> bool {
        true
    }

    fn relist_begin(&mut self) {
        self.open &= (self.f)(watcher::Event::Init);
    }

    fn relist_item(&mut self, obj: K) {
        self.open &= (self.f)(watcher::Event::InitApply(obj));
    }

    fn relist_end(&mut self) {
        self.open &= (self.f)(watcher::Event::InitDone);
    }

    fn closed(&self) -> bool {
        !self.open
    }
}
