//! The kubelet's configuration as Koordinator's koordlet reads it for the
//! NodeResourceTopology (`states_noderesourcetopology.go`): the CPU manager policy and its
//! options, the CPUs the static policy reserves, and the topology manager's policy and
//! scope. Read from the kubelet's `/configz` (`configz.rs`) or its config file
//! (`KubeletConfiguration`, YAML or JSON), with the kubelet's defaults for what is left out.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::os::system::CpuInfo;

/// The fields the koordlet reads (`kubelet.config.k8s.io/v1beta1` names).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct KubeletConfiguration {
    pub cpu_manager_policy: String,
    pub cpu_manager_policy_options: BTreeMap<String, String>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: String,
    pub topology_manager_policy: String,
    pub topology_manager_scope: String,
    pub kube_reserved: BTreeMap<String, String>,
    pub system_reserved: BTreeMap<String, String>,
    pub eviction_hard: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletConfigError {
    #[error("kubelet config {path}: {err}")]
    Parse {
        path: String,
        err: serde_yaml::Error,
    },
    #[error("kubelet /configz is not {{\"kubeletconfig\": KubeletConfiguration}}: {0}")]
    Configz(String),
    #[error("kubelet reservedSystemCPUs {0:?} is not a CPU list")]
    ReservedList(String),
    #[error("kubelet {field}.cpu {value:?} is not a CPU quantity")]
    Quantity { field: &'static str, value: String },
    #[error(
        "the static policy requires systemReserved.cpu + kubeReserved.cpu to be greater than zero"
    )]
    NothingReserved,
    #[error("unable to reserve {want} CPUs on a node with {have}")]
    TooFew { want: usize, have: usize },
}

impl KubeletConfiguration {
    /// The file, if there is one; a file that does not parse is an error naming it.
    pub fn read(path: &Path) -> Result<Option<KubeletConfiguration>, KubeletConfigError> {
        let Some(text) = crate::os::knob::read_opt(path) else {
            return Ok(None);
        };
        let mut cfg: KubeletConfiguration =
            serde_yaml::from_str(&text).map_err(|err| KubeletConfigError::Parse {
                path: path.display().to_string(),
                err,
            })?;
        cfg.default_unset();
        Ok(Some(cfg))
    }

    /// The kubelet's `/configz` answer, `{"kubeletconfig": {...}}` (fields it does not know,
    /// such as v1.28's `logging`, are ignored).
    pub fn from_configz(body: &[u8]) -> Result<KubeletConfiguration, KubeletConfigError> {
        #[derive(Deserialize)]
        struct Configz {
            kubeletconfig: KubeletConfiguration,
        }
        let mut cfg = serde_json::from_slice::<Configz>(body)
            .map_err(|e| KubeletConfigError::Configz(e.to_string()))?
            .kubeletconfig;
        cfg.default_unset();
        Ok(cfg)
    }

    /// The kubelet's defaults (`SetDefaults_KubeletConfiguration`).
    fn default_unset(&mut self) {
        for (field, default) in [
            (&mut self.cpu_manager_policy, "none"),
            (&mut self.topology_manager_policy, "none"),
            (&mut self.topology_manager_scope, "container"),
        ] {
            if field.is_empty() {
                *field = default.to_string();
            }
        }
    }

    /// NRT `topologyPolicies` (Koordinator's `getTopologyPolicy`).
    pub fn topology_policy(&self) -> &'static str {
        let level = match self.topology_manager_scope.as_str() {
            "container" => "ContainerLevel",
            "pod" => "PodLevel",
            _ => return "None",
        };
        let policy = match self.topology_manager_policy.as_str() {
            "single-numa-node" => "SingleNUMANode",
            "restricted" => "Restricted",
            "best-effort" => "BestEffort",
            _ => return "None",
        };
        match (policy, level) {
            ("SingleNUMANode", "ContainerLevel") => "SingleNUMANodeContainerLevel",
            ("SingleNUMANode", _) => "SingleNUMANodePodLevel",
            ("Restricted", "ContainerLevel") => "RestrictedContainerLevel",
            ("Restricted", _) => "RestrictedPodLevel",
            ("BestEffort", "ContainerLevel") => "BestEffortContainerLevel",
            _ => "BestEffortPodLevel",
        }
    }

    /// The CPUs the static policy reserves (`GetStaticCPUManagerPolicyReservedCPUs`):
    /// `reservedSystemCPUs`, else ⌈kubeReserved.cpu + systemReserved.cpu⌉ CPUs taken from
    /// the lowest-numbered cores, whole cores first (for 8 CPUs with SMT and 2 reserved:
    /// 0 and its sibling). Empty under any other policy.
    pub fn static_reserved_cpus(&self, cpus: &[CpuInfo]) -> Result<Vec<u32>, KubeletConfigError> {
        if self.cpu_manager_policy != "static" {
            return Ok(Vec::new());
        }
        if !self.reserved_system_cpus.trim().is_empty() {
            return crate::api::cpuset::parse(&self.reserved_system_cpus)
                .map_err(|_| KubeletConfigError::ReservedList(self.reserved_system_cpus.clone()));
        }
        let milli = |field: &'static str, m: &BTreeMap<String, String>| match m.get("cpu") {
            None => Ok(0),
            Some(v) => crate::api::quantity::milli(v).map_err(|_| KubeletConfigError::Quantity {
                field,
                value: v.clone(),
            }),
        };
        let total = milli("kubeReserved", &self.kube_reserved)?
            + milli("systemReserved", &self.system_reserved)?;
        if total <= 0 {
            return Err(KubeletConfigError::NothingReserved);
        }
        take_by_cores(cpus, (total as u64).div_ceil(1000) as usize)
    }
}

