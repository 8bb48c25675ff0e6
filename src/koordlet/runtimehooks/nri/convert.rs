//! NRI's pod and container as the hook requests the proxy mode sends (Koordinator's
//! `FromNri`), and the hooks' decisions as NRI adjustments and updates (`NriDone`): only
//! what a hook decided is set, the runtime keeps the rest.

use super::api;
use crate::kernel::hookproto::{
    ContainerMetadata, ContainerResourceHookRequest, LinuxContainerResources,
    PodSandboxHookRequest, PodSandboxMetadata,
};
use crate::koordlet::runtimehooks::rules::ContainerValues;
use crate::koordlet::runtimehooks::server::Extras;

fn meta(pod: &api::PodSandbox) -> PodSandboxMetadata {
    PodSandboxMetadata {
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        namespace: pod.namespace.clone(),
        attempt: 0,
    }
}

fn cgroup_parent(pod: &api::PodSandbox) -> String {
    pod.linux
        .as_ref()
        .map(|l| l.cgroup_parent.clone())
        .unwrap_or_default()
}

/// NRI's resources in the CRI shape the hooks read (absent values are 0 or empty).
fn cri_resources(r: &api::LinuxResources) -> LinuxContainerResources {
    let cpu = r.cpu.clone().unwrap_or_default();
    let memory = r.memory.unwrap_or_default();
    LinuxContainerResources {
        cpu_period: cpu.period.map_or(0, |v| v.value as i64),
        cpu_quota: cpu.quota.map_or(0, |v| v.value),
        cpu_shares: cpu.shares.map_or(0, |v| v.value as i64),
        memory_limit_in_bytes: memory.limit.map_or(0, |v| v.value),
        cpuset_cpus: cpu.cpus,
        cpuset_mems: cpu.mems,
        unified: r.unified.clone(),
        ..Default::default()
    }
}

pub fn sandbox_request(pod: &api::PodSandbox) -> PodSandboxHookRequest {
    let linux = pod.linux.clone().unwrap_or_default();
    PodSandboxHookRequest {
        pod_meta: Some(meta(pod)),
        runtime_handler: pod.runtime_handler.clone(),
        labels: pod.labels.clone(),
        annotations: pod.annotations.clone(),
        cgroup_parent: cgroup_parent(pod),
        overhead: linux.pod_overhead.as_ref().map(cri_resources),
        resources: linux.pod_resources.as_ref().map(cri_resources),
    }
}

