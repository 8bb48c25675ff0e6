//! The runtime hooks' values kept on running containers (Koordinator's runtimehooks
//! reconciler): CPUSetAllocator's cpusets (containers and the pod's sandbox; LS host
//! applications on the share pools) and
//! GroupIdentity's bvt, re-applied every few
//! seconds, so pods that started before the koordlet, or before a NodeSLO or a pinned pod
//! changed the answer, get them too. (BatchResource has its own reconciler.)

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::context::{QosCtx, record};
use super::executor::{Executor, Update};
use super::runner::Entry;
use super::runner::{Round, Strategy};
use crate::api::extension::qos::{KubeQoS, QoSClass};
use crate::koordlet::features;
use crate::koordlet::informer::States;
use crate::koordlet::runtimehooks::cpuset::CpusetRule;
use crate::koordlet::runtimehooks::rules::{NodeCpus, Rules};
use crate::os::system::Host;
use crate::os::{CgroupDir, Resource};

const EVERY: Duration = Duration::from_secs(5);

/// One pod's updates of one level, recorded as a QoS change and timed as Koordinator's
/// `koordlet_runtime_hook_reconciler_invoked_duration_milliseconds{level,resource_type}`.
fn reconcile(
    ctx: &QosCtx,
    states: &States,
    (strategy, level, resource): (&'static str, &str, Resource),
    ex: &Executor,
    pod: &str,
    updates: Vec<Update>,
) {
    if updates.is_empty() {
        return;
    }
    let start = std::time::Instant::now();
    let results = ex.leveled(&[updates]);
    let ok = results.iter().all(Result::is_ok);
    let node = states
        .node
        .as_ref()
        .and_then(|n| n.metadata.name.as_deref());
    ctx.metrics.ops.reconciled(
        node.unwrap_or_default(),
        level,
        resource.v1_name(),
        ok,
        start.elapsed(),
    );
    record(ctx, strategy, pod, results);
}

/// CPUSetAllocator on running containers: cpusets, and no CFS quota for pinned pods
/// (pod, then containers) unless `--disable-unset-cpu-quota`.
pub struct Cpusets {
    pub ex: Arc<Executor>,
    pub host: Host,
    pub cpus: Vec<crate::os::system::CpuInfo>,
    pub unset_cpu_quota: bool,
    /// The kubelet's CPU manager state, whose static-policy pins stay out of the pools.
    pub kubelet_state: Option<std::path::PathBuf>,
    /// The BECPUManager gate: NUMA-bound BE pods get their nodes' BE pools, as from the hook.
    pub be_cpu_manager: bool,
}

impl Strategy for Cpusets {
    fn name(&self) -> &'static str {
        "cpuset"
    }

    fn prepare(&mut self) -> bool {
        self.cpus = self.host.cpu_topology().unwrap_or_default();
        if self.cpus.is_empty() {
            tracing::warn!("CPUSetAllocator: online CPUs unknown; cpusets are not reconciled");
        }
        !self.cpus.is_empty()
    }

    fn interval(&self) -> Duration {
        EVERY
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        let rules = Rules {
            batch_resource: false,
            cpuset: true,
            group_identity: false,
            gpu_env_inject: false,
            rdma_device_inject: false,
            be_cpu_manager: self.be_cpu_manager,
            unset_cpu_quota: self.unset_cpu_quota,
        };
        let cpus = NodeCpus::read(&self.cpus, self.kubelet_state.as_deref(), &states.pods);
        // The node's pools once a round (they walk every pod), each pod's cpuset once: it
        // is the pod's, whichever container asks (`Rules::container` for one hook call).
        let node = CpusetRule::from_node(states, &cpus, rules.be_cpu_manager);
        for pod in states.pods.iter() {
            let cpuset = node.container_cpuset(&pod.pod).unwrap_or_else(|e| {
                tracing::debug!(error = %e, "CPUSetAllocator: cpuset left as it is");
                None
            });
            let unset_quota = rules.unsets_quota(&pod.pod);
            let mut cpusets = Vec::new();
            let mut quotas = Vec::new();
            for c in &pod.containers {
                // An empty answer (BestEffort) leaves the container on its parent's CPUs.
                if let Some(set) = cpuset.as_ref().filter(|s| !s.is_empty()) {
                    cpusets.push(Update::new(
                        Resource::CpusetCpus,
                        c.dir.clone(),
                        set.clone(),
                    ));
                }
                if unset_quota {
                    quotas.push(Update::new(Resource::CfsQuota, c.dir.clone(), "-1"));
                }
            }
            let what = ("cpuset", "container", Resource::CpusetCpus);
            reconcile(ctx, states, what, &self.ex, &pod.name, cpusets);
            // The sandbox (pause) container too, as Koordinator's SandboxLevel reconciler.
            let sandbox = cpuset.as_ref().filter(|s| !s.is_empty()).and_then(|set| {
                let dir = sandbox_dir(self.ex.cgroups(), pod)?;
                Some(Update::new(Resource::CpusetCpus, dir, set.clone()))
            });
            if let Some(u) = sandbox {
                let what = ("cpuset", "sandbox", Resource::CpusetCpus);
                reconcile(ctx, states, what, &self.ex, &pod.name, vec![u]);
            }
            if !quotas.is_empty() {
                let at_pod = vec![Update::new(Resource::CfsQuota, pod.dir.clone(), "-1")];
                let what = ("cpuset", "pod", Resource::CfsQuota);
                reconcile(ctx, states, what, &self.ex, &pod.name, at_pod);
                let what = ("cpuset", "container", Resource::CfsQuota);
                reconcile(ctx, states, what, &self.ex, &pod.name, quotas);
            }
        }
        self.host_apps(ctx, states, &node);
        futures::future::ready(Round::DONE).boxed()
    }
}

