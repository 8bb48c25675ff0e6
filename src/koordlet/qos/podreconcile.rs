//! The per-pod reconciler BatchResource and CPUNormalization share: every second, each
//! pod's cgroups get what the strategy's pure `updates` function wants.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::context::{QosCtx, record};
use super::executor::Executor;
use super::runner::{Round, Strategy};
use crate::koordlet::informer::States;

/// What a per-pod reconciler wants written for one pod (levels: pod, then containers).
type PodUpdates =
    fn(&States, &crate::koordlet::informer::PodMeta) -> Vec<Vec<super::executor::Update>>;

/// Every second, writes what `updates` wants for each pod.
pub struct Reconcile {
    pub ex: Arc<Executor>,
    pub name: &'static str,
    pub updates: PodUpdates,
}

impl Strategy for Reconcile {
    fn name(&self) -> &'static str {
        self.name
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        for pod in states.pods.iter() {
            let results = self.ex.leveled(&(self.updates)(states, pod));
            record(ctx, self.name, &pod.name, results);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}