pub fn container_request(
    pod: &api::PodSandbox,
    c: &api::Container,
) -> ContainerResourceHookRequest {
    let resources = c.linux.as_ref().and_then(|l| l.resources.as_ref());
    let pod_resources = pod.linux.as_ref().and_then(|l| l.pod_resources.as_ref());
    ContainerResourceHookRequest {
        pod_meta: Some(meta(pod)),
        container_meta: Some(ContainerMetadata {
            name: c.name.clone(),
            attempt: 0,
            id: c.id.clone(),
        }),
        container_annotations: c.annotations.clone(),
        container_resources: resources.map(cri_resources),
        pod_resources: pod_resources.map(cri_resources),
        pod_annotations: pod.annotations.clone(),
        pod_labels: pod.labels.clone(),
        pod_cgroup_parent: cgroup_parent(pod),
        container_envs: c
            .env
            .iter()
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// The resources the hooks decided, nothing else.
pub fn resources(v: &ContainerValues) -> Option<api::LinuxResources> {
    let cpu = api::LinuxCpu {
        shares: v.cpu_shares.map(|s| api::OptionalUInt64 {
            value: s.max(0) as u64,
        }),
        quota: v.cfs_quota.map(|q| api::OptionalInt64 { value: q }),
        cpus: v.cpuset.clone().unwrap_or_default(),
        ..Default::default()
    };
    let memory = v.memory_limit.filter(|m| *m > 0).map(|m| api::LinuxMemory {
        limit: Some(api::OptionalInt64 { value: m }),
        ..Default::default()
    });
    let has_cpu = cpu.shares.is_some() || cpu.quota.is_some() || !cpu.cpus.is_empty();
    if !has_cpu && memory.is_none() {
        return None;
    }
    Some(api::LinuxResources {
        cpu: has_cpu.then_some(cpu),
        memory,
        ..Default::default()
    })
}

/// CreateContainer's answer: resources, an injected env and devices.
pub fn adjustment(v: &ContainerValues, extras: &Extras) -> api::ContainerAdjustment {
    let mut resources = resources(v);
    if let Some(class) = &extras.rdt_class {
        let r = resources.get_or_insert_with(Default::default);
        r.rdt_class = Some(api::OptionalString {
            value: class.clone(),
        });
    }
    let devices: Vec<api::LinuxDevice> = extras
        .devices
        .iter()
        .map(|d| api::LinuxDevice {
            path: d.path.clone(),
            r#type: d.r#type.clone(),
            major: d.major,
            minor: d.minor,
            file_mode: Some(api::OptionalFileMode { value: d.file_mode }),
            ..Default::default()
        })
        .collect();
    let linux =
        (resources.is_some() || !devices.is_empty()).then(|| api::LinuxContainerAdjustment {
            devices,
            resources,
            ..Default::default()
        });
    api::ContainerAdjustment {
        env: extras
            .env
            .iter()
            .map(|(key, value)| api::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        mounts: extras
            .mounts
            .iter()
            .map(|m| api::Mount {
                destination: m.destination.clone(),
                r#type: "bind".into(),
                source: m.source.clone(),
                options: vec!["rbind".into()],
            })
            .collect(),
        linux,
        ..Default::default()
    }
}

/// UpdateContainer's answer for one container; `None` when no hook decided anything.
pub fn update(container_id: &str, v: &ContainerValues) -> Option<api::ContainerUpdate> {
    Some(api::ContainerUpdate {
        container_id: container_id.to_string(),
        linux: Some(api::LinuxContainerUpdate {
            resources: Some(resources(v)?),
        }),
        ignore_failure: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_reads_as_the_proxy_request_would() {
        let pod = api::PodSandbox {
            name: "be".into(),
            uid: "u1".into(),
            namespace: "default".into(),
            labels: [("koordinator.sh/qosClass".into(), "BE".into())].into(),
            linux: Some(api::LinuxPodSandbox {
                cgroup_parent: "/kubepods/besteffort/podu1".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = api::Container {
            id: "c1".into(),
            name: "main".into(),
            env: vec!["A=1".into(), "B=x=y".into()],
            linux: Some(api::LinuxContainer {
                resources: Some(api::LinuxResources {
                    cpu: Some(api::LinuxCpu {
                        shares: Some(api::OptionalUInt64 { value: 2 }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = container_request(&pod, &c);
        assert_eq!(r.pod_meta.unwrap().uid, "u1");
        assert_eq!(r.container_meta.unwrap().id, "c1");
        assert_eq!(r.pod_labels["koordinator.sh/qosClass"], "BE");
        assert_eq!(r.pod_cgroup_parent, "/kubepods/besteffort/podu1");
        assert_eq!(r.container_resources.unwrap().cpu_shares, 2);
        assert_eq!(r.container_envs["B"], "x=y");
    }

    #[test]
    fn only_what_a_hook_decided_is_adjusted() {
        let v = ContainerValues {
            cpu_shares: Some(512),
            cfs_quota: Some(100_000),
            memory_limit: Some(128 << 20),
            cpuset: None,
        };
        let extras = Extras {
            env: vec![("NVIDIA_VISIBLE_DEVICES".into(), "0".into())],
            mounts: vec![crate::koordlet::runtimehooks::hami::BindMount {
                source: "/tmp/vgpulock".into(),
                destination: "/tmp/vgpulock".into(),
            }],
            ..Extras::default()
        };
        let a = adjustment(&v, &extras);
        let r = a.linux.unwrap().resources.unwrap();
        let cpu = r.cpu.unwrap();
        assert_eq!(cpu.shares.unwrap().value, 512);
        assert_eq!(cpu.quota.unwrap().value, 100_000);
        assert!(
            cpu.period.is_none() && cpu.cpus.is_empty(),
            "left to the runtime"
        );
        assert_eq!(r.memory.unwrap().limit.unwrap().value, 128 << 20);
        assert_eq!(a.env[0].key, "NVIDIA_VISIBLE_DEVICES");
        let classed = adjustment(
            &ContainerValues::default(),
            &Extras {
                rdt_class: Some("koordlet-u1".into()),
                ..Extras::default()
            },
        );
        let r = classed.linux.unwrap().resources.unwrap();
        assert_eq!(r.rdt_class.unwrap().value, "koordlet-u1");
        let m = &a.mounts[0];
        assert_eq!(
            (m.r#type.as_str(), m.options.as_slice()),
            ("bind", &["rbind".to_string()][..])
        );
        assert!(update("c1", &ContainerValues::default()).is_none());
        let u = update("c1", &v).unwrap();
        assert_eq!(u.container_id, "c1");
    }
}
