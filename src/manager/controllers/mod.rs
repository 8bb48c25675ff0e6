//! The SLO controllers: one level-triggered loop over the nodes whose inputs changed
//! (plus a periodic full pass), run only by the leader. Each node's NodeMetric, NodeSLO
//! and extended resources are decided by pure functions, then written.

pub mod colocationprofile;
pub mod nodemetric;
pub mod noderesource;
pub mod nodeslo;
pub mod quotaprofile;
pub mod select;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::cache::{Caches, Dirty};
use super::metrics::{ControllerLabels, ManagerMetrics};
use super::sloconfig_watch::ConfigRx;
use crate::api::slo::{NodeMetric, NodeSLO};
use crate::api::sloconfig::SloConfig;
use crate::kernel::Shutdown;
use crate::kernel::lease::Leadership;

pub struct Controllers {
    pub client: kube::Client,
    pub caches: Caches,
    pub config: ConfigRx,
    pub leadership: Leadership,
    pub metrics: Arc<ManagerMetrics>,
    pub dirty: Arc<Dirty>,
    pub resync: Duration,
    pub last_sync: Mutex<HashMap<String, i64>>,
    /// Failed writes in a row per node, for the retry delay.
    pub failures: Mutex<HashMap<String, u32>>,
    /// Gate `EnableSyncGPUSharedResource`: nodes advertise `koordinator.sh/gpu.shared`.
    pub sync_gpu_shared: bool,
    /// Counts the loop's wake-ups (`koord_loop_iterations_total{name="manager"}`).
    pub wakeups: prometheus_client::metrics::counter::Counter,
    /// Which of the loop's controllers run (`--controllers`).
    pub run: select::Selection,
}

/// One write the pass decided on.
#[derive(Debug)]
enum Write {
    CreateMetric(Box<NodeMetric>),
    PatchMetric(String, serde_json::Value),
    DeleteMetric(String),
    CreateSlo(Box<NodeSLO>),
    PatchSlo(String, serde_json::Value),
    DeleteSlo(String),
    NodeStatus(String, serde_json::Value),
    NodeMeta(String, serde_json::Value),
    /// A NodeResourceTopology's zones, as read at a resourceVersion (a newer one: conflict,
    /// decided again on the next pass).
    NrtZones(String, Option<String>, Vec<crate::api::topology::Zone>),
}

/// A write's node, controller and result.
type Written = (String, &'static str, Result<(), kube::Error>);

impl Write {
    /// Koordinator's reason for the step in its `*_reconcile_count` series.
    fn reason(&self) -> &'static str {
        match self {
            Write::CreateMetric(_) => "createNodeMetric",
            Write::PatchMetric(..) => "updateNodeMetric",
            Write::DeleteMetric(_) => "deleteNodeMetric",
            Write::CreateSlo(_) => "createNodeSLO",
            Write::PatchSlo(..) => "updateNodeSLO",
            Write::DeleteSlo(_) => "deleteNodeSLO",
            Write::NodeStatus(..) => "updateNodeStatus",
            Write::NodeMeta(..) => "updateNodeMeta",
            Write::NrtZones(..) => "updateNodeResourceTopology",
        }
    }
}

/// A JSON patch that replaces the whole spec, so fields that became unset disappear.
fn replace_spec(spec: &impl serde::Serialize) -> serde_json::Value {
    serde_json::json!([{"op": "add", "path": "/spec", "value": spec}])
}

