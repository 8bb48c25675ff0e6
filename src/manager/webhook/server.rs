//! The HTTPS endpoint (`/healthz`, `/elasticQuota` debug view, and one POST path per
//! webhook) and the loop that keeps certificates and webhook configurations current.

use crate::manager::features;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::certs::{self, Served};
use super::lookup::Live;
use super::{Config, Handlers, configs, endpoint};
use crate::kernel::http::{self, Body, TlsSource};
use crate::kernel::{Shutdown, Tasks, tls};
use crate::manager::cache::{Caches, Dirty, reflect};
use crate::manager::features::Gates;
use crate::manager::sloconfig_watch::ConfigRx;

/// Kubernetes caps admission request bodies well below this.
const MAX_BODY: usize = 8 << 20;

/// Routes one HTTP request.
pub async fn route(h: Arc<Handlers>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/healthz") => http::text(StatusCode::OK, "ok"),
        (&Method::GET, "/elasticQuota") => {
            let topo = serde_json::to_value(h.quota_topology()).unwrap_or_default();
            http::json(StatusCode::OK, &topo)
        }
        (&Method::POST, _) => {
            let body = match http::read_body(req.into_body(), MAX_BODY).await {
                Ok(b) => b,
                Err(e) => {
                    return http::json(
                        StatusCode::BAD_REQUEST,
                        &serde_json::json!({"error": e.to_string()}),
                    );
                }
            };
            let (code, value) = h.serve_async(&path, &body).await;
            http::json(StatusCode::from_u16(code).unwrap_or(StatusCode::OK), &value)
        }
        _ => http::text(
            StatusCode::NOT_FOUND,
            format!("no webhook is served at {path}"),
        ),
    }
}

/// Everything the webhook server needs from the manager.
pub struct Start {
    pub client: kube::Client,
    pub cfg: Config,
    /// Only the leader writes the webhook configurations (replicas calling themselves by
    /// URL would rewrite each other's address).
    pub leadership: crate::kernel::lease::Leadership,
    pub gates: Gates,
    pub caches: Caches,
    pub slo: ConfigRx,
    /// (namespace, name) of slo-controller-config.
    pub slo_config: (String, String),
    pub binding_decisions: super::BindingDecisions,
    /// What RBAC lets the manager do of its optional requests.
    pub granted: crate::kernel::access::Granted,
}

fn tls_of(s: &Served) -> Result<Arc<rustls::ServerConfig>, tls::TlsError> {
    tls::server_config(s.cert_pem.as_bytes(), s.key_pem.as_bytes())
}

