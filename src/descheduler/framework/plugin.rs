//! The plugin interface the framework runs, kube-descheduler's: a plugin sees the pass
//! ([`Env`]: its profile's nodes with their pods, the node-fit check) and asks the profile's
//! evictor ([`Act`]) as its source asks its handle. Which plugins exist is not the
//! framework's business: a [`Registry`] builds them by name (the descheduler's own is
//! `descheduler::plugins::registry`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use super::action::Action;
use super::fit::NodeFit;
use super::metric::MetricView;
use super::podview::PodView;
use crate::api::field::FieldError;

/// A node with its NodeMetric and its pods.
pub struct NodeInput {
    pub node: Arc<Node>,
    pub metric: Option<Arc<MetricView>>,
    pub pods: Vec<Arc<PodView>>,
}

/// How the pass saw one node (`koord explain deschedule`'s `nodes`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub node: String,
    /// `high`, `low`, `normal` or `unknown`.
    pub class: &'static str,
    /// `prodHigh` or `prodLow` when its prod usage makes it a prod source or target.
    pub prod_class: Option<&'static str>,
    /// Percent of allocatable.
    pub usage: BTreeMap<String, f64>,
    pub low: BTreeMap<String, f64>,
    pub high: BTreeMap<String, f64>,
    /// Consecutive abnormal passes, with an anomaly condition above 1.
    pub abnormal: Option<u32>,
    /// Why the node is `unknown`.
    pub reason: Option<String>,
}

/// What a plugin sees of the pass: its nodes with their pods, and the node-fit check.
pub struct Env<'a, 'f> {
    pub inputs: &'a [NodeInput],
    pub fit: &'a NodeFit<'f>,
    pub now_ms: i64,
}

/// The profile's evictor as a plugin calls it (upstream's `handle.Evictor()`).
pub trait Act {
    /// The Filter plugins (non-retryable checks); `record`: a refusal is reported as a skip
    /// (off while a plugin only lists the pods it may take).
    fn filter(&mut self, p: &PodView, record: bool) -> bool;
    /// The PreEvictionFilter plugins (DefaultEvictor's `nodeFit`).
    fn pre_evict(&mut self, p: &PodView, record: bool) -> bool;
    /// The limits, then the Evict plugin; whether the pod counts as evicted.
    fn evict(&mut self, p: &Arc<PodView>, reason: &str) -> bool;
    /// A change besides an eviction (cordon a node, annotate a pod).
    fn plan(&mut self, action: Action, reason: &str);
    /// How a load-balancing plugin saw a node (the first report of a node in a pass wins).
    fn report_node(&mut self, report: NodeReport);
}

/// A Deschedule or Balance plugin, built from its args.
pub trait Plugin: Send + Sync {
    /// The name the configuration gives it (`LowNodeLoad`, `RemoveDuplicates`, ...).
    fn name(&self) -> &'static str;
    /// One run at its extension point.
    fn run(&mut self, env: &Env, act: &mut dyn Act);
}

/// Builds a plugin from its name and args (`Value::Null`: the defaults); `interval` is the
/// descheduling interval, which LowNodeLoad's detector cache must outlast.
pub type Registry =
    fn(name: &str, args: &Value, interval: Duration) -> Result<Box<dyn Plugin>, FieldError>;
