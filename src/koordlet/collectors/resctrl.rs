//! ResctrlCollector (gate `ResctrlCollector`, Koordinator's `collectors/resctrl`): the LLC
//! occupancy and memory bandwidth counters of the `LSR`, `LS` and `BE` resctrl groups
//! (the RdtResctrl strategy creates them) per L3 cache domain, read from
//! `<sys>/fs/resctrl/<QoS>/mon_data/mon_L3_<id>/{llc_occupancy,mbm_local_bytes,
//! mbm_total_bytes}` as `resctrl_resource_llc{qos,cache_id}` and
//! `resctrl_resource_mb{qos,cache_id,resctrl_type=mb,resctrl_mb_type}` (on `/metrics` as
//! Koordinator's `koordlet_resctrl_llc_occupancy` and `koordlet_resctrl_memory_bandwidth`).

use std::path::Path;
use std::time::Duration;

use super::{CollectEnv, CollectError, Collector, Samples, Shared};
use crate::koordlet::store::{MetricKind, Point, SeriesKey};

const GROUPS: [&str; 3] = ["LSR", "LS", "BE"];
const MB_TYPES: [&str; 2] = ["mbm_local_bytes", "mbm_total_bytes"];

pub struct Resctrl {
    interval: Duration,
}

impl Resctrl {
    pub fn new(interval: Duration) -> Self {
        Resctrl { interval }
    }
}

/// `(cache id, domain dir)` of a group's monitoring domains (`mon_L3_00` → 0).
fn domains(group: &Path) -> Result<Vec<(u32, std::path::PathBuf)>, CollectError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(group.join("mon_data"))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        let id = name
            .split('_')
            .nth(2)
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| CollectError(format!("resctrl: cannot get cacheid from {name}")))?;
        out.push((id, entry.path()));
    }
    out.sort();
    Ok(out)
}

fn counter(path: &Path) -> Result<f64, CollectError> {
    let text = crate::os::knob::read(path).map_err(|e| CollectError(e.to_string()))?;
    text.trim()
        .parse::<u64>()
        .map(|v| v as f64)
        .map_err(|_| CollectError(format!("{}: not a counter: {text:?}", path.display())))
}

impl Collector for Resctrl {
    fn name(&self) -> &'static str {
        "resctrl"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn collect(
        &mut self,
        env: &CollectEnv<'_>,
        _shared: &mut Shared,
        out: &mut Samples,
    ) -> Result<(), CollectError> {
        let root = env.host.resctrl_root();
        if !root.join("schemata").exists() {
            return Err(CollectError(format!(
                "resctrl: no resctrl filesystem at {}",
                root.display()
            )));
        }
        let ts = env.now_ms;
        let mut failed = Vec::new();
        for qos in GROUPS {
            let group = root.join(qos);
            let Ok(doms) = domains(&group) else {
                // The group appears once RdtResctrl creates it.
                continue;
            };
            for (id, dir) in doms {
                let cache_id = id.to_string();
                match counter(&dir.join("llc_occupancy")) {
                    Ok(v) => out.push((
                        SeriesKey::new(
                            MetricKind::ResctrlLlc,
                            &[("qos", qos), ("cache_id", &cache_id)],
                        ),
                        Point { ts, value: v },
                    )),
                    Err(e) => failed.push(e.0),
                }
                for mb in MB_TYPES {
                    match counter(&dir.join(mb)) {
                        Ok(v) => out.push((
                            SeriesKey::new(
                                MetricKind::ResctrlMb,
                                &[
                                    ("qos", qos),
                                    ("cache_id", &cache_id),
                                    ("resctrl_type", "mb"),
                                    ("resctrl_mb_type", mb),
                                ],
                            ),
                            Point { ts, value: v },
                        )),
                        Err(e) => failed.push(e.0),
                    }
                }
            }
        }
        match failed.first() {
            Some(e) => Err(CollectError(e.clone())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::koordlet::collectors::testutil::FakeHost;
    use crate::koordlet::informer::States;
    use crate::os::{Driver, Version};

    fn run(fake: &FakeHost) -> Result<Samples, CollectError> {
        let states = States::default();
        let env = fake.env(&states);
        let mut out = Samples::new();
        Resctrl::new(Duration::from_secs(1)).collect(&env, &mut Shared::default(), &mut out)?;
        Ok(out)
    }

    #[test]
    fn counters_per_group_and_cache_domain() {
        let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
        let root = fake.dir.path().join("sys/fs/resctrl");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("schemata"), "L3:0=fff;1=fff\n").unwrap();
        for (qos, base) in [("LS", 1000u64), ("BE", 2000)] {
            for id in ["00", "01"] {
                let d = root.join(qos).join("mon_data").join(format!("mon_L3_{id}"));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join("llc_occupancy"), format!("{}\n", base + 1)).unwrap();
                std::fs::write(d.join("mbm_local_bytes"), format!("{}\n", base + 2)).unwrap();
                std::fs::write(d.join("mbm_total_bytes"), format!("{}\n", base + 3)).unwrap();
            }
        }
        let out = run(&fake).unwrap();
        let value = |key: &SeriesKey| out.iter().find(|(k, _)| k == key).map(|(_, p)| p.value);
        let llc = SeriesKey::new(MetricKind::ResctrlLlc, &[("qos", "BE"), ("cache_id", "1")]);
        assert_eq!(llc.encode(), "resctrl_resource_llc{cache_id=1,qos=BE}");
        assert_eq!(value(&llc), Some(2001.0));
        let mb = SeriesKey::new(
            MetricKind::ResctrlMb,
            &[
                ("qos", "LS"),
                ("cache_id", "0"),
                ("resctrl_type", "mb"),
                ("resctrl_mb_type", "mbm_total_bytes"),
            ],
        );
        assert_eq!(value(&mb), Some(1003.0));
        assert_eq!(out.len(), 2 * 2 * 3, "LSR has no group yet");
    }

    #[test]
    fn no_resctrl_filesystem_is_an_error_naming_it() {
        let fake = FakeHost::new(Version::V1, Driver::Cgroupfs, false);
        let err = run(&fake).unwrap_err().0;
        assert!(err.contains("fs/resctrl"), "{err}");
    }
}
