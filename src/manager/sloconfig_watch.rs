//! Watches `slo-controller-config`: every change is parsed (keeping the last good value of
//! a broken key), published to the controllers, and every parse error becomes a Warning
//! Event on the ConfigMap and a metric. Deleting the ConfigMap is ignored, as in
//! Koordinator; a ConfigMap that never existed means defaults (colocation off).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::runtime::watcher;
use tokio::sync::watch;

use super::cache::Dirty;
use super::metrics::{KeyLabels, ManagerMetrics};
use crate::api::sloconfig::{KeyError, SloConfig};
use crate::kernel::lease::Leadership;
use crate::kernel::{Shutdown, Tasks, events};

pub struct Watch {
    pub client: kube::Client,
    pub namespace: String,
    pub name: String,
    pub dirty: Arc<Dirty>,
    pub leadership: Leadership,
    pub metrics: Arc<ManagerMetrics>,
}

/// `None` until the first list finished.
pub type ConfigRx = watch::Receiver<Option<Arc<SloConfig>>>;

pub fn start(w: Watch, tasks: &Tasks, shutdown: &Shutdown) -> ConfigRx {
    let (tx, rx) = watch::channel(None);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", w.name));
    // The pump owns the watch; events come here, where applying them may await.
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let index =
        crate::kernel::pump::forward(move |e: watcher::Event<ConfigMap>| events_tx.send(e).is_ok());
    let ns = Some(w.namespace.clone());
    crate::kernel::pump::spawn::<ConfigMap, _>(
        tasks,
        "manager/slo-config/watch",
        w.client.clone(),
        ns,
        cfg,
        index,
        shutdown,
    );
    let shutdown = shutdown.clone();
    tasks.spawn("manager/slo-config", async move {
        let mut last_data: Option<BTreeMap<String, String>> = None;
        let mut seen_in_init = false;
        loop {
            let ev = tokio::select! {
                _ = shutdown.draining() => break,
                ev = events.recv() => ev,
            };
            match ev {
                Some(watcher::Event::Init) => seen_in_init = false,
                Some(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm)) => {
                    seen_in_init = true;
                    let data = cm.data.clone().unwrap_or_default();
                    if last_data.as_ref() != Some(&data) || tx.borrow().is_none() {
                        w.apply(&tx, Some(&cm), &data).await;
                        last_data = Some(data);
                    }
                }
                Some(watcher::Event::InitDone) if !seen_in_init && tx.borrow().is_none() => {
                    tx.send_replace(Some(Arc::new(SloConfig::default())));
                    w.dirty.mark_all();
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok(())
    });
    rx
}

impl Watch {
    async fn apply(
        &self,
        tx: &watch::Sender<Option<Arc<SloConfig>>>,
        cm: Option<&ConfigMap>,
        data: &BTreeMap<String, String>,
    ) {
        let previous = tx.borrow().clone().unwrap_or_default();
        let (cfg, errors) = SloConfig::parse(Some(data), &previous);
        for e in &errors {
            tracing::warn!(configmap = %format!("{}/{}", self.namespace, self.name), key = e.key, error = %e.message, "slo-controller-config key rejected; keeping the last good value");
            self.metrics
                .config_errors
                .get_or_create(&KeyLabels {
                    key: e.key.to_string(),
                })
                .inc();
            if let Some(cm) = cm
                && self.leadership.is_leader()
            {
                self.warn(cm, e).await;
            }
        }
        if *previous != cfg || tx.borrow().is_none() {
            tx.send_replace(Some(Arc::new(cfg)));
            self.dirty.mark_all();
        }
    }

    async fn warn(&self, cm: &ConfigMap, e: &KeyError) {
        let involved = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            uid: cm.metadata.uid.clone(),
            resource_version: cm.metadata.resource_version.clone(),
            ..Default::default()
        };
        let message = format!(
            "failed to parse {}: {}; keeping the last good value",
            e.key, e.message
        );
        let event = events::event(
            "koord-manager",
            None,
            involved,
            &self.namespace,
            "Warning",
            e.reason,
            message,
        );
        let ok = events::record(&self.client, &event).await;
        self.metrics.wrote("event", ok);
    }
}
