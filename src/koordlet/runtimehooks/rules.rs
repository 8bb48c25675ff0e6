//! What the koordlet's runtime hooks decide for a pod or container, from the pod and the
//! node state (Koordinator's `pkg/koordlet/runtimehooks/hooks/{batchresource,cpuset,
//! groupidentity}`):
//! - BatchResource: a BE container's cpu.shares, CFS quota and memory limit come from its
//!   `kubernetes.io/batch-cpu` / `batch-memory` requests and limits.
//! - CPUSetAllocator: see `cpuset` (pinned CPUs, NUMA-aware pools, SYSTEM, LS pools, an
//!   empty cpuset for BestEffort, nothing under the kubelet's static policy).
//! - GroupIdentity: the pod cgroup's `cpu.bvt_warp_ns` for its QoS class from the NodeSLO's
//!   `cpuQOS.groupIdentity` (only where the NodeSLO enables cpuQOS for the class).

use k8s_openapi::api::core::v1::Pod;

use crate::api::extension::priority::pod_hook_qos_class;
use crate::api::extension::qos::{KubeQoS, QoSClass, kube_qos, pod_qos_class};
use crate::api::extension::resourcestatus::pinned_cpus as pinned;
use crate::api::slo::nodeslo::{ResourceQOS, ResourceQOSStrategy};
use crate::koordlet::informer::States;
use crate::koordlet::qos::batchresource::{container_values, normalization_ratio};
use crate::os::Resource;

use super::cpuset::CpusetRule;
pub use super::cpuset::NodeCpus;

/// Which hooks run (their feature gates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub batch_resource: bool,
    pub cpuset: bool,
    pub group_identity: bool,
    pub gpu_env_inject: bool,
    pub rdma_device_inject: bool,
    /// CPUSetAllocator lifts the CFS quota of pods pinned to CPUs (off with
    /// `--disable-unset-cpu-quota`, Koordinator's flag).
    pub unset_cpu_quota: bool,
    /// The BECPUManager gate: NUMA-aware BE pods get their nodes' BE share pools.
    pub be_cpu_manager: bool,
}

impl Rules {
    /// Every hook off (tests and reconcilers name the ones they run).
    pub const OFF: Rules = Rules {
        batch_resource: false,
        cpuset: false,
        group_identity: false,
        gpu_env_inject: false,
        rdma_device_inject: false,
        unset_cpu_quota: false,
        be_cpu_manager: false,
    };
}

/// Values for a container; `None` leaves the runtime's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerValues {
    pub cpu_shares: Option<i64>,
    pub cfs_quota: Option<i64>,
    pub memory_limit: Option<i64>,
    pub cpuset: Option<String>,
}