/// The pod's sandbox (pause) container's cgroup, as Koordinator's
/// `GetPodSandboxContainerID` finds it: the one child of the pod's cgroup that is none of
/// its containers' (cri-o's `crio-*.scope` conmon dirs aside); None unless exactly one.
fn sandbox_dir(
    cg: &crate::os::Cgroups,
    pod: &crate::koordlet::informer::PodMeta,
) -> Option<CgroupDir> {
    if pod.containers.is_empty() {
        return None;
    }
    let known: std::collections::HashSet<&str> = pod
        .containers
        .iter()
        .filter_map(|c| c.dir.as_str().rsplit('/').next())
        .collect();
    let candidates: Vec<String> = cg
        .children(&pod.dir)
        .into_iter()
        .filter(|n| !known.contains(n.as_str()))
        .filter(|n| !(n.starts_with("crio-") && n.ends_with(".scope")))
        .collect();
    match candidates.as_slice() {
        [one] => Some(pod.dir.join(one)),
        _ => None,
    }
}

impl Cpusets {
    /// The NodeSLO's LS host applications on the LS share pools (Koordinator's
    /// `SetHostAppCPUSet`); other classes keep the cpuset they have.
    fn host_apps(&self, ctx: &QosCtx, states: &States, node: &CpusetRule) {
        for app in &states.slo().host_applications {
            let qos = QoSClass::from_name(app.qos.as_deref().unwrap_or_default());
            let dir = crate::koordlet::collectors::host_app::app_dir(self.ex.cgroups(), app);
            let (Some(dir), Some(name)) = (dir, &app.name) else {
                continue;
            };
            match node.host_app_cpuset(name, qos) {
                Ok(set) if !set.is_empty() => {
                    let u = Update::new(Resource::CpusetCpus, dir, set);
                    let what = ("cpuset", "hostapp", Resource::CpusetCpus);
                    reconcile(ctx, states, what, &self.ex, name, vec![u]);
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "host application cpuset left as it is"),
            }
        }
    }
}

/// GroupIdentity on running pods, where the kernel has `cpu.bvt_warp_ns`.
pub struct Bvt {
    pub ex: Arc<Executor>,
}

