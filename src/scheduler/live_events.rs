//! Cluster events into the queue through the plugins' queueing hints: an unschedulable
//! pod moves back only when a plugin that rejected it says the change may let it fit.

use std::time::Instant;

use super::Scheduler;
use crate::scheduler::framework::events::{ClusterEvent, Events};

impl Scheduler {
    /// `ev` happened (and is applied to the cluster): the unschedulable pods it may help
    /// go back to the queue.
    pub(super) fn cluster_changed(&mut self, ev: ClusterEvent) {
        let frameworks = self.frameworks.clone();
        let cluster = &self.cluster;
        let ev = ev.resolved(cluster);
        self.queue
            .on_event(Instant::now(), ev.kind, |pod, plugins| {
                let name = crate::scheduler::model::transform::scheduler_name(&pod.pod);
                match frameworks.iter().find(|f| f.scheduler_name == name) {
                    Some(fw) => fw.may_help(plugins, pod, &ev, cluster),
                    None => true,
                }
            });
    }

    /// A pod that held room on a node (bound, assumed or nominated) is gone or no longer
    /// counts; a pending one that held none went away (a gang's member, say).
    /// `quota`: the ElasticQuota it was charged to.
    pub(super) fn pod_left(&mut self, node: Option<String>, quota: Option<String>) {
        let ev = match node {
            Some(n) => ClusterEvent::on_node(Events::POD_ASSIGNED_DELETE, &n),
            None => ClusterEvent::of(Events::POD_GROUP),
        };
        self.cluster_changed(ev.with_quota(quota));
    }

    /// The events that may let a pod fit which `plugins` of profile `fi` rejected.
    pub(super) fn note_hint(&mut self, fi: usize, key: &str, plugins: &[&'static str]) {
        let events = self.frameworks[fi].events_of(plugins);
        self.queue.set_hint(key, events);
    }
}

impl Scheduler {
    /// The GPU shared-resource templates ConfigMap changed: DeviceShare reads the new
    /// templates (an unreadable one is logged and the last good ones kept, as Koordinator's
    /// cache does).
    pub(super) fn apply_gpu_templates(
        &mut self,
        ev: kube::runtime::watcher::Event<k8s_openapi::api::core::v1::ConfigMap>,
    ) {
        use crate::scheduler::model::gpu_templates::GpuTemplates;
        use kube::runtime::watcher::Event::*;
        let templates = match ev {
            Apply(cm) | InitApply(cm) => match GpuTemplates::from_config_map(&cm) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, "GPU shared-resource templates not read; the last ones stay");
                    return;
                }
            },
            Delete(_) => GpuTemplates::default(),
            Init | InitDone => return,
        };
        if *self.cluster.gpu_templates != templates {
            self.cluster.gpu_templates = std::sync::Arc::new(templates);
            self.cluster_changed(ClusterEvent::of(Events::DEVICE));
        }
    }
}
