//! `koord explain`: the live roles' decision code run offline on snapshot files (what
//! `kubectl get -o yaml` prints), so every number koord computes can be reproduced and
//! explained. No network, no API server; the JSON output is a contract tests rely on.

pub mod deschedule;
pub mod noderesource;
pub mod schedule;
pub mod snapshot;

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

pub use snapshot::{Snapshot, SnapshotError};

#[derive(Subcommand, Debug)]
pub enum ExplainCommand {
    /// Batch and mid resources the manager would write for every node in the snapshot
    Noderesource(ExplainArgs),
    /// Where the scheduler would place every pending pod, and why, node by node
    Schedule(ScheduleArgs),
    /// What one descheduling pass would migrate, and why, node by node
    Deschedule(DescheduleArgs),
}

/// `--config` (a KubeSchedulerConfiguration, `kubescheduler.config.k8s.io/v1`; default: the
/// built-in koord-scheduler profile) is koord's global `--config` flag, read here as the
/// scheduler configuration.
#[derive(Args, Debug)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub common: ExplainArgs,
    /// The scheduler's feature gates, as Koordinator's `--feature-gates`: Name=true,Name=false
    #[arg(long = "feature-gates", value_name = "GATES")]
    pub feature_gates: Option<String>,
}

/// `--config` is the descheduler's configuration (a DeschedulerConfiguration).
#[derive(Args, Debug)]
pub struct DescheduleArgs {
    #[command(flatten)]
    pub common: ExplainArgs,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Snapshot file (YAML or JSON; `-` for stdin); repeatable
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Fix the clock (RFC 3339), e.g. 2026-01-01T00:00:00Z
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
    pub output: Output,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Json,
    Text,
}

/// Why `koord explain` could not answer: the flag, file, configuration field or object
/// that was wrong.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("--now {raw:?} is not an RFC 3339 time: {reason}")]
    Now { raw: String, reason: String },
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(transparent)]
    Config(#[from] crate::api::field::FieldError),
    #[error("{kind} {name}: {reason}")]
    Object {
        kind: &'static str,
        name: String,
        reason: String,
    },
}

/// Parses `--now`; the current time when absent.
pub fn now_ms(now: Option<&str>) -> Result<i64, ExplainError> {
    match now {
        None => Ok(k8s_openapi::jiff::Timestamp::now().as_millisecond()),
        Some(raw) => raw
            .parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .map_err(|e| ExplainError::Now {
                raw: raw.to_string(),
                reason: e.to_string(),
            }),
    }
}

pub fn main(cmd: &ExplainCommand, config: Option<&std::path::Path>) -> ExitCode {
    match run(cmd, config) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("koord explain: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: &ExplainCommand, config: Option<&std::path::Path>) -> Result<String, ExplainError> {
    match cmd {
        ExplainCommand::Noderesource(args) => run_noderesource(args),
        ExplainCommand::Schedule(args) => run_schedule(args, config),
        ExplainCommand::Deschedule(args) => run_deschedule(args, config),
    }
}

fn load(args: &ExplainArgs) -> Result<(Snapshot, i64), ExplainError> {
    let now = now_ms(args.now.as_deref())?;
    let snap = Snapshot::load(&args.files)?;
    for w in &snap.warnings {
        eprintln!("warning: {w}");
    }
    Ok((snap, now))
}

fn run_noderesource(args: &ExplainArgs) -> Result<String, ExplainError> {
    let (snap, now) = load(args)?;
    let (plans, warnings) = noderesource::run(&snap, now);
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(match args.output {
        Output::Json => format!("{:#}\n", noderesource::to_json(&plans)),
        Output::Text => noderesource::to_text(&plans),
    })
}

fn run_schedule(
    args: &ScheduleArgs,
    config: Option<&std::path::Path>,
) -> Result<String, ExplainError> {
    // The same file loading as the live scheduler.
    let mut cfg = crate::scheduler::config::from_file(config)?;
    if let Some(text) = &args.feature_gates {
        let user = crate::kernel::features::parse_flag(text)
            .map_err(|e| crate::api::field::FieldError::invalid("--feature-gates", e))?;
        let table = &crate::scheduler::features::SCHEDULER_GATES;
        for w in table.unsupported(&user) {
            eprintln!("warning: {}", w.message);
        }
        cfg.set_gates(&table.from_user(&user));
    }
    let (snap, now) = load(&args.common)?;
    let placements = schedule::run(&snap, &cfg, now)?;
    Ok(match args.common.output {
        Output::Json => format!("{:#}\n", schedule::to_json(&placements)),
        Output::Text => schedule::to_text(&placements),
    })
}

fn run_deschedule(
    args: &DescheduleArgs,
    config: Option<&std::path::Path>,
) -> Result<String, ExplainError> {
    let (snap, now) = load(&args.common)?;
    let report = deschedule::run(&snap, config, now)?;
    Ok(match args.common.output {
        Output::Json => format!("{:#}\n", report.to_json()),
        Output::Text => report.to_text(),
    })
}
