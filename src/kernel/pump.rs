//! The one watch pump every role watches through: `K`'s changes into an [`Index`] until
//! the process drains. With the in-process bus on (several roles in one process) the
//! changes come from the shared watch ([`super::bus`]); otherwise from the role's own
//! ([`super::index::watch_into`]). Either way a re-list arrives as one `reset`.

use std::future::Future;

use kube::Client;
use kube::runtime::watcher;

use super::bus::{self, Msg};
pub use super::index::{Forward, Index, Reflect, forward, reflect};
use super::watch::Watchable;
use super::{Shutdown, Tasks};

/// Runs `K`'s changes (in `namespace`, or all, with `cfg`'s selectors) into `index` until
/// `stop` resolves, the watch ends or the index is closed.
pub async fn pump<K, I>(
    client: Client,
    namespace: Option<&str>,
    cfg: watcher::Config,
    index: &mut I,
    stop: impl Future<Output = ()>,
) where
    K: Watchable,
    I: Index<K>,
{
    if !bus::enabled() {
        return super::index::watch_into::<K, I>(client, namespace, cfg, index, stop).await;
    }
    let mut rx = bus::subscribe::<K>(&client, namespace, &cfg);
    let mut stop = std::pin::pin!(stop);
    loop {
        let msg = tokio::select! {
            _ = &mut stop => return,
            m = rx.recv() => m,
        };
        match msg {
            None => return,
            Some(Msg::Apply(o)) => index.apply(o),
            Some(Msg::Delete(o)) => index.delete(o),
            Some(Msg::Reset(all)) => index.reset(all),
        }
        if index.closed() {
            return;
        }
    }
}

/// [`pump`] as a tracked task that stops when the process drains.
pub fn spawn<K, I>(
    tasks: &Tasks,
    name: impl Into<String>,
    client: Client,
    namespace: Option<String>,
    cfg: watcher::Config,
    mut index: I,
    shutdown: &Shutdown,
) where
    K: Watchable,
    I: Index<K> + Send + 'static,
{
    let shutdown = shutdown.clone();
    tasks.spawn(name, async move {
        pump::<K, I>(
            client,
            namespace.as_deref(),
            cfg,
            &mut index,
            shutdown.draining(),
        )
        .await;
        Ok(())
    });
}