fn json_patch(v: serde_json::Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(v).unwrap_or_else(|_| json_patch::Patch(Vec::new())))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Controllers {
    pub async fn run(mut self, shutdown: &Shutdown) {
        let mut tick = tokio::time::interval(self.resync);
        loop {
            self.wakeups.inc();
            tokio::select! {
                _ = shutdown.draining() => return,
                _ = self.dirty.notify.notified() => {}
                _ = tick.tick() => self.dirty.mark_all(),
                _ = self.leadership.changed() => {
                    self.metrics.is_leader.set(self.leadership.is_leader() as i64);
                    self.dirty.mark_all();
                }
            }
            // Coalesce bursts of watch events into one pass.
            tokio::time::sleep(Duration::from_millis(50)).await;
            if !self.leadership.is_leader() {
                continue;
            }
            let Some(cfg) = self.config.borrow().clone() else {
                continue;
            };
            let targets = self.dirty.take();
            self.pass(&cfg, targets.as_ref()).await;
        }
    }

    async fn pass(&self, cfg: &SloConfig, targets: Option<&HashSet<String>>) {
        let started = Instant::now();
        let now = now_ms();
        let nodes: Vec<Arc<Node>> = self
            .caches
            .nodes
            .state()
            .into_iter()
            .filter(|n| targets.is_none_or(|t| t.contains(&n.name_any())))
            .collect();
        let node_names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        let mut pods: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        for p in self.caches.pods.state() {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_ref())
                && node_names.contains(n)
            {
                pods.entry(n.clone()).or_default().push(p);
            }
        }
        let mut writes = Vec::new();
        for node in &nodes {
            let name = node.name_any();
            let node_pods: Vec<&Pod> = pods
                .get(&name)
                .into_iter()
                .flatten()
                .map(|p| p.as_ref())
                .collect();
            self.plan_node(cfg, node, &node_pods, now, &mut writes);
        }
        self.plan_orphans(targets, &mut writes);
        let label = ControllerLabels {
            controller: "slo".into(),
        };
        self.execute(writes, now).await;
        self.metrics
            .reconcile_seconds
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
    }

    fn plan_node(
        &self,
        cfg: &SloConfig,
        node: &Node,
        pods: &[&Pod],
        now: i64,
        out: &mut Vec<Write>,
    ) {
        let name = node.name_any();
        let metric = self.caches.metrics.get(&ObjectRef::new(&name));
        if self.run.nodemetric {
            let metric_spec = nodemetric::desired_spec(cfg, node);
            match &metric {
                None => out.push(Write::CreateMetric(Box::new(NodeMetric::new(
                    &name,
                    metric_spec,
                )))),
                Some(m) if m.spec != metric_spec && !cfg.missing => {
                    out.push(Write::PatchMetric(name.clone(), replace_spec(&metric_spec)))
                }
                Some(_) => {}
            }
        }
        if self.run.nodeslo {
            let slo_spec = nodeslo::desired_spec(cfg, node);
            match self.caches.slos.get(&ObjectRef::new(&name)) {
                None => out.push(Write::CreateSlo(Box::new(NodeSLO::new(&name, slo_spec)))),
                Some(s) if s.spec != slo_spec => {
                    out.push(Write::PatchSlo(name.clone(), replace_spec(&slo_spec)))
                }
                Some(_) => {}
            }
        }
        if !self.run.noderesource {
            return;
        }
        let last = self.lock_sync().get(&name).copied();
        let device = self.caches.devices.get(&ObjectRef::new(&name));
        let devices = noderesource::DeviceInputs {
            device: device.as_deref(),
            sync_gpu_shared: self.sync_gpu_shared,
        };
        let nrt = self.caches.topologies.get(&ObjectRef::new(&name));
        let plan = noderesource::plan(
            node,
            pods,
            metric.as_deref(),
            &devices,
            nrt.as_deref(),
            cfg,
            now,
            last,
        );
        for r in noderesource::prepare::MANAGED {
            let v = plan.want.get(r).copied();
            self.metrics.set_node_resource(&name, r, v);
        }
        // Koordinator's calculate plugins; a degraded node (no fresh NodeMetric) is reset.
        let stage = if plan.calc.degraded {
            "ResourceReset"
        } else {
            "ResourceCalculate"
        };
        for plugin in ["BatchResource", "MidResource"] {
            self.metrics.plugin_ran(plugin, true, stage);
        }
        if device.is_some() {
            self.metrics
                .plugin_ran("GPUDeviceResource", true, "ResourceCalculate");
        }
        if let Some(p) = plan.status {
            out.push(Write::NodeStatus(name.clone(), p));
        }
        if let Some((rv, zones)) = plan.nrt_zones {
            out.push(Write::NrtZones(name.clone(), rv, zones));
        }
        if let Some(p) = plan.meta {
            out.push(Write::NodeMeta(name, p));
        }
    }

    /// NodeMetrics and NodeSLOs whose node is gone.
    fn plan_orphans(&self, targets: Option<&HashSet<String>>, out: &mut Vec<Write>) {
        let exists = |n: &str| self.caches.nodes.get(&ObjectRef::new(n)).is_some();
        let concerned = |n: &str| targets.is_none_or(|t| t.contains(n));
        for m in self.caches.metrics.state() {
            let n = m.name_any();
            if self.run.nodemetric && concerned(&n) && !exists(&n) {
                out.push(Write::DeleteMetric(n));
            }
        }
        for s in self.caches.slos.state() {
            let n = s.name_any();
            if self.run.nodeslo && concerned(&n) && !exists(&n) {
                out.push(Write::DeleteSlo(n));
            }
        }
    }

    fn lock_failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A node whose write failed is decided again after a delay that doubles with each
    /// failure in a row (1 s up to the resync period), not on the next pass 50 ms later: a
    /// write the API server keeps refusing (RBAC, a webhook down) was retried twenty times
    /// a second.
    fn retry_later(&self, node: &str) {
        let in_a_row = {
            let mut f = self.lock_failures();
            let n = f.entry(node.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let delay = Duration::from_secs(1 << (in_a_row - 1).min(10)).min(self.resync);
        let (dirty, node) = (self.dirty.clone(), node.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            dirty.mark(&node);
        });
    }

    fn lock_sync(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.last_sync.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn execute(&self, writes: Vec<Write>, now: i64) {
        let results: Vec<(&'static str, Written)> = futures::stream::iter(writes)
            .map(|w| async move { (w.reason(), self.write(w).await) })
            .buffer_unordered(16)
            .collect()
            .await;
        for (reason, (node, controller, r)) in results {
            self.metrics.reconciled(controller, r.is_ok(), reason);
            match r {
                Ok(()) => {
                    self.lock_failures().remove(&node);
                    if controller == "noderesource" {
                        self.lock_sync().insert(node.clone(), now);
                    }
                    self.metrics.wrote(controller, true);
                }
                // Our cache had not seen an object we or an earlier leader created.
                Err(kube::Error::Api(e))
                    if e.code == 409 && !controller.starts_with("noderesource") => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(%node, controller, error = %e, "write failed; retrying on the next pass");
                    self.metrics.wrote(controller, false);
                    self.retry_later(&node);
                }
            }
        }
    }

    async fn write(&self, w: Write) -> Written {
        let metrics: Api<NodeMetric> = Api::all(self.client.clone());
        let slos: Api<NodeSLO> = Api::all(self.client.clone());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let pp = PostParams::default();
        let patch = PatchParams::default();
        let dp = DeleteParams::default();
        match w {
            Write::CreateMetric(m) => (
                m.name_any(),
                "nodemetric",
                metrics.create(&pp, m.as_ref()).await.map(drop),
            ),
            Write::PatchMetric(n, p) => {
                let r = metrics.patch(&n, &patch, &json_patch(p)).await.map(drop);
                (n, "nodemetric", r)
            }
            Write::DeleteMetric(n) => {
                let r = metrics.delete(&n, &dp).await.map(drop);
                (n, "nodemetric", r)
            }
            Write::CreateSlo(s) => (
                s.name_any(),
                "nodeslo",
                slos.create(&pp, s.as_ref()).await.map(drop),
            ),
            Write::PatchSlo(n, p) => {
                let r = slos.patch(&n, &patch, &json_patch(p)).await.map(drop);
                (n, "nodeslo", r)
            }
            Write::DeleteSlo(n) => {
                let r = slos.delete(&n, &dp).await.map(drop);
                (n, "nodeslo", r)
            }
            Write::NodeStatus(n, p) => {
                crate::kernel::fault::point("manager.before-node-status");
                let r = nodes
                    .patch_status(&n, &patch, &Patch::Merge(p))
                    .await
                    .map(drop);
                (n, "noderesource", r)
            }
            Write::NodeMeta(n, p) => {
                let r = nodes.patch(&n, &patch, &Patch::Merge(p)).await.map(drop);
                (n, "noderesource-meta", r)
            }
            Write::NrtZones(n, rv, zones) => {
                let nrts: Api<crate::api::topology::NodeResourceTopology> =
                    Api::all(self.client.clone());
                let body = serde_json::json!({"metadata": {"resourceVersion": rv}, "zones": zones});
                let r = nrts.patch(&n, &patch, &Patch::Merge(body)).await.map(drop);
                (n, "noderesource-nrt", r)
            }
        }
    }
}
