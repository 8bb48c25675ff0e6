//! Prometheus' standard process series (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...), read at each scrape, as every Go component of
//! Koordinator exports them and its dashboards query them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub struct ProcessCollector;

/// The series, their help, and whether each is a counter (the rest are gauges).
const SERIES: [(&str, &str, bool); 6] = [
    (
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        true,
    ),
    (
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        false,
    ),
    (
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        false,
    ),
    (
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        false,
    ),
    (
        "process_open_fds",
        "Number of open file descriptors.",
        false,
    ),
    (
        "process_max_fds",
        "Maximum number of open file descriptors.",
        false,
    ),
];

/// The families this collector encodes, for the registry's reference.
pub fn families() -> Vec<crate::kernel::metric_docs::FamilyDoc> {
    SERIES
        .iter()
        .map(
            |(name, help, counter)| crate::kernel::metric_docs::FamilyDoc {
                name: name.to_string(),
                kind: if *counter { "counter" } else { "gauge" }.to_string(),
                help: help.to_string(),
                labels: crate::kernel::metric_docs::Labels::Named(Vec::new()),
            },
        )
        .collect()
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = crate::os::selfstat::read() else {
            return Ok(());
        };
        let values = [
            s.cpu_seconds,
            s.resident_bytes as f64,
            s.virtual_bytes as f64,
            s.start_time_seconds,
            s.open_fds as f64,
            s.max_fds as f64,
        ];
        for ((name, help, counter), v) in SERIES.iter().zip(values) {
            if *counter {
                let c = ConstCounter::new(v);
                c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
            } else {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
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
