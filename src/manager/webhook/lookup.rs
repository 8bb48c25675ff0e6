//! What the webhook handlers read besides the request: warm caches in the live manager
//! (reflectors, shared with the SLO controllers where they overlap), fixed lists in tests
//! and benchmarks. Handlers never call the API server, so admission stays in-memory fast.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::config::ClusterColocationProfile;
use crate::api::quota::{ElasticQuota, ElasticQuotaProfile};
use crate::api::sloconfig::SloConfig;
use crate::manager::sloconfig_watch::ConfigRx;

pub trait Lookup: Send + Sync {
    fn profiles(&self) -> Vec<Arc<ClusterColocationProfile>>;
    /// Labels of a namespace; `None` when the namespace is unknown.
    fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>>;
    fn priority_class(&self, name: &str) -> Option<Arc<PriorityClass>>;
    fn quotas(&self) -> Vec<Arc<ElasticQuota>>;
    fn pods(&self) -> Vec<Arc<Pod>>;
    fn nodes(&self) -> Vec<Arc<Node>>;
    /// The parsed slo-controller-config the manager runs with.
    fn slo_config(&self) -> Option<Arc<SloConfig>>;
    /// ElasticQuotaProfiles (watched only with the `MultiQuotaTree` gate).
    fn quota_profiles(&self) -> Vec<Arc<ElasticQuotaProfile>>;
}

/// Reflector-backed caches of the running manager.
pub struct Live {
    pub profiles: Store<ClusterColocationProfile>,
    pub namespaces: Store<Namespace>,
    pub priority_classes: Store<PriorityClass>,
    pub quotas: Store<ElasticQuota>,
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub slo: ConfigRx,
    pub quota_profiles: Option<Store<ElasticQuotaProfile>>,
}

impl Lookup for Live {
    fn profiles(&self) -> Vec<Arc<ClusterColocationProfile>> {
        self.profiles.state()
    }
    fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(name))
            .map(|n| n.metadata.labels.clone().unwrap_or_default())
    }
    fn priority_class(&self, name: &str) -> Option<Arc<PriorityClass>> {
        self.priority_classes.get(&ObjectRef::new(name))
    }
    fn quotas(&self) -> Vec<Arc<ElasticQuota>> {
        self.quotas.state()
    }
    fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods.state()
    }
    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }
    fn slo_config(&self) -> Option<Arc<SloConfig>> {
        self.slo.borrow().clone()
    }
    fn quota_profiles(&self) -> Vec<Arc<ElasticQuotaProfile>> {
        self.quota_profiles
            .as_ref()
            .map(|s| s.state())
            .unwrap_or_default()
    }
}

/// Fixed objects: unit tests, property tests, benchmarks, `koord explain`-style runs.
#[derive(Default, Clone)]
pub struct Fixed {
    pub profiles: Vec<Arc<ClusterColocationProfile>>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub priority_classes: Vec<Arc<PriorityClass>>,
    pub quotas: Vec<Arc<ElasticQuota>>,
    pub pods: Vec<Arc<Pod>>,
    pub nodes: Vec<Arc<Node>>,
    pub slo: Option<Arc<SloConfig>>,
    pub quota_profiles: Vec<Arc<ElasticQuotaProfile>>,
}

impl Fixed {
    /// Koordinator's four priority classes, as the embedded API server creates them.
    pub fn with_koord_priority_classes(mut self) -> Self {
        for class in crate::api::extension::priority::PriorityClass::ALL {
            let (name, value) = (class.name(), class.object_value());
            let mut pc = PriorityClass {
                value,
                preemption_policy: Some("PreemptLowerPriority".into()),
                ..Default::default()
            };
            pc.metadata.name = Some(name.into());
            self.priority_classes.push(Arc::new(pc));
        }
        self
    }
}

impl Lookup for Fixed {
    fn profiles(&self) -> Vec<Arc<ClusterColocationProfile>> {
        self.profiles.clone()
    }
    fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(name).cloned()
    }
    fn priority_class(&self, name: &str) -> Option<Arc<PriorityClass>> {
        self.priority_classes
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .cloned()
    }
    fn quotas(&self) -> Vec<Arc<ElasticQuota>> {
        self.quotas.clone()
    }
    fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods.clone()
    }
    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.clone()
    }
    fn slo_config(&self) -> Option<Arc<SloConfig>> {
        self.slo.clone()
    }
    fn quota_profiles(&self) -> Vec<Arc<ElasticQuotaProfile>> {
        self.quota_profiles.clone()
    }
}
