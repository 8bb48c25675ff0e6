//! Hook answers folded into CRI requests, with Koordinator's merge rules: labels and
//! annotations are unions (the answer wins), a non-empty cgroup parent replaces, resources
//! take the answer's positive period/shares/memory/swap, non-zero quota, oom_score_adj
//! within [-1000, 1000] and both cpusets (even empty: hook servers echo complete
//! resources), and envs are replaced whole when the answer has them.

use std::collections::{BTreeMap, HashMap};

use k8s_cri::v1 as cri;
use prost::Message;

use super::proto;

/// CRI's and the hook protocol's `LinuxContainerResources` share field numbers, so one
/// converts to the other through its encoding.
pub fn to_hook(r: &cri::LinuxContainerResources) -> proto::LinuxContainerResources {
    proto::LinuxContainerResources::decode(r.encode_to_vec().as_slice()).unwrap_or_default()
}

pub fn to_cri(r: &proto::LinuxContainerResources) -> cri::LinuxContainerResources {
    cri::LinuxContainerResources::decode(r.encode_to_vec().as_slice()).unwrap_or_default()
}

pub fn union(into: &mut HashMap<String, String>, from: &HashMap<String, String>) {
    for (k, v) in from {
        into.insert(k.clone(), v.clone());
    }
}

pub fn resources(into: &mut cri::LinuxContainerResources, from: &proto::LinuxContainerResources) {
    if from.cpu_period > 0 {
        into.cpu_period = from.cpu_period;
    }
    if from.cpu_quota != 0 {
        into.cpu_quota = from.cpu_quota;
    }
    if from.cpu_shares > 0 {
        into.cpu_shares = from.cpu_shares;
    }
    if from.memory_limit_in_bytes > 0 {
        into.memory_limit_in_bytes = from.memory_limit_in_bytes;
    }
    if (-1000..=1000).contains(&from.oom_score_adj) {
        into.oom_score_adj = from.oom_score_adj;
    }
    into.cpuset_cpus = from.cpuset_cpus.clone();
    into.cpuset_mems = from.cpuset_mems.clone();
    union(&mut into.unified, &from.unified);
    if from.memory_swap_limit_in_bytes > 0 {
        into.memory_swap_limit_in_bytes = from.memory_swap_limit_in_bytes;
    }
}

/// The answer to a container hook, applied to a CreateContainer request.
pub fn create_container(
    req: &mut cri::CreateContainerRequest,
    answer: &proto::ContainerResourceHookResponse,
) {
    let config = req.config.get_or_insert_with(Default::default);
    union(&mut config.annotations, &answer.container_annotations);
    if let Some(r) = &answer.container_resources {
        let linux = config.linux.get_or_insert_with(Default::default);
        resources(linux.resources.get_or_insert_with(Default::default), r);
    }
    if !answer.container_envs.is_empty() {
        let sorted: BTreeMap<_, _> = answer.container_envs.iter().collect();
        config.envs = sorted
            .into_iter()
            .map(|(k, v)| cri::KeyValue {
                key: k.clone(),
                value: v.clone(),
            })
            .collect();
    }
    for d in &answer.container_devices {
        if !config.devices.iter().any(|x| x.container_path == d.path) {
            config.devices.push(cri::Device {
                container_path: d.path.clone(),
                host_path: d.path.clone(),
                permissions: "rwm".into(),
            });
        }
    }
    if !answer.pod_cgroup_parent.is_empty() {
        let sandbox = req.sandbox_config.get_or_insert_with(Default::default);
        sandbox
            .linux
            .get_or_insert_with(Default::default)
            .cgroup_parent = answer.pod_cgroup_parent.clone();
    }
}

/// The answer to a pod hook, applied to a RunPodSandbox request.
pub fn run_pod_sandbox(
    req: &mut cri::RunPodSandboxRequest,
    answer: &proto::PodSandboxHookResponse,
) {
    let config = req.config.get_or_insert_with(Default::default);
    union(&mut config.labels, &answer.labels);
    union(&mut config.annotations, &answer.annotations);
    if !answer.cgroup_parent.is_empty() {
        config
            .linux
            .get_or_insert_with(Default::default)
            .cgroup_parent = answer.cgroup_parent.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_follow_koordinators_rules() {
        let mut r = cri::LinuxContainerResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 512,
            cpuset_cpus: "0-3".into(),
            oom_score_adj: 5,
            ..Default::default()
        };
        let hook = to_hook(&r);
        assert_eq!((hook.cpu_quota, hook.cpuset_cpus.as_str()), (50_000, "0-3"));
        let answer = proto::LinuxContainerResources {
            cpu_quota: -1,
            cpu_shares: 2,
            cpuset_cpus: String::new(),
            oom_score_adj: 2000,
            ..Default::default()
        };
        resources(&mut r, &answer);
        assert_eq!((r.cpu_period, r.cpu_quota, r.cpu_shares), (100_000, -1, 2));
        assert_eq!(r.cpuset_cpus, "", "cpusets are always replaced");
        assert_eq!(r.oom_score_adj, 5, "out of range: kept");
        assert_eq!(to_cri(&to_hook(&r)), r);
    }

    #[test]
    fn hook_devices_join_the_containers_devices_once() {
        let mut req = cri::CreateContainerRequest::default();
        let dev = |p: &str| proto::LinuxDevice {
            path: p.into(),
            r#type: "c".into(),
            major: 231,
            minor: 64,
            file_mode: 0o666,
        };
        let answer = proto::ContainerResourceHookResponse {
            container_devices: vec![
                dev("/dev/infiniband/rdma_cm"),
                dev("/dev/infiniband/uverbs0"),
            ],
            ..Default::default()
        };
        create_container(&mut req, &answer);
        create_container(&mut req, &answer);
        let devs = &req.config.unwrap().devices;
        assert_eq!(devs.len(), 2);
        assert_eq!(
            (
                devs[1].host_path.as_str(),
                devs[1].container_path.as_str(),
                devs[1].permissions.as_str()
            ),
            ("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "rwm")
        );
    }
}
