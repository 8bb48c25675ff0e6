//! ColdPageCollector (gate `ColdPageCollector`, Koordinator's `coldmemoryresource` with
//! kidled): on a kernel with kidled (`<sys>/kernel/mm/kidled/`), it turns the scanner on
//! (scan period 5 s, hierarchical stats, as Koordinator) and reads each cgroup's
//! `memory.idle_page_stats`. Cold bytes are the idle file pages of every age bucket
//! (`cfei`, `dfei`, `cfui`, `dfui`, Koordinator's `GetColdPageTotalBytes`); the usage
//! with hot page cache is the usage with page cache minus them. Series:
//! `{node,pod,container,host_application}_memory_cold_page_size` and
//! `*_memory_with_hot_page_usage`.

use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::informer::PodMeta;
use crate::koordlet::store::{MetricKind, Point, SeriesKey};
use crate::os::{CgroupDir, Resource};

/// The idle file-page rows whose buckets are cold bytes.
const COLD_ROWS: [&str; 4] = ["cfei", "dfei", "cfui", "dfui"];

/// Cold bytes in a `memory.idle_page_stats` text.
pub fn cold_bytes(stats: &str) -> Result<u64, CollectError> {
    let mut found = false;
    let mut total = 0u64;
    for line in stats.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next().filter(|n| COLD_ROWS.contains(n)) else {
            continue;
        };
        found = true;
        for v in fields {
            let n = v
                .parse::<u64>()
                .map_err(|_| CollectError(format!("idle_page_stats: {name}: {v:?}")))?;
            total = total.saturating_add(n);
        }
    }
    if !found {
        return Err(CollectError(
            "idle_page_stats: no cfei/dfei/cfui/dfui rows".into(),
        ));
    }
    Ok(total)
}

pub struct ColdPage {
    interval: Duration,
    /// kidled switched on (first pass).
    started: bool,
    disabled: Option<String>,
}

impl ColdPage {
    pub fn new(interval: Duration) -> Self {
        ColdPage {
            interval,
            started: false,
            disabled: None,
        }
    }

