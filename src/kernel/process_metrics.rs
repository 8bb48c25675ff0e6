//! Prometheus' standard process series (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...), read at each scrape, as every Go component of
//! Koordinator exports them and its dashboards query them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = crate::os::selfstat::read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(s.cpu_seconds);
        let e = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            cpu.metric_type(),
        )?;
        cpu.encode(e)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                s.resident_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                s.virtual_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                s.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                s.open_fds as f64,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                s.max_fds as f64,
            ),
        ];
        for (name, help, v) in gauges {
            let g = ConstGauge::new(v);
            let e = encoder.encode_descriptor(name, help, None, g.metric_type())?;
            g.encode(e)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_process_exports_the_standard_series() {
        let m = crate::kernel::Metrics::new();
        let names: std::collections::BTreeSet<String> =
            m.scrape().samples.into_iter().map(|s| s.metric).collect();
        if !std::path::Path::new("/proc/self/stat").exists() {
            eprintln!("skipped: no /proc");
            return;
        }
        for n in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
        ] {
            assert!(names.contains(n), "{n}: {names:?}");
        }
    }
}
