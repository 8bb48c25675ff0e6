//! The embedded node runtime as a runtime hook client, like koord-runtime-proxy: before a
//! container starts it calls PreCreateContainer on the registered hook server (the
//! embedded koordlet's), and the answer's cgroup values, cpuset and envs are in place at
//! the container's first instruction.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::resources::CgroupValues;
use crate::kernel::hookproto::{
    ContainerMetadata, ContainerResourceHookRequest, ContainerResourceHookResponse,
    LinuxContainerResources, PodSandboxMetadata,
};
use crate::runtime_proxy::hooks::{HookFailed, HookType, Hooks};

/// What a hook server changed for one container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hooked {
    pub values: Option<CgroupValues>,
    pub cpuset: Option<String>,
    pub envs: Option<Vec<(String, String)>>,
}

fn map(m: Option<&std::collections::BTreeMap<String, String>>) -> HashMap<String, String> {
    m.map(crate::runtime_proxy::service::to_map)
        .unwrap_or_default()
}

/// Calls PreCreateContainer for `c`; no hook server, or one that failed under `Ignore`,
/// changes nothing.
pub async fn pre_create(
    hooks: &Hooks,
    pod: &Pod,
    c: &Container,
    values: &CgroupValues,
    env: &[(String, String)],
    pod_cgroup: &str,
) -> Result<Hooked, HookFailed> {
    let meta = &pod.metadata;
    let req = ContainerResourceHookRequest {
        pod_meta: Some(PodSandboxMetadata {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            attempt: 0,
        }),
        container_meta: Some(ContainerMetadata {
            name: c.name.clone(),
            ..Default::default()
        }),
        container_resources: Some(LinuxContainerResources {
            cpu_period: values.cpu_period,
            cpu_quota: values.cpu_quota,
            cpu_shares: values.cpu_shares,
            memory_limit_in_bytes: values.memory_limit,
            ..Default::default()
        }),
        pod_annotations: map(meta.annotations.as_ref()),
        pod_labels: map(meta.labels.as_ref()),
        pod_cgroup_parent: format!("/{}", pod_cgroup.trim_start_matches('/')),
        container_envs: env.iter().cloned().collect(),
        ..Default::default()
    };
    let answer = hooks.container(HookType::PreCreateContainer, req).await?;
    Ok(answer.map(|a| apply(values, &a)).unwrap_or_default())
}

/// The answer over the runtime's own values, with the proxy's merge rules.
fn apply(values: &CgroupValues, a: &ContainerResourceHookResponse) -> Hooked {
    let mut out = Hooked::default();
    if let Some(r) = &a.container_resources {
        // The proxy's merge rules, on the runtime's own values.
        let mut merged = k8s_cri::v1::LinuxContainerResources {
            cpu_period: values.cpu_period,
            cpu_quota: values.cpu_quota,
            cpu_shares: values.cpu_shares,
            memory_limit_in_bytes: values.memory_limit,
            ..Default::default()
        };
        crate::runtime_proxy::merge::resources(&mut merged, r);
        out.values = Some(CgroupValues {
            cpu_shares: merged.cpu_shares,
            cpu_quota: merged.cpu_quota,
            cpu_period: merged.cpu_period,
            memory_limit: merged.memory_limit_in_bytes,
        });
        out.cpuset = Some(merged.cpuset_cpus).filter(|c| !c.is_empty());
    }
    if !a.container_envs.is_empty() {
        let mut envs: Vec<(String, String)> = a
            .container_envs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        envs.sort();
        out.envs = Some(envs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_override_the_runtimes_values() {
        let own = CgroupValues {
            cpu_shares: 2,
            cpu_quota: -1,
            cpu_period: 100_000,
            memory_limit: -1,
        };
        let a = ContainerResourceHookResponse {
            container_resources: Some(LinuxContainerResources {
                cpu_shares: 512,
                cpu_quota: 50_000,
                memory_limit_in_bytes: 64 << 20,
                cpuset_cpus: "1".into(),
                ..Default::default()
            }),
            container_envs: [("A".to_string(), "1".to_string())].into(),
            ..Default::default()
        };
        let h = apply(&own, &a);
        let v = h.values.unwrap();
        assert_eq!(
            (v.cpu_shares, v.cpu_quota, v.cpu_period, v.memory_limit),
            (512, 50_000, 100_000, 64 << 20)
        );
        assert_eq!(h.cpuset.as_deref(), Some("1"));
        assert_eq!(h.envs.unwrap(), vec![("A".to_string(), "1".to_string())]);
        assert_eq!(apply(&own, &Default::default()), Hooked::default());
    }
}
