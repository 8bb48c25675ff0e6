//! Kubernetes' protobuf messages, from the descriptor set `build.rs` compiles, indexed by
//! the apiVersion and kind they encode. Loaded on the first protobuf request only: a
//! server whose clients all speak JSON never pays for it.

use std::collections::HashMap;
use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/k8s.fds"));

pub struct Kube {
    pub pool: DescriptorPool,
    /// (group's first label or "core", version, kind) → message.
    kinds: HashMap<(String, String, String), MessageDescriptor>,
}

pub fn kube() -> &'static Kube {
    static POOL: OnceLock<Kube> = OnceLock::new();
    POOL.get_or_init(|| {
        // The set is built into the binary by build.rs; failing to decode it is a build defect.
        let pool = DescriptorPool::decode(DESCRIPTORS).expect("embedded Kubernetes descriptors");
        let mut kinds = HashMap::new();
        for m in pool.all_messages() {
            let mut parts = m.package_name().rsplit('.');
            let (Some(version), Some(label)) = (parts.next(), parts.next()) else {
                continue;
            };
            kinds.insert((label.into(), version.into(), m.name().into()), m.clone());
        }
        Kube { pool, kinds }
    })
}

/// `core/v1` packages are named after the group's first DNS label (`rbac` for
/// `rbac.authorization.k8s.io`), the core group after "core".
fn label(group: &str) -> &str {
    if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    }
}

impl Kube {
    pub fn message(&self, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.kinds
            .get(&(label(group).into(), version.into(), kind.into()))
            .cloned()
    }

    pub fn named(&self, full_name: &str) -> MessageDescriptor {
        self.pool
            .get_message_by_name(full_name)
            .unwrap_or_else(|| panic!("embedded descriptors lack {full_name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_resolve_by_api_version() {
        let k = kube();
        assert_eq!(
            k.message("v1", "Pod").unwrap().full_name(),
            "api.core.v1.Pod"
        );
        assert_eq!(
            k.message("apps/v1", "Deployment").unwrap().full_name(),
            "api.apps.v1.Deployment"
        );
        assert_eq!(
            k.message("rbac.authorization.k8s.io/v1", "ClusterRole")
                .unwrap()
                .full_name(),
            "api.rbac.v1.ClusterRole"
        );
        assert!(k.message("meta.k8s.io/v1", "Status").is_some());
        assert!(
            k.message("slo.koordinator.sh/v1alpha1", "NodeSLO")
                .is_none()
        );
    }
}