/// `n` CPUs, whole cores in (socket, core) order, then single threads.
fn take_by_cores(cpus: &[CpuInfo], n: usize) -> Result<Vec<u32>, KubeletConfigError> {
    if n > cpus.len() {
        return Err(KubeletConfigError::TooFew {
            want: n,
            have: cpus.len(),
        });
    }
    let mut cores: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for c in cpus {
        cores.entry((c.socket, c.core)).or_default().push(c.id);
    }
    let mut taken = Vec::new();
    for ids in cores.values() {
        if taken.len() + ids.len() <= n {
            taken.extend(ids);
        }
    }
    for ids in cores.values() {
        for id in ids {
            if taken.len() < n && !taken.contains(id) {
                taken.push(*id);
            }
        }
    }
    taken.sort_unstable();
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 CPUs, 4 cores with two threads each (siblings n and n+4), one socket.
    fn smt8() -> Vec<CpuInfo> {
        (0..8)
            .map(|id| CpuInfo {
                id,
                core: id % 4,
                socket: 0,
                numa: 0,
            })
            .collect()
    }

    fn parse(yaml: &str) -> KubeletConfiguration {
        let mut c: KubeletConfiguration = serde_yaml::from_str(yaml).unwrap();
        c.default_unset();
        c
    }

    #[test]
    fn topology_policies_as_koordinators_get_topology_policy() {
        let cases = [
            ("", "", "None"),
            ("single-numa-node", "", "SingleNUMANodeContainerLevel"),
            ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
            ("restricted", "container", "RestrictedContainerLevel"),
            ("restricted", "pod", "RestrictedPodLevel"),
            ("best-effort", "pod", "BestEffortPodLevel"),
            ("best-effort", "container", "BestEffortContainerLevel"),
            ("none", "pod", "None"),
        ];
        for (policy, scope, want) in cases {
            let mut yaml = format!("topologyManagerPolicy: \"{policy}\"\n");
            if !scope.is_empty() {
                yaml += &format!("topologyManagerScope: {scope}\n");
            }
            assert_eq!(parse(&yaml).topology_policy(), want, "{policy}/{scope}");
        }
    }

    #[test]
    fn the_static_policy_reserves_the_lowest_cores_whole() {
        // Koordinator's comment: 8 CPUs with HT, numReservedCPUs=2 → {0,4}.
        let c = parse(
            "cpuManagerPolicy: static\nkubeReserved: {cpu: 1500m}\nsystemReserved: {cpu: 500m}\n",
        );
        assert_eq!(c.static_reserved_cpus(&smt8()).unwrap(), [0, 4]);
        let three = parse("cpuManagerPolicy: static\nsystemReserved: {cpu: \"2.5\"}\n");
        // ⌈2.5⌉ = 3: core 0 whole, then one thread of core 1 (kubelet's takeByTopology).
        assert_eq!(three.static_reserved_cpus(&smt8()).unwrap(), [0, 1, 4]);
        let listed = parse("cpuManagerPolicy: static\nreservedSystemCPUs: \"2-3\"\n");
        assert_eq!(listed.static_reserved_cpus(&smt8()).unwrap(), [2, 3]);
        let none = parse("cpuManagerPolicy: none\nreservedSystemCPUs: \"2-3\"\n");
        assert!(none.static_reserved_cpus(&smt8()).unwrap().is_empty());
        let zero = parse("cpuManagerPolicy: static\n");
        assert!(matches!(
            zero.static_reserved_cpus(&smt8()),
            Err(KubeletConfigError::NothingReserved)
        ));
    }

    #[test]
    fn a_file_that_does_not_parse_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config.yaml");
        std::fs::write(&f, "cpuManagerPolicy: [static\n").unwrap();
        let e = KubeletConfiguration::read(&f).unwrap_err().to_string();
        assert!(e.contains("config.yaml"), "{e}");
        assert!(
            KubeletConfiguration::read(&dir.path().join("absent"))
                .unwrap()
                .is_none()
        );
    }
}