    /// Turns kidled's scanner on; `Err` with the reason where the kernel has no kidled.
    fn start(env: &CollectEnv<'_>) -> Result<(), String> {
        let kidled = env.host.sys_root.join("kernel/mm/kidled");
        for (file, value) in [("scan_period_in_seconds", "5"), ("use_hierarchy", "1")] {
            let path = kidled.join(file);
            if !path.exists() {
                return Err(format!("no kidled on this kernel ({})", path.display()));
            }
            crate::os::knob::write(&path, value).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// (cold bytes, usage with hot page cache) of one cgroup.
fn cgroup(env: &CollectEnv<'_>, dir: &CgroupDir) -> Result<(f64, f64), CollectError> {
    let cold = cold_bytes(&env.cgroups.read(Resource::MemoryIdlePageStats, dir)?)?;
    let usage = env.cgroups.read_i64(Resource::MemoryUsage, dir)?.max(0) as u64;
    Ok((cold as f64, usage.saturating_sub(cold) as f64))
}

impl Collector for ColdPage {
    fn name(&self) -> &'static str {
        "coldPage"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn disabled(&self) -> Option<&str> {
        self.disabled.as_deref()
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        _shared: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        if self.disabled.is_some() {
            return Ok(());
        }
        if !self.started {
            if let Err(reason) = Self::start(env) {
                tracing::warn!(reason = %reason, "ColdPageCollector disabled");
                self.disabled = Some(reason);
                return Ok(());
            }
            self.started = true;
        }
        let ts = env.now_ms;
        let mut push =
            |cold: MetricKind, hot: MetricKind, labels: &[(&'static str, &str)], v: (f64, f64)| {
                out.push((SeriesKey::new(cold, labels), Point { ts, value: v.0 }));
                out.push((SeriesKey::new(hot, labels), Point { ts, value: v.1 }));
            };
        let root = CgroupDir::new("");
        let node_cold = cold_bytes(&env.cgroups.read(Resource::MemoryIdlePageStats, &root)?)?;
        let node_used = env.host.memory_used_with_cache()?;
        push(
            MetricKind::NodeMemoryColdPageSize,
            MetricKind::NodeMemoryWithHotPage,
            &[],
            (node_cold as f64, node_used.saturating_sub(node_cold) as f64),
        );
        for pod in env.states.pods.iter() {
            // A pod whose cgroup is gone (not running) is skipped, as Koordinator does.
            let Ok(v) = cgroup(env, &pod.dir) else {
                continue;
            };
            let uid = [("pod_uid", pod.uid.as_str())];
            push(
                MetricKind::PodMemoryColdPageSize,
                MetricKind::PodMemoryWithHotPage,
                &uid,
                v,
            );
            for c in &pod.containers {
                if let Ok(v) = cgroup(env, &c.dir) {
                    let id = [("container_id", PodMeta::container_id(c))];
                    push(
                        MetricKind::ContainerMemoryColdPageSize,
                        MetricKind::ContainerMemoryWithHotPage,
                        &id,
                        v,
                    );
                }
            }
        }
        for app in &env.states.slo().host_applications {
            let dir = super::host_app::app_dir(env.cgroups, app);
            let (Some(name), Some(dir)) = (app.name.as_deref(), dir) else {
                continue;
            };
            if let Ok(v) = cgroup(env, &dir) {
                push(
                    MetricKind::HostAppMemoryColdPageSize,
                    MetricKind::HostAppMemoryWithHotPage,
                    &[("host_app_name", name)],
                    v,
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extension::qos::KubeQoS;
    use crate::koordlet::collectors::testutil::FakeHost;
    use crate::koordlet::informer::States;
    use crate::os::{Driver, Version};
    use std::sync::Arc;

    /// Koordinator's `kidled_util_test.go` sample.
    const STATS: &str = "# version: 1.0
# page_scans: 24
# slab_scans: 0
# scan_period_in_seconds: 120
# use_hierarchy: 1
# buckets: 1,2,5,15,30,60,120,240
#
#   _-----=> clean/dirty
#  / _----=> swap/file
# | / _---=> evict/unevict
# || / _--=> inactive/active
# ||| / _-=> slab
# |||| /
# |||||             [1,2)          [2,5)         [5,15)        [15,30)        [30,60)       [60,120)      [120,240)     [240,+inf)
  csei            2613248        4657152       18182144      293683200              0              0              0              0
  dsei            2568192        5140480       15306752       48648192              0              0              0              0
  cfei            2633728        4640768       66531328      340172800              0              0              0              0
  dfei                  0              0           4096              0              0              0              0              0
  csui                  0              0              0              0              0              0              0              0
  dsui                  0              0              0              0              0              0              0              0
  cfui                  0              0              0              0              0              0              0              0
  dfui                  0              0              0              0              0              0              0              0
  csea             765952        1044480        3784704       52834304              0              0              0              0
  dsea             286720         270336        1564672        5390336              0              0              0              0
  cfea           10908672       12754944       54108160      256589824              0              0              0              0
  dfea                  0              0              0              0              0              0              0              0
  csua                  0              0              0              0              0              0              0              0
  dsua                  0              0              0              0              0              0              0              0
  cfua                  0              0              0              0              0              0              0              0
  dfua                  0              0              0              0              0              0              0              0
  slab                  0              0              0              0              0              0              0              0
";

    #[test]
    fn cold_bytes_are_the_idle_file_pages_of_every_bucket() {
        let want = 2633728 + 4640768 + 66531328 + 340172800 + 4096;
        assert_eq!(cold_bytes(STATS).unwrap(), want);
        assert!(cold_bytes("# version: 1.0\n").is_err());
        assert!(cold_bytes("cfei 1 x\n").is_err());
    }

    fn idle(fake: &FakeHost, dir: &CgroupDir, cold: u64) {
        let path = fake.cgroups.file(Resource::MemoryIdlePageStats, dir);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = format!(
            "# version: 1.0\n  cfei {} 0\n  dfei 0 {}\n  csei 999 999\n",
            cold / 2,
            cold - cold / 2
        );
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn kidled_is_switched_on_and_cold_and_hot_bytes_are_recorded() {
        let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
        let kidled = fake.dir.path().join("sys/kernel/mm/kidled");
        std::fs::create_dir_all(&kidled).unwrap();
        std::fs::write(kidled.join("scan_period_in_seconds"), "0").unwrap();
        std::fs::write(kidled.join("use_hierarchy"), "0").unwrap();
        fake.meminfo(16 << 30, 10 << 30);
        idle(&fake, &CgroupDir::new(""), 3 << 30);
        let pod = fake.pod("p", "uid-p", KubeQoS::Burstable, None, &["c"], 0);
        fake.cgroup(&pod.dir, 0, 100 << 20, 0, 0, 0);
        fake.memory_usage(&pod.dir, 500 << 20);
        idle(&fake, &pod.dir, 200 << 20);
        let states = States {
            pods: Arc::new(vec![pod.clone()]),
            ..Default::default()
        };
        let mut c = ColdPage::new(Duration::from_secs(5));
        let mut out = Samples::new();
        c.collect(&fake.env(&states), &mut Shared::default(), &mut out)
            .unwrap();
        let read = |f: &str| std::fs::read_to_string(kidled.join(f)).unwrap();
        assert_eq!(
            (
                read("scan_period_in_seconds").as_str(),
                read("use_hierarchy").as_str()
            ),
            ("5", "1")
        );
        let value = |k: SeriesKey| out.iter().find(|(s, _)| *s == k).map(|(_, p)| p.value);
        assert_eq!(
            value(SeriesKey::node(MetricKind::NodeMemoryColdPageSize)),
            Some((3u64 << 30) as f64)
        );
        // MemTotal − MemFree (16 GiB − 1 KiB) − cold.
        let node_hot = value(SeriesKey::node(MetricKind::NodeMemoryWithHotPage)).unwrap();
        assert_eq!(node_hot, ((16u64 << 30) - 1024 - (3u64 << 30)) as f64);
        let uid = SeriesKey::pod(MetricKind::PodMemoryColdPageSize, "uid-p");
        assert_eq!(uid.encode(), "pod_memory_cold_page_size{pod_uid=uid-p}");
        assert_eq!(value(uid), Some((200u64 << 20) as f64));
        let hot = SeriesKey::pod(MetricKind::PodMemoryWithHotPage, "uid-p");
        assert_eq!(
            value(hot),
            Some((300u64 << 20) as f64),
            "usage with cache − cold"
        );
    }

    #[test]
    fn a_kernel_without_kidled_disables_the_collector_once() {
        let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
        let states = States::default();
        let mut c = ColdPage::new(Duration::from_secs(5));
        let mut out = Samples::new();
        c.collect(&fake.env(&states), &mut Shared::default(), &mut out)
            .unwrap();
        assert!(out.is_empty());
        assert!(
            c.disabled().unwrap().contains("kidled"),
            "{:?}",
            c.disabled()
        );
    }
}