impl Strategy for Bvt {
    fn name(&self) -> &'static str {
        "groupidentity"
    }

    fn prepare(&mut self) -> bool {
        let probe = self
            .ex
            .cgroups()
            .file(Resource::BvtWarpNs, &CgroupDir::new(""));
        let here = probe.exists();
        if !here {
            tracing::warn!(file = %probe.display(), "GroupIdentity: this kernel has no cpu.bvt_warp_ns; bvt is not set");
        }
        here
    }

    fn interval(&self) -> Duration {
        EVERY
    }

    fn tick<'a>(&'a mut self, ctx: &'a QosCtx, states: &'a States) -> BoxFuture<'a, Round> {
        let rules = Rules {
            batch_resource: false,
            cpuset: false,
            group_identity: true,
            gpu_env_inject: false,
            rdma_device_inject: false,
            be_cpu_manager: false,
            unset_cpu_quota: false,
        };
        // The kube QoS directories first (Koordinator's kubeQOSDirParams), then the pods.
        for kube in [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort] {
            let Some(bvt) = rules.kube_qos_dir_bvt(kube, states) else {
                continue;
            };
            let dir = self.ex.cgroups().qos_dir(kube);
            let u = Update::new(Resource::BvtWarpNs, dir, bvt.to_string());
            let what = ("groupidentity", "kubeqos", Resource::BvtWarpNs);
            reconcile(ctx, states, what, &self.ex, kube.name(), vec![u]);
        }
        for pod in states.pods.iter() {
            let Some(bvt) = rules.bvt(pod.facts.qos_with_default(), states) else {
                continue;
            };
            let u = Update::new(Resource::BvtWarpNs, pod.dir.clone(), bvt.to_string());
            let what = ("groupidentity", "pod", Resource::BvtWarpNs);
            reconcile(ctx, states, what, &self.ex, &pod.name, vec![u]);
        }
        // The NodeSLO's host applications by their qos (Koordinator's SetHostAppBvtValue).
        for app in &states.slo().host_applications {
            let qos = QoSClass::from_name(app.qos.as_deref().unwrap_or_default());
            let dir = crate::koordlet::collectors::host_app::app_dir(self.ex.cgroups(), app);
            let (Some(bvt), Some(dir), Some(name)) = (rules.bvt(qos, states), dir, &app.name)
            else {
                continue;
            };
            let u = Update::new(Resource::BvtWarpNs, dir, bvt.to_string());
            let what = ("groupidentity", "hostapp", Resource::BvtWarpNs);
            reconcile(ctx, states, what, &self.ex, name, vec![u]);
        }
        futures::future::ready(Round::DONE).boxed()
    }
}

/// CPUSetAllocator.
pub const CPUSETS: Entry = Entry {
    gate: features::CPU_SET_ALLOCATOR,
    build: |d| {
        Box::new(Cpusets {
            ex: d.executor.clone(),
            host: d.host.clone(),
            cpus: Vec::new(),
            unset_cpu_quota: d.unset_cpu_quota,
            kubelet_state: Some(d.kubelet_state.clone()),
            be_cpu_manager: d.be_cpu_manager,
        })
    },
};

