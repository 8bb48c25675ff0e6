//! Fake host trees for collector tests: cgroup v1, v2 or hybrid, either driver, with
//! /proc files whose counters the test sets.

use std::path::{Path, PathBuf};

use crate::api::extension::qos::KubeQoS;
use crate::koordlet::informer::PodMeta;
use crate::os::system::Host;
use crate::os::{CgroupDir, Cgroups, Driver, Resource, Subsystem, Version};

pub struct FakeHost {
    pub dir: tempfile::TempDir,
    pub host: Host,
    pub cgroups: Cgroups,
}

impl FakeHost {
    pub fn new(version: Version, driver: Driver, hybrid: bool) -> FakeHost {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cgroup");
        match version {
            Version::V1 => {
                for s in ["cpu", "cpuacct", "cpuset", "memory"] {
                    std::fs::create_dir_all(root.join(s)).unwrap();
                }
                if hybrid {
                    std::fs::create_dir_all(root.join("unified")).unwrap();
                    std::fs::write(root.join("unified/cgroup.controllers"), "").unwrap();
                }
            }
            Version::V2 => {
                std::fs::create_dir_all(&root).unwrap();
                std::fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory pids")
                    .unwrap();
            }
        }
        let kubepods = if driver == Driver::Systemd {
            "kubepods.slice"
        } else {
            "kubepods"
        };
        let base = if version == Version::V1 {
            root.join("cpu")
        } else {
            root.clone()
        };
        std::fs::create_dir_all(base.join(kubepods)).unwrap();
        let cgroups = Cgroups::detect(&root, "", Driver::Cgroupfs).unwrap();
        assert_eq!(
            (cgroups.version(), cgroups.driver()),
            (version, driver),
            "detection of the fake layout"
        );
        for d in ["proc", "sys"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let host = Host::new(dir.path().join("proc"), dir.path().join("sys"));
        FakeHost { dir, host, cgroups }
    }

    fn proc_path(&self, f: &str) -> PathBuf {
        self.dir.path().join("proc").join(f)
    }

    /// `/proc/stat` with `busy` user ticks in total, spread over `cpus` CPUs.
    pub fn proc_stat(&self, busy: u64, cpus: usize) {
        let mut text = format!("cpu  {busy} 0 0 99999 0 0 0 0 0 0\n");
        for i in 0..cpus {
            text.push_str(&format!(
                "cpu{i} {} 0 0 9999 0 0 0 0 0 0\n",
                busy / cpus as u64
            ));
        }
        std::fs::write(self.proc_path("stat"), text).unwrap();
    }

    pub fn meminfo(&self, total: u64, available: u64) {
        // Every field the kernel always writes (procfs-core requires them).
        let mut text = format!(
            "MemTotal: {} kB\nMemFree: 1 kB\nMemAvailable: {} kB\n",
            total / 1024,
            available / 1024
        );
        for f in [
            "Buffers",
            "Cached",
            "SwapCached",
            "Active",
            "Inactive",
            "SwapTotal",
            "SwapFree",
            "Dirty",
            "Writeback",
            "Mapped",
            "Slab",
            "Committed_AS",
            "VmallocTotal",
            "VmallocUsed",
            "VmallocChunk",
        ] {
            text.push_str(&format!("{f}: 0 kB\n"));
        }
        std::fs::write(self.proc_path("meminfo"), text).unwrap();
    }

    fn write(&self, res: Resource, dir: &CgroupDir, content: &str) {
        let path = self.cgroups.file(res, dir);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// Counters of one cgroup: CPU time, memory (anon + unevictable, plus page cache that
    /// must not count), throttling.
    pub fn cgroup(
        &self,
        dir: &CgroupDir,
        usage_ns: u64,
        anon: u64,
        cache: u64,
        periods: u64,
        throttled: u64,
    ) {
        for s in [
            Subsystem::Cpu,
            Subsystem::Cpuacct,
            Subsystem::Memory,
            Subsystem::Cpuset,
        ] {
            std::fs::create_dir_all(self.cgroups.dir_path(s, dir)).unwrap();
        }
        match self.cgroups.version() {
            Version::V1 => {
                self.write(Resource::CpuacctUsage, dir, &usage_ns.to_string());
                self.write(
                    Resource::CpuStat,
                    dir,
                    &format!("nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 0\n"),
                );
                let stat = format!(
                    "cache {cache}\nrss {anon}\ntotal_cache {cache}\ntotal_inactive_anon {}\ntotal_active_anon {}\ntotal_unevictable 0\ntotal_inactive_file {cache}\n",
                    anon / 2,
                    anon - anon / 2
                );
                self.write(Resource::MemoryStat, dir, &stat);
            }
            Version::V2 => {
                let stat = format!(
                    "usage_usec {}\nuser_usec 0\nsystem_usec 0\nnr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec 0\n",
                    usage_ns / 1000
                );
                self.write(Resource::CpuStat, dir, &stat);
                let mem = format!(
                    "anon {anon}\nfile {cache}\ninactive_anon {}\nactive_anon {}\nunevictable 0\ninactive_file {cache}\n",
                    anon / 2,
                    anon - anon / 2
                );
                self.write(Resource::MemoryStat, dir, &mem);
            }
        }
    }

    /// One collection pass's view of this host at time 5 ms.
    pub fn env<'a>(
        &'a self,
        states: &'a crate::koordlet::informer::States,
    ) -> super::CollectEnv<'a> {
        super::CollectEnv {
            host: &self.host,
            cgroups: &self.cgroups,
            states,
            now_ms: 5,
            mono_ns: 0,
            clk_tck: 100,
        }
    }