/// Certificates first (retrying until they exist), then caches, then serve; returns once
/// serving (or when the process drains first).
pub async fn start(mut s: Start, tasks: &Tasks, shutdown: &Shutdown) -> anyhow::Result<()> {
    let embedded =
        s.cfg.host.is_empty() && crate::kernel::cluster::is_koord_embedded(&s.client).await;
    if embedded && s.cfg.bind_address.is_unspecified() {
        // The embedded API server is on this machine: serve on loopback only.
        s.cfg.bind_address = std::net::Ipv4Addr::LOCALHOST.into();
    }
    let addr = SocketAddr::new(s.cfg.bind_address, s.cfg.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("manager.webhook: binding {addr}: {e}"))?;
    // Port 0 takes a free one; the configurations register the one taken.
    let addr = listener.local_addr().unwrap_or(addr);
    s.cfg.port = addr.port();
    let dirty = Arc::new(Dirty::default());
    let live = Live {
        profiles: reflect(
            s.client.clone(),
            "clustercolocationprofiles",
            |_| None,
            &dirty,
            tasks,
            shutdown,
        ),
        namespaces: reflect(
            s.client.clone(),
            "namespaces",
            |_| None,
            &dirty,
            tasks,
            shutdown,
        ),
        priority_classes: reflect(
            s.client.clone(),
            "priorityclasses",
            |_| None,
            &dirty,
            tasks,
            shutdown,
        ),
        quotas: reflect(
            s.client.clone(),
            "elasticquotas",
            |_| None,
            &dirty,
            tasks,
            shutdown,
        ),
        pods: s.caches.pods.clone(),
        nodes: s.caches.nodes.clone(),
        slo: s.slo.clone(),
        quota_profiles: s.gates.on(features::MULTI_QUOTA_TREE).then(|| {
            reflect(
                s.client.clone(),
                "elasticquotaprofiles",
                |_| None,
                &dirty,
                tasks,
                shutdown,
            )
        }),
    };
    let served = loop {
        match certs::ensure(&s.cfg, &s.client).await {
            Ok(c) => break c,
            Err(e) => tracing::warn!(error = %e, "webhook certificates not ready; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = shutdown.draining() => return Ok(()),
        }
    };
    let source: TlsSource = Arc::new(RwLock::new(tls_of(&served)?));
    let synced = async {
        let _ = live.profiles.wait_until_ready().await;
        let _ = live.namespaces.wait_until_ready().await;
        let _ = live.priority_classes.wait_until_ready().await;
        let _ = live.quotas.wait_until_ready().await;
    };
    tokio::select! {
        _ = synced => {}
        _ = shutdown.draining() => return Ok(()),
    }
    let mut handlers = Handlers::new(s.gates, Arc::new(live), s.slo_config);
    handlers.binding = s.cfg.binding_admission.clone();
    handlers.binding_decisions = Some(s.binding_decisions.clone());
    if handlers.gates.on(features::ENABLE_QUOTA_ADMISSION) {
        handlers.quota_admission = Some(super::quota::admission::Evaluator::new(s.client.clone()));
    }
    if handlers.gates.on(features::ENABLE_POD_ENHANCED_VALIDATOR) {
        let ns = handlers.slo_config.0.clone();
        let shared = handlers.enhanced.clone();
        super::enhanced::spawn_watch(s.client.clone(), ns, shared, tasks, shutdown);
    }
    let handlers = Arc::new(handlers);
    let enabled = handlers.enabled_paths();
    let stop = shutdown.drain_token();
    let h = handlers.clone();
    let tls_source = source.clone();
    tasks.spawn("manager/webhook/server", async move {
        http::serve_tls(listener, tls_source, move |req| route(h.clone(), req), stop).await?;
        Ok(())
    });
    tracing::info!(%addr, paths = ?enabled, "webhook server listening");
    let may = |n: &crate::kernel::access::Need| {
        n.verbs
            .iter()
            .all(|v| s.granted.allows(v, n.group, n.resources[0]))
    };
    let publish = embedded && super::super::access::WEBHOOK_ENDPOINTS.iter().all(may);
    if publish {
        tracing::info!(%addr, "koord's embedded API server: serving as an endpoint of Service {}/{}", s.cfg.namespace, s.cfg.service_name);
    }
    let sync = Resync {
        client: s.client,
        cfg: s.cfg,
        leadership: s.leadership,
        enabled,
        endpoint: publish.then_some(addr),
        create_configurations: may(&super::super::access::WEBHOOK_CONFIGURATIONS),
    };
    let shutdown2 = shutdown.clone();
    tasks.spawn("manager/webhook/resync", async move {
        sync.run(served, source, shutdown2).await;
        Ok(())
    });
    Ok(())
}

struct Resync {
    client: kube::Client,
    cfg: Config,
    leadership: crate::kernel::lease::Leadership,
    enabled: Vec<&'static str>,
    /// On koord's embedded API server: this replica's address, published as an endpoint
    /// of the webhook Service.
    endpoint: Option<SocketAddr>,
    /// RBAC lets it create and delete the configurations (the chart's does not: it
    /// creates them itself, and the manager only updates them).
    create_configurations: bool,
}

impl Resync {
    /// Re-checks certificates (reloading changed ones) and, as leader, re-asserts the
    /// configurations; on the way out removes those that call this manager by URL.
    async fn run(mut self, mut served: Served, source: TlsSource, shutdown: Shutdown) {
        let period = Duration::from_secs(self.cfg.resync_seconds);
        let mut wrote = false;
        let mut said_missing = false;
        loop {
            self.publish().await;
            if self.leadership.is_leader() {
                let ca = served.ca_pem.as_deref();
                let create = self.create_configurations;
                match configs::ensure(&self.client, &self.cfg, ca, &self.enabled, create).await {
                    Ok(()) => wrote = true,
                    // Said once: it stays so until someone creates the configuration.
                    Err(e @ configs::ConfigsError::Missing { .. }) if !said_missing => {
                        tracing::warn!(error = %e, "webhook configuration not written");
                        said_missing = true;
                    }
                    Err(configs::ConfigsError::Missing { .. }) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook configurations not updated; retrying")
                    }
                }
            }
            // One receiver for the whole loop: a fresh clone would report the same change
            // again at once, and the loop would spin.
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = self.leadership.changed() => {}
                _ = shutdown.draining() => break,
            }
            self.reload(&mut served, &source).await;
        }
        // The last endpoint of the Service takes the configurations with it whether or not
        // it wrote them (nothing is left to answer them); by URL, only the one that wrote.
        let last = self.withdraw().await;
        if (wrote || last)
            && self.create_configurations
            && let Err(e) = configs::remove_own(&self.client, &self.cfg, last).await
        {
            tracing::warn!(error = %e, "removing the webhook configurations");
        }
    }

    /// Publishes this replica's endpoint and removes those of replicas that are gone.
    async fn publish(&self) {
        let Some(addr) = self.endpoint else {
            return;
        };
        if let Err(e) = endpoint::publish(&self.client, &self.cfg, addr).await {
            tracing::warn!(error = %e, "publishing the webhook endpoint; retrying");
        }
        if let Err(e) = endpoint::prune(&self.client, &self.cfg, addr).await {
            tracing::warn!(error = %e, "removing stale webhook endpoints");
        }
    }

    /// Withdraws this replica's endpoint; whether it was the Service's last.
    async fn withdraw(&self) -> bool {
        let Some(addr) = self.endpoint else {
            return false;
        };
        if let Err(e) = endpoint::withdraw(&self.client, &self.cfg, addr).await {
            tracing::warn!(error = %e, "withdrawing the webhook endpoint");
        }
        let _ = endpoint::prune(&self.client, &self.cfg, addr).await;
        endpoint::remaining(&self.client, &self.cfg).await == Some(0)
    }

    async fn reload(&self, served: &mut Served, source: &TlsSource) {
        match certs::ensure(&self.cfg, &self.client).await {
            Ok(now) if now != *served => match tls_of(&now) {
                Ok(tls) => {
                    *source.write().unwrap_or_else(|p| p.into_inner()) = tls;
                    tracing::info!("webhook certificate reloaded");
                    *served = now;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "new webhook certificate rejected; keeping the old one")
                }
            },
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "checking webhook certificates"),
        }
    }
}