/// GroupIdentity.
pub const BVT: Entry = Entry {
    gate: features::GROUP_IDENTITY,
    build: |d| {
        Box::new(Bvt {
            ex: d.executor.clone(),
        })
    },
};

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::koordlet::informer::{Informer, PodMeta};
    use crate::koordlet::metrics::KoordletMetrics;
    use crate::koordlet::store::{MetricStore, StoreOptions};
    use crate::os::{Cgroups, Driver, Version};
    use serde_json::json;

    /// A QoS context over fixed states, for strategy tests.
    pub(in crate::koordlet::qos) fn test_ctx(states: &States) -> QosCtx {
        QosCtx {
            informer: Informer::fixed(states.clone()),
            store: Arc::new(MetricStore::temporary(StoreOptions::default()).unwrap()),
            metrics: KoordletMetrics::register(&crate::kernel::Metrics::new()),
            shutdown: crate::kernel::Shutdown::new(),
        }
    }

    /// CPUSetAllocator's reconciler on 4 online CPUs.
    fn cpusets(cg: Cgroups, unset_cpu_quota: bool) -> Cpusets {
        Cpusets {
            ex: Arc::new(Executor::new(cg, Duration::from_secs(60))),
            host: Host::new("/proc", "/sys"),
            cpus: crate::koordlet::runtimehooks::rules::NodeCpus::online(&[0, 1, 2, 3]).cpus,
            unset_cpu_quota,
            kubelet_state: None,
            be_cpu_manager: false,
        }
    }

    #[test]
    fn running_containers_get_their_pool_and_pinned_ones_their_cpus() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, "");
        let pod = |uid: &str, qos: &str, ann: serde_json::Value| {
            let p = serde_json::from_value(json!({
                "metadata": {"name": uid, "namespace": "d", "uid": uid,
                             "labels": {"koordinator.sh/qosClass": qos}, "annotations": ann},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"qosClass": "BestEffort", "containerStatuses": [{"name": "c",
                    "containerID": format!("containerd://{uid}c"), "image": "i", "imageID": "",
                    "ready": true, "restartCount": 0}]}}))
            .unwrap();
            PodMeta::new(p, &cg).unwrap()
        };
        let lse = pod(
            "lse",
            "LSE",
            json!({"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"0\"}"}),
        );
        let be = pod("be", "BE", json!({}));
        // The LSE pod's sandbox: a child of its cgroup that is none of its containers'.
        let sandbox = |sub: &str| dir.path().join(sub).join(lse.dir.as_str()).join("sandbox1");
        std::fs::create_dir_all(sandbox("cpu")).unwrap();
        std::fs::create_dir_all(sandbox("cpuset")).unwrap();
        std::fs::write(sandbox("cpuset").join("cpuset.cpus"), "0-3").unwrap();
        let quota = |d: &str| dir.path().join("cpu").join(d).join("cpu.cfs_quota_us");
        for p in [&lse, &be] {
            let d = dir.path().join("cpuset").join(p.containers[0].dir.as_str());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpuset.cpus"), "0-3").unwrap();
            for q in [quota(p.dir.as_str()), quota(p.containers[0].dir.as_str())] {
                std::fs::create_dir_all(q.parent().unwrap()).unwrap();
                std::fs::write(q, "200000").unwrap();
            }
        }
        let states = States {
            pods: Arc::new(vec![lse.clone(), be.clone()]),
            ..Default::default()
        };
        let ctx = test_ctx(&states);
        let mut s = cpusets(cg, true);
        futures::executor::block_on(s.tick(&ctx, &states));
        let read = |p: &PodMeta| {
            std::fs::read_to_string(
                dir.path()
                    .join("cpuset")
                    .join(p.containers[0].dir.as_str())
                    .join("cpuset.cpus"),
            )
            .unwrap()
        };
        assert_eq!(read(&lse).trim(), "0");
        let sandbox_cpus = std::fs::read_to_string(sandbox("cpuset").join("cpuset.cpus"));
        assert_eq!(
            sandbox_cpus.unwrap().trim(),
            "0",
            "the sandbox follows its pod"
        );
        assert_eq!(
            read(&be).trim(),
            "0-3",
            "a BestEffort container is left on its parent's CPUs (cpusuppress's)"
        );
        // Koordinator's IsPodCfsQuotaNeedUnset: the pinned pod runs without a CFS quota,
        // pod and container; the others keep theirs.
        let q = |d: &str| std::fs::read_to_string(quota(d)).unwrap();
        assert_eq!(q(lse.dir.as_str()).trim(), "-1");
        assert_eq!(q(lse.containers[0].dir.as_str()).trim(), "-1");
        assert_eq!(q(be.dir.as_str()).trim(), "200000");
        assert_eq!(q(be.containers[0].dir.as_str()).trim(), "200000");
    }

    #[test]
    fn ls_host_applications_get_the_share_pools() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, "");
        let cpus = |app: &str| dir.path().join("cpuset").join(app).join("cpuset.cpus");
        for app in ["host-ls/nginx", "host-be/batch"] {
            std::fs::create_dir_all(cpus(app).parent().unwrap()).unwrap();
            std::fs::write(cpus(app), "0-3").unwrap();
        }
        let app = |name: &str, qos: &str, path: &str| json!({"name": name, "qos": qos, "cgroupPath": {"base": "CgroupRoot", "relativePath": path}});
        let slo: crate::api::slo::NodeSLO = serde_json::from_value(json!({
            "metadata": {"name": "n"}, "spec": {"hostApplications": [
                app("nginx", "LS", "host-ls/nginx/"), app("batch", "BE", "host-be/batch/")]}}))
        .unwrap();
        let p = serde_json::from_value(json!({
            "metadata": {"name": "lse", "namespace": "d", "uid": "lse",
                "labels": {"koordinator.sh/qosClass": "LSE"},
                "annotations": {"scheduling.koordinator.sh/resource-status": "{\"cpuset\":\"0\"}"}},
            "spec": {"containers": [{"name": "c"}]}, "status": {"qosClass": "Guaranteed"}}))
        .unwrap();
        let states = States {
            node_slo: Some(Arc::new(slo)),
            pods: Arc::new(vec![PodMeta::new(p, &cg).unwrap()]),
            ..Default::default()
        };
        let ctx = test_ctx(&states);
        let mut s = cpusets(cg, false);
        futures::executor::block_on(s.tick(&ctx, &states));
        let read = |app| std::fs::read_to_string(cpus(app)).unwrap();
        assert_eq!(
            read("host-ls/nginx").trim(),
            "1-3",
            "the LS pool: CPU 0 is the LSE pod's"
        );
        assert_eq!(read("host-be/batch").trim(), "0-3", "only LS is supported");
    }

    #[test]
    fn group_identity_reaches_the_kube_qos_directories() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroups::new(dir.path(), Version::V1, Driver::Cgroupfs, "");
        let file = |k: KubeQoS| {
            dir.path()
                .join("cpu")
                .join(cg.qos_dir(k).as_str())
                .join("cpu.bvt_warp_ns")
        };
        for k in [KubeQoS::Guaranteed, KubeQoS::Burstable, KubeQoS::BestEffort] {
            std::fs::create_dir_all(file(k).parent().unwrap()).unwrap();
            std::fs::write(file(k), "7").unwrap();
        }
        let app = dir
            .path()
            .join("cpu/host-latency-sensitive/nginx/cpu.bvt_warp_ns");
        std::fs::create_dir_all(app.parent().unwrap()).unwrap();
        std::fs::write(&app, "7").unwrap();
        let slo: crate::api::slo::NodeSLO = serde_json::from_value(json!({
            "metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {
                "lsClass": {"cpuQOS": {"enable": true, "groupIdentity": 2}},
                "beClass": {"cpuQOS": {"enable": true, "groupIdentity": -1}}},
              "hostApplications": [{"name": "nginx", "qos": "LS", "cgroupPath":
                {"base": "CgroupRoot", "relativePath": "host-latency-sensitive/nginx/"}}]}}))
        .unwrap();
        let states = States {
            node_slo: Some(Arc::new(slo)),
            ..Default::default()
        };
        let ctx = test_ctx(&states);
        let mut s = Bvt {
            ex: Arc::new(Executor::new(cg.clone(), Duration::from_secs(60))),
        };
        futures::executor::block_on(s.tick(&ctx, &states));
        let read = |k| std::fs::read_to_string(file(k)).unwrap();
        assert_eq!(
            read(KubeQoS::BestEffort).trim(),
            "-1",
            "besteffort: the BE class"
        );
        assert_eq!(
            read(KubeQoS::Burstable).trim(),
            "2",
            "burstable: the LS class"
        );
        assert_eq!(
            std::fs::read_to_string(&app).unwrap().trim(),
            "2",
            "an LS host application: the LS class (SetHostAppBvtValue)"
        );
        assert_eq!(
            read(KubeQoS::Guaranteed).trim(),
            "0",
            "the guaranteed root: none"
        );
    }
}