    /// Memory usage with page cache (`memory.usage_in_bytes` / `memory.current`).
    pub fn memory_usage(&self, dir: &CgroupDir, bytes: u64) {
        self.write(Resource::MemoryUsage, dir, &bytes.to_string());
    }

    pub fn cpuset(&self, dir: &CgroupDir, cpus: &str) {
        self.write(Resource::CpusetCpus, dir, cpus);
    }

    pub fn quota(&self, dir: &CgroupDir, quota: i64, period: i64) {
        match self.cgroups.version() {
            Version::V1 => {
                self.write(Resource::CfsQuota, dir, &quota.to_string());
                self.write(Resource::CfsPeriod, dir, &period.to_string());
            }
            Version::V2 => self.write(Resource::CfsQuota, dir, &format!("{quota} {period}")),
        }
    }

    /// A pod as the informer would hand it over.
    pub fn pod(
        &self,
        name: &str,
        uid: &str,
        qos: KubeQoS,
        koord_qos: Option<&str>,
        containers: &[&str],
        batch_cpu: i64,
    ) -> PodMeta {
        let mut labels = serde_json::Map::new();
        if let Some(q) = koord_qos {
            labels.insert("koordinator.sh/qosClass".into(), q.into());
        }
        let ctrs: Vec<serde_json::Value> = containers
            .iter()
            .map(|c| serde_json::json!({"name": c, "image": "i", "resources": {"requests": {"kubernetes.io/batch-cpu": batch_cpu.to_string()}}}))
            .collect();
        let statuses: Vec<serde_json::Value> = containers
            .iter()
            .map(|c| serde_json::json!({"name": c, "containerID": format!("containerd://{c}"), "image": "i", "imageID": "", "ready": true, "restartCount": 0}))
            .collect();
        let pod = serde_json::json!({"metadata": {"name": name, "namespace": "default", "uid": uid, "labels": labels},
            "spec": {"containers": ctrs}, "status": {"phase": "Running", "qosClass": qos.name(), "containerStatuses": statuses}});
        PodMeta::new(serde_json::from_value(pod).unwrap(), &self.cgroups).unwrap()
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}