impl Rules {
    pub fn container(
        &self,
        pod: &Pod,
        container: &str,
        states: &States,
        cpus: &NodeCpus,
    ) -> ContainerValues {
        let mut out = ContainerValues::default();
        if self.batch_resource {
            Rules::batch(pod, container, states, &mut out);
        }
        if self.cpuset {
            out.cpuset = CpusetRule::from_node(states, cpus, self.be_cpu_manager)
                .container_cpuset(pod)
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "CPUSetAllocator: cpuset left as it is");
                    None
                });
        }
        if self.unsets_quota(pod) {
            out.cfs_quota = Some(-1);
        }
        out
    }

    /// CPUSetAllocator's quota lifting (Koordinator's `IsPodCfsQuotaNeedUnset`): a pod the
    /// scheduler pinned to CPUs (`resource-status` cpuset) runs without a CFS quota, pod
    /// and containers — its CPUs are its own.
    pub fn unsets_quota(&self, pod: &Pod) -> bool {
        self.cpuset && self.unset_cpu_quota && !pinned(pod).is_empty()
    }

    /// BatchResource: a BE container's cpu.shares, CFS quota and memory limit. BE is the
    /// label's (or the batch priority band's, `pod_hook_qos_class`): an unlabeled pod keeps
    /// the kubelet's values.
    pub fn batch(pod: &Pod, container: &str, states: &States, out: &mut ContainerValues) {
        let spec = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == container));
        let Some(c) = spec.filter(|_| pod_hook_qos_class(pod) == QoSClass::Be) else {
            return;
        };
        let ratio = normalization_ratio(states.node.as_deref());
        for (r, v) in container_values(c, ratio) {
            match r {
                Resource::CpuShares => out.cpu_shares = Some(v),
                Resource::CfsQuota => out.cfs_quota = Some(v),
                Resource::MemoryLimit => out.memory_limit = Some(v),
                _ => {}
            }
        }
    }

    /// GPUEnvInject: `NVIDIA_VISIBLE_DEVICES` from the GPUs the scheduler allocated
    /// (`scheduling.koordinator.sh/device-allocated`, `{"gpu": [{"minor": 0}, …]}`).
    pub fn gpu_env(
        &self,
        pod_annotations: &std::collections::HashMap<String, String>,
    ) -> Option<(String, String)> {
        if !self.gpu_env_inject {
            return None;
        }
        let raw = pod_annotations.get(crate::api::extension::keys::ANNOTATION_DEVICE_ALLOCATED)?;
        let v: serde_json::Value = serde_json::from_str(raw).ok()?;
        let minors: Vec<String> = v
            .get("gpu")?
            .as_array()?
            .iter()
            .filter_map(|d| d.get("minor")?.as_i64().map(|m| m.to_string()))
            .collect();
        (!minors.is_empty()).then(|| ("NVIDIA_VISIBLE_DEVICES".to_string(), minors.join(",")))
    }

    /// `cpu.bvt_warp_ns` for the pod's cgroup once a NodeSLO is known: its class's
    /// `groupIdentity` where cpuQOS is on under the groupIdentity policy, else 0 (a reset,
    /// as Koordinator: switching cpuQOS off or to coreSched must undo earlier values).
    pub fn bvt(&self, pod_qos: QoSClass, states: &States) -> Option<i64> {
        match pod_qos {
            QoSClass::Lsr | QoSClass::Lse => self.class_bvt(states, |q| &q.lsr_class),
            QoSClass::Ls => self.class_bvt(states, |q| &q.ls_class),
            QoSClass::Be => self.class_bvt(states, |q| &q.be_class),
            _ => None,
        }
    }

    /// `cpu.bvt_warp_ns` for a kube QoS directory (Koordinator's `kubeQOSDirParams`):
    /// `besteffort` the BE class's, `burstable` the LS class's, the guaranteed root 0.
    pub fn kube_qos_dir_bvt(&self, kube: KubeQoS, states: &States) -> Option<i64> {
        match kube {
            KubeQoS::BestEffort => self.class_bvt(states, |q| &q.be_class),
            KubeQoS::Burstable => self.class_bvt(states, |q| &q.ls_class),
            KubeQoS::Guaranteed => (self.group_identity && states.node_slo.is_some()).then_some(0),
        }
    }

    /// The pod cgroup's `cpu.bvt_warp_ns` as Koordinator's GroupIdentity hook picks it: the
    /// label's class (LSE, LSR, LS, BE); any other pod by its Kubernetes QoS — BestEffort
    /// as BE, Burstable as LS, Guaranteed as LSR where LSR's cpuQOS is on, else as LS
    /// where LS's is, else 0.
    pub fn pod_bvt(&self, pod: &Pod, states: &States) -> Option<i64> {
        fn lsr(q: &ResourceQOSStrategy) -> &Option<ResourceQOS> {
            &q.lsr_class
        }
        fn ls(q: &ResourceQOSStrategy) -> &Option<ResourceQOS> {
            &q.ls_class
        }
        match pod_qos_class(pod) {
            c @ (QoSClass::Lse | QoSClass::Lsr | QoSClass::Ls | QoSClass::Be) => {
                self.bvt(c, states)
            }
            _ => match kube_qos(pod) {
                KubeQoS::BestEffort => self.bvt(QoSClass::Be, states),
                KubeQoS::Burstable => self.bvt(QoSClass::Ls, states),
                KubeQoS::Guaranteed if self.class_on(states, lsr) => self.class_bvt(states, lsr),
                KubeQoS::Guaranteed if self.class_on(states, ls) => self.class_bvt(states, ls),
                KubeQoS::Guaranteed => {
                    (self.group_identity && states.node_slo.is_some()).then_some(0)
                }
            },
        }
    }

    /// A class's cpuQOS is on under the groupIdentity policy.
    fn class_on(
        &self,
        states: &States,
        class: impl Fn(&ResourceQOSStrategy) -> &Option<ResourceQOS>,
    ) -> bool {
        let q = &states.slo().resource_qos;
        let policy = q.policies.as_ref().and_then(|p| p.cpu_policy.as_deref());
        let on = matches!(policy, None | Some("") | Some("groupIdentity"));
        let cfg = class(q).as_ref().and_then(|c| c.cpu_qos.as_ref());
        on && cfg.is_some_and(|c| c.enable == Some(true))
    }

    /// A class's `groupIdentity` where its cpuQOS is on under the groupIdentity policy,
    /// else 0; `None` without the gate or a NodeSLO.
    fn class_bvt(
        &self,
        states: &States,
        class: impl Fn(&ResourceQOSStrategy) -> &Option<ResourceQOS> + Copy,
    ) -> Option<i64> {
        if !self.group_identity {
            return None;
        }
        states.node_slo.as_ref()?;
        if !self.class_on(states, class) {
            return Some(0);
        }
        let cfg = class(&states.slo().resource_qos).as_ref();
        let cpu = cfg.and_then(|c| c.cpu_qos.as_ref());
        Some(cpu.and_then(|c| c.cpu_qos.group_identity).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::koordlet::informer::PodMeta;
    use crate::os::{Cgroups, Driver, Version};
    use serde_json::json;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn pod(
        uid: &str,
        qos: &str,
        annotations: serde_json::Value,
        resources: serde_json::Value,
    ) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "namespace": "d", "uid": uid,
                         "labels": {"koordinator.sh/qosClass": qos}, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": resources}]}}))
        .unwrap()
    }

    fn states(pods: Vec<Pod>) -> States {
        let cg = Cgroups::new("/r", Version::V1, Driver::Cgroupfs, "");
        States {
            pods: Arc::new(
                pods.into_iter()
                    .filter_map(|p| PodMeta::new(p, &cg))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    const ALL: Rules = Rules {
        batch_resource: true,
        cpuset: true,
        group_identity: true,

        gpu_env_inject: true,

        rdma_device_inject: true,

        be_cpu_manager: false,
        unset_cpu_quota: true,
    };

    #[test]
    fn be_containers_get_batch_values_and_keep_their_parents_cpus() {
        let lse = pod(
            "lse",
            "LSE",
            json!({"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"0-1\"}"}),
            json!({}),
        );
        let lsr = pod(
            "lsr",
            "LSR",
            json!({"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"2\"}"}),
            json!({}),
        );
        let be = pod(
            "be",
            "BE",
            json!({}),
            json!({
            "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"},
            "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "512Mi"}}),
        );
        let s = states(vec![lse.clone(), lsr.clone(), be.clone()]);
        let online = NodeCpus::online(&[0, 1, 2, 3]);
        let v = ALL.container(&be, "c", &s, &online);
        assert_eq!(v.cpu_shares, Some(512));
        assert_eq!(v.cfs_quota, Some(100_000));
        assert_eq!(v.memory_limit, Some(512 << 20));
        assert_eq!(
            v.cpuset.as_deref(),
            Some(""),
            "a BestEffort container keeps its parent's CPUs (cpusuppress's besteffort directory)"
        );
        let ls = pod("ls", "LS", json!({}), json!({}));
        assert_eq!(
            ALL.container(&ls, "c", &s, &online).cpuset.as_deref(),
            Some("3")
        );
        assert_eq!(
            ALL.container(&lse, "c", &s, &online).cpuset.as_deref(),
            Some("0-1")
        );
        // CPUSetAllocator lifts a pinned pod's CFS quota unless --disable-unset-cpu-quota.
        assert_eq!(ALL.container(&lsr, "c", &s, &online).cfs_quota, Some(-1));
        assert_eq!(ALL.container(&ls, "c", &s, &online).cfs_quota, None);
        let keep = Rules {
            unset_cpu_quota: false,
            ..ALL
        };
        assert_eq!(keep.container(&lsr, "c", &s, &online).cfs_quota, None);
        assert_eq!(
            ALL.container(&ls, "c", &s, &online).cpu_shares,
            None,
            "LS keeps the kubelet's values"
        );
        let off = Rules {
            batch_resource: false,
            cpuset: false,
            group_identity: false,

            gpu_env_inject: false,

            rdma_device_inject: false,

            be_cpu_manager: false,
            unset_cpu_quota: false,
        };
        assert_eq!(
            off.container(&be, "c", &s, &online),
            ContainerValues::default()
        );
    }

    #[test]
    fn an_unlabeled_pod_keeps_the_kubelets_values_at_its_first_hook() {
        use crate::kernel::hookproto::{
            ContainerMetadata, ContainerResourceHookRequest, PodSandboxMetadata,
        };
        // A Burstable pod (900m / 1 CPU) the informer has not seen yet: the hook request
        // carries its meta and cgroup parent only.
        let req = ContainerResourceHookRequest {
            pod_meta: Some(PodSandboxMetadata {
                name: "web".into(),
                namespace: "d".into(),
                uid: "u-web".into(),
                attempt: 0,
            }),
            container_meta: Some(ContainerMetadata {
                name: "c".into(),
                ..Default::default()
            }),
            pod_cgroup_parent: "/kubepods/burstable/podu-web".into(),
            ..Default::default()
        };
        let pod = super::super::request::container_pod(&req, None).unwrap();
        let s = states(vec![]);
        let online = NodeCpus::online(&[0, 1]);
        let v = ALL.container(&pod, "c", &s, &online);
        assert_eq!(
            (v.cpu_shares, v.cfs_quota, v.memory_limit),
            (None, None, None),
            "not BE: no batch values (was cpu.shares 2)"
        );
        assert_eq!(
            v.cpuset.as_deref(),
            Some("0-1"),
            "the share pool, not BestEffort's empty set"
        );
        // The same pod in the koord-batch band is BE once the informer knows its priority.
        let mut known = pod.clone();
        known.spec.as_mut().unwrap().priority = Some(5500);
        let v = ALL.container(&known, "c", &s, &online);
        assert_eq!(v.cpu_shares, Some(2), "BE without batch requests");
    }

    /// A NodeSLO with LS (2) and BE (-1) group identity on, LSR's cpuQOS off.
    fn group_identity_states() -> States {
        let slo: crate::api::slo::NodeSLO =
            serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"resourceQOSStrategy": {
                "lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}},
                "beClass": {"cpuQOS": {"enable": true, "groupIdentity": -1}},
                "lsrClass": {"cpuQOS": {"enable": false, "groupIdentity": 2}}}}}))
            .unwrap();
        States {
            node_slo: Some(Arc::new(slo)),
            ..Default::default()
        }
    }

    #[test]
    fn pod_bvt_follows_the_label_then_the_kube_qos() {
        let s = group_identity_states();
        let with = |labels: serde_json::Value, qos: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels},
                "status": {"qosClass": qos}}))
            .unwrap()
        };
        let cases = [
            (
                json!({"koordinator.sh/qosClass": "BE"}),
                "Guaranteed",
                Some(-1),
            ),
            (json!({}), "BestEffort", Some(-1)),
            (json!({}), "Burstable", Some(2)),
            (json!({}), "Guaranteed", Some(2)),
            (
                json!({"koordinator.sh/qosClass": "SYSTEM"}),
                "Burstable",
                Some(2),
            ),
        ];
        for (labels, qos, want) in cases {
            assert_eq!(
                ALL.pod_bvt(&with(labels.clone(), qos), &s),
                want,
                "{labels} {qos}"
            );
        }
    }

    #[test]
    fn share_pools_leave_out_reserved_cpus_and_system_pods_get_theirs() {
        let lsr = pod(
            "lsr",
            "LSR",
            json!({"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"2\"}"}),
            json!({}),
        );
        let mut s = states(vec![lsr]);
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": {
                "node.koordinator.sh/reservation": "{\"reservedCPUs\":\"5\"}",
                "node.koordinator.sh/system-qos-resource": "{\"cpuset\":\"0-1\"}"}}}))
        .unwrap();
        s.node = Some(Arc::new(node));
        let online = NodeCpus::online(&[0, 1, 2, 3, 4, 5]);
        let of = |qos: &str| {
            let p = pod(qos, qos, json!({}), json!({}));
            ALL.container(&p, "c", &s, &online).cpuset
        };
        assert_eq!(of("SYSTEM").as_deref(), Some("0-1"), "system-qos-resource");
        assert_eq!(
            of("LS").as_deref(),
            Some("3-4"),
            "no reserved, system or LSR CPU"
        );
        assert_eq!(
            of("BE").as_deref(),
            Some(""),
            "BestEffort: the parent's CPUs"
        );
        // The kubelet's static-policy pins (cpu_manager_state) are nobody's pool either.
        let pinned_by_kubelet = NodeCpus {
            kubelet_pinned: BTreeSet::from([4]),
            ..online.clone()
        };
        let ls = pod("ls", "LS", json!({}), json!({}));
        let got = ALL.container(&ls, "c", &s, &pinned_by_kubelet).cpuset;
        assert_eq!(got.as_deref(), Some("3"));
    }

    #[test]
    fn bvt_follows_the_nodeslo_and_resets_where_cpu_qos_is_off() {
        let s = group_identity_states();
        assert_eq!(ALL.bvt(QoSClass::Ls, &s), Some(2));
        assert_eq!(ALL.bvt(QoSClass::Be, &s), Some(-1));
        assert_eq!(
            ALL.bvt(QoSClass::Lsr, &s),
            Some(0),
            "a disabled class is reset"
        );
        assert_eq!(
            ALL.bvt(QoSClass::Be, &States::default()),
            None,
            "no NodeSLO: left alone"
        );
        // The kube QoS directories, as Koordinator's kubeQOSDirParams.
        assert_eq!(ALL.kube_qos_dir_bvt(KubeQoS::BestEffort, &s), Some(-1));
        assert_eq!(ALL.kube_qos_dir_bvt(KubeQoS::Burstable, &s), Some(2));
        assert_eq!(ALL.kube_qos_dir_bvt(KubeQoS::Guaranteed, &s), Some(0));
        let dir = |k| ALL.kube_qos_dir_bvt(k, &States::default());
        assert_eq!(dir(KubeQoS::Guaranteed), None, "no NodeSLO: left alone");
        let mut slo = s.node_slo.as_deref().unwrap().clone();
        let q = slo.spec.resource_qos_strategy.as_mut().unwrap();
        q.policies = serde_json::from_value(json!({"cpuPolicy": "coreSched"})).unwrap();
        let s = States {
            node_slo: Some(Arc::new(slo)),
            ..Default::default()
        };
        assert_eq!(
            ALL.bvt(QoSClass::Ls, &s),
            Some(0),
            "coreSched replaces group identity"
        );
    }

    #[test]
    fn allocated_gpus_become_nvidia_visible_devices() {
        let a: std::collections::HashMap<String, String> = [(
            "scheduling.koordinator.sh/device-allocated".to_string(),
            r#"{"gpu": [{"minor": 1, "resources": {"koordinator.sh/gpu-core": "100"}}, {"minor": 3}]}"#.to_string(),
        )]
        .into();
        assert_eq!(
            ALL.gpu_env(&a),
            Some(("NVIDIA_VISIBLE_DEVICES".into(), "1,3".into()))
        );
        assert_eq!(ALL.gpu_env(&Default::default()), None);
    }
}
