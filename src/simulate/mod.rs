//! `koord simulate`: record a cluster (one list and watch per kind the scheduler,
//! descheduler and manager read) and replay the recording through the roles' own decision
//! code in virtual time, under the recorded configuration or another — to see what a new
//! scheduler profile, slo-controller-config or descheduler configuration does on one's own
//! cluster before rolling it out, and how many more pods of a kind would fit.

pub mod decoded;
pub mod driver;
pub mod passes;
pub mod record;
pub mod recording;
pub mod replay;
pub mod report;
pub mod whatif;
pub mod world;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::ConfigMap;

#[derive(clap::Subcommand, Debug)]
pub enum SimulateCommand {
    /// Record a cluster's objects and every change to them into one file
    Record(record::RecordArgs),
    /// Run the scheduler, manager and descheduler code over a recording in virtual time
    Replay(ReplayArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Json,
    Text,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The recording (from `koord simulate record`)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
    /// A KubeSchedulerConfiguration (default: the built-in profile)
    #[arg(long, value_name = "FILE")]
    pub scheduler_config: Option<PathBuf>,
    /// An slo-controller-config ConfigMap (default: the one recorded)
    #[arg(long, value_name = "FILE")]
    pub slo_config: Option<PathBuf>,
    /// A DeschedulerConfiguration (default: the built-in one)
    #[arg(long, value_name = "FILE")]
    pub descheduler_config: Option<PathBuf>,
    /// Replay a second time with this file in place of the first run's:
    /// scheduler-config=FILE, slo-config=FILE or descheduler-config=FILE (repeatable)
    #[arg(long, value_name = "KEY=FILE")]
    pub compare: Vec<String>,
    /// After the replay, schedule copies of a pod: 'FILE x N' (a Pod, or a workload's
    /// spec.template)
    #[arg(long, value_name = "'FILE x N'")]
    pub add: Option<String>,
    /// Virtual time between batch-resource samples (Go duration)
    #[arg(long, default_value = "60s")]
    pub sample_every: String,
    /// Write report.json and report.html (self-contained) into this directory
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Output,
}

pub fn main(cmd: &SimulateCommand) -> ExitCode {
    let result = match cmd {
        SimulateCommand::Record(args) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(record::run(args))),
        SimulateCommand::Replay(args) => replay_main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("koord simulate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The files one replay runs under.
#[derive(Default, Clone)]
struct Files {
    scheduler: Option<PathBuf>,
    slo: Option<PathBuf>,
    descheduler: Option<PathBuf>,
}

fn options(
    name: &str,
    f: &Files,
    embedded: bool,
    every_ms: u64,
) -> anyhow::Result<replay::Options> {
    let mut scheduler = crate::scheduler::config::from_file(f.scheduler.as_deref())
        .map_err(|e| anyhow::anyhow!("scheduler configuration: {e}"))?;
    if embedded {
        // As the embedded cluster's scheduler: it also serves pods of default-scheduler.
        crate::scheduler::config::serve_default_scheduler(&mut scheduler);
    }
    let slo = f.slo.as_deref().map(read_config_map).transpose()?;
    Ok(replay::Options {
        name: name.to_string(),
        scheduler,
        slo,
        descheduler: f.descheduler.clone(),
        sample_every_ms: every_ms,
    })
}

fn read_config_map(path: &Path) -> anyhow::Result<ConfigMap> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let cm: ConfigMap = serde_yaml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a ConfigMap: {e}", path.display()))?;
    Ok(cm)
}

fn compared(base: &Files, flags: &[String]) -> anyhow::Result<Option<Files>> {
    if flags.is_empty() {
        return Ok(None);
    }
    let mut f = base.clone();
    for flag in flags {
        let (key, file) = flag
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--compare {flag:?}: expected KEY=FILE"))?;
        let file = Some(PathBuf::from(file));
        match key {
            "scheduler-config" => f.scheduler = file,
            "slo-config" => f.slo = file,
            "descheduler-config" => f.descheduler = file,
            other => anyhow::bail!(
                "--compare {flag:?}: unknown key {other:?} (scheduler-config, slo-config, descheduler-config)"
            ),
        }
    }
    Ok(Some(f))
}

fn replay_main(args: &ReplayArgs) -> anyhow::Result<()> {
    let every = crate::api::duration::parse(&args.sample_every)
        .map_err(|e| anyhow::anyhow!("--sample-every: {e}"))?;
    let add = args
        .add
        .as_deref()
        .map(whatif::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!(e))?;
    let (header, _) = recording::open::<recording::RawChange>(&args.file)?;
    let base = Files {
        scheduler: args.scheduler_config.clone(),
        slo: args.slo_config.clone(),
        descheduler: args.descheduler_config.clone(),
    };
    let every_ms = every.as_millis() as u64;
    let mut sets = vec![("A", base.clone())];
    if let Some(b) = compared(&base, &args.compare)? {
        sets.push(("B", b));
    }
    let mut runs = Vec::new();
    for (name, files) in &sets {
        let opts = options(name, files, header.embedded, every_ms)?;
        let run = driver::replay(&args.file, &opts, add.as_ref())
            .map_err(|e| anyhow::anyhow!("replay {name}: {e:#}"))?;
        runs.push(run);
    }
    if let Some(dir) = &args.report_dir {
        write_reports(dir, &header, &runs)?;
    }
    match args.output {
        Output::Json => println!("{:#}", report::to_json(&header, &runs)),
        Output::Text => print!("{}", report::to_text(&runs)),
    }
    Ok(())
}

fn write_reports(
    dir: &Path,
    header: &recording::Header,
    runs: &[replay::Run],
) -> anyhow::Result<()> {
    let err = |p: &Path, e: std::io::Error| anyhow::anyhow!("{}: {e}", p.display());
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let json = dir.join("report.json");
    let text = format!("{:#}\n", report::to_json(header, runs));
    std::fs::write(&json, text).map_err(|e| err(&json, e))?;
    let html = dir.join("report.html");
    std::fs::write(&html, report::to_html(header, runs)).map_err(|e| err(&html, e))?;
    Ok(())
}
