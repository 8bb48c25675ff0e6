//! Starts the kernel, then each enabled role, and supervises the two-phase shutdown.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::cli::{Cli, Command, ConfigAction};
use crate::config::{self, Config, HostEnv, YamlSource};
use crate::kernel::role::RoleSet;
use crate::kernel::{self, Readiness, Role, RoleCtx, Shutdown, Tasks, telemetry};

mod embedded;
mod start;

const EXIT_USAGE: u8 = 2;

/// The process entry point.
pub fn main() -> ExitCode {
    // First, before most of the binary's code is touched (see `lazy_code_pages`).
    crate::os::tuning::lazy_code_pages();
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let host_mode = std::env::var("agent_mode").is_ok_and(|m| m == "hostMode");
    let argv = kernel::entry::apply(argv, host_mode);
    let go = config::goflags::translate(argv, &own_flags());
    if !go.errors.is_empty() {
        eprintln!("koord: {}", go.errors.join("\nkoord: "));
        return ExitCode::from(EXIT_USAGE);
    }
    let cli = Cli::parse_from(&go.argv);
    let host = HostEnv::capture();
    if let Some(Command::Crds { out_dir }) = &cli.command {
        return crds(out_dir.as_deref());
    }
    if let Some(Command::Manifests { out_dir }) = &cli.command {
        return manifests(out_dir.as_deref());
    }
    if let Some(Command::Docs { out_dir }) = &cli.command {
        return docs(out_dir.as_deref());
    }
    if let Some(Command::DeviceScan(args)) = &cli.command {
        return crate::device_daemon::main(args);
    }
    if let Some(Command::Simulate { what }) = &cli.command {
        return crate::simulate::main(what);
    }
    if let Some(Command::Explain { what }) = &cli.command {
        return crate::explain::main(what, cli.common.config.as_deref());
    }
    let yaml = cli.common.config.as_deref().map(YamlSource::File);
    let mut flags = Vec::new();
    flags.extend(go.layers);
    flags.extend(cli.common.providers());
    let cfg = match config::load(&host, yaml, flags) {
        Ok(cfg) => cfg,
        Err(err) => {
            eprintln!("koord: configuration error:\n{err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(Command::Config {
        action: ConfigAction::Print { role },
    }) = &cli.command
    {
        write_stdout(&config::to_yaml(&cfg, role.as_ref()));
        return ExitCode::SUCCESS;
    }
    let roles = match cli.role {
        Some(r) => Some(r),
        None if cfg.embedded.enabled => Some(RoleSet(Vec::new())),
        None => None,
    };
    let Some(roles) = roles else {
        eprintln!(
            "koord: nothing to run: pass --role=<roles> ({}) or a subcommand; see koord --help",
            kernel::role::valid_roles()
        );
        return ExitCode::from(EXIT_USAGE);
    };
    if let Err(err) = telemetry::init(
        cfg.common.log_format,
        &cfg.common.log_level,
        host.var("RUST_LOG"),
    ) {
        eprintln!("koord: {err}");
        return ExitCode::from(EXIT_USAGE);
    }
    if cfg.common.strict && !go.unsupported.is_empty() {
        let items: Vec<_> = go.unsupported.iter().map(|(_, u)| u.clone()).collect();
        eprintln!(
            "koord: configuration error:\n{}",
            kernel::compat::errors(&items).join("\n")
        );
        return ExitCode::from(EXIT_USAGE);
    }
    for note in &go.notes {
        tracing::info!("{note}");
    }
    let runtime = match build_runtime(&roles) {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("koord: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run_roles(cfg, roles, host, go.unsupported))
}

/// Where else the admin endpoint answers, for the probes of Koordinator's manifests: the
/// manager's `--health-probe-addr`, the descheduler's `healthzBindAddress` and
/// `metricsBindAddress` (each once, never the admin address itself).
fn more_admin_addrs(cfg: &Config, roles: &RoleSet) -> Vec<(&'static str, std::net::SocketAddr)> {
    let mut out = Vec::new();
    out.extend(
        cfg.common
            .health_probe_addr
            .map(|a| ("common.healthProbeAddr", a)),
    );
    if roles.0.contains(&Role::Descheduler)
        && let Ok(d) = crate::descheduler::load(&cfg.descheduler)
    {
        out.extend(
            d.serve_on
                .into_iter()
                .map(|a| ("descheduler healthzBindAddress", a)),
        );
    }
    let mut seen = vec![cfg.common.admin_addr];
    out.retain(|(_, a)| {
        let new = !seen.contains(a);
        seen.push(*a);
        new
    });
    out
}

/// koord's own long flags, which Koordinator-flag translation leaves to clap.
fn own_flags() -> Vec<String> {
    use clap::CommandFactory;
    let mut out: Vec<String> = Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    out.extend(["help".to_string(), "version".to_string()]);
    out
}

/// A DaemonSet pod on a 96-core node would otherwise start 96 workers and as many malloc
/// arenas; the koordlet's work is a few timers and one watch, so two of each are plenty.
/// A node agent also keeps only the code it runs in memory (`shed_cached_code`).
fn build_runtime(roles: &RoleSet) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if roles.node_agent_only() {
        crate::os::tuning::limit_malloc_arenas(2);
        crate::os::tuning::shed_cached_code();
        builder.worker_threads(2).max_blocking_threads(16);
    }
    builder.enable_all().build()
}

/// A node agent keeps in memory the code it runs each minute, not what it ran once
/// (`shed_idle_code`). The first shed comes once start-up is over — ready, and
/// [`SETTLE`] later for the first passes after that — rather than a minute in: start-up
/// maps ~15 MiB of the binary (client set-up, the informer's first list) that would
/// otherwise stay resident until then.
fn shed_idle_code_every_minute(tasks: &Tasks, shutdown: &Shutdown, readiness: &Readiness) {
    const SETTLE: Duration = Duration::from_secs(10);
    const EVERY: Duration = Duration::from_secs(60);
    let shutdown = shutdown.clone();
    let readiness = readiness.clone();
    tasks.spawn("node-agent/idle-code", async move {
        let mut waited = Duration::ZERO;
        while waited < EVERY && !readiness.is_ready() {
            if !shutdown.sleep(Duration::from_secs(1)).await {
                return Ok(());
            }
            waited += Duration::from_secs(1);
        }
        // Not ready within a minute: shed as before, each minute.
        let mut next = if waited < EVERY {
            SETTLE
        } else {
            Duration::ZERO
        };
        loop {
            if !shutdown.sleep(next).await {
                return Ok(());
            }
            tokio::task::spawn_blocking(crate::os::tuning::shed_idle_code).await?;
            next = EVERY;
        }
    });
}

/// Writes to stdout; a closed pipe (`koord crds | head`) is not an error worth a panic.
fn write_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

fn crds(out_dir: Option<&std::path::Path>) -> ExitCode {
    let Some(dir) = out_dir else {
        write_stdout(&crate::api::crds::render_all());
        return ExitCode::SUCCESS;
    };
    for crd in crate::api::crds::all() {
        let path = dir.join(crate::api::crds::file_name(&crd));
        if let Err(err) = std::fs::write(&path, crate::api::crds::to_yaml(&crd)) {
            eprintln!("koord: writing {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn manifests(out_dir: Option<&std::path::Path>) -> ExitCode {
    let Some(dir) = out_dir else {
        let list: Vec<String> = crate::manifests::all()
            .into_iter()
            .map(|m| m.path)
            .collect();
        write_stdout(&(list.join("\n") + "\n"));
        return ExitCode::SUCCESS;
    };
    match crate::manifests::write(dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("koord: writing manifests into {}: {err}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn docs(out_dir: Option<&std::path::Path>) -> ExitCode {
    let Some(dir) = out_dir else {
        let list: Vec<&str> = crate::docs::all().iter().map(|p| p.path).collect();
        write_stdout(&(list.join("\n") + "\n"));
        return ExitCode::SUCCESS;
    };
    match crate::docs::write(dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "koord: writing the references into {}: {err}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM and SIGINT, installed before anything starts.
struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Starts what the roles share, runs the roles until the process is told to stop, then
/// stops the rest; a start-up failure is printed once and exits 1.
async fn run_roles(
    cfg: Config,
    roles: RoleSet,
    host: HostEnv,
    flag_warnings: Vec<(Role, kernel::compat::Unsupported)>,
) -> ExitCode {
    crate::os::tuning::raise_nofile_limit();
    crate::os::tuning::return_large_allocations();
    let p = start::Process::new();
    for (role, u) in &flag_warnings {
        kernel::compat::report(&p.metrics, role.name(), std::slice::from_ref(u));
    }
    if roles.node_agent_only() {
        shed_idle_code_every_minute(&p.tasks, &p.shutdown, &p.readiness);
    }
    let mut up = match start::start(cfg, &roles, &host, &p).await {
        Ok(up) => up,
        Err(err) => {
            eprintln!("koord: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(roles = %roles.names(), admin = %up.cfg.common.admin_addr, "koord starting");
    let common = Arc::new(up.cfg.common.clone());
    for (role, ready) in roles.0.iter().copied().zip(std::mem::take(&mut up.handles)) {
        let ctx = RoleCtx {
            role,
            shutdown: p.shutdown.clone(),
            tasks: p.tasks.clone(),
            ready,
            metrics: p.metrics.clone(),
            cluster: up.cluster.clone(),
            common: common.clone(),
        };
        p.tasks
            .spawn(role.name(), run_role(role, up.cfg.clone(), ctx));
    }
    let grace = Duration::from_secs(up.cfg.common.shutdown_grace_seconds);
    let code = supervise(&p.shutdown, &p.tasks, &mut up.signals, &p.readiness, grace).await;
    stop(up).await;
    code
}

/// After the roles: the embedded control plane, then the admin endpoint.
async fn stop(up: start::Started) {
    if let Some((server, _, runtime)) = up.embedded {
        if let Some(rt) = runtime {
            rt.shutdown().await;
        }
        server.shutdown().await;
        tracing::info!(
            "embedded API server stopped; data kept under {}",
            up.cfg.common.data_dir.display()
        );
    }
    up.admin.stop.cancel();
    if let Err(err) = up.admin.server.await {
        tracing::warn!(%err, "admin server task ended abnormally");
    }
}

/// Makes the data dir this process's own: private (0700, ours, not a link) and below
/// directories no other user can swap it in; with `exclusive` (embedded mode: the API
/// server's and the node runtime's state), held by no other koord for the process's life.
/// A koordlet and a runtime proxy on one node share the default data dir, each in its own
/// folder of it.
fn claim_data_dir(
    dir: &std::path::Path,
    exclusive: bool,
) -> Result<Option<crate::os::files::DirLock>, crate::os::files::FileError> {
    use crate::os::files;
    files::check_ancestors(dir)?;
    files::private_dir(dir)?;
    exclusive.then(|| files::lock_dir(dir)).transpose()
}

async fn run_role(role: Role, cfg: Config, ctx: RoleCtx) -> anyhow::Result<()> {
    match role {
        Role::Manager => crate::manager::run(cfg.manager, ctx).await,
        Role::Scheduler => crate::scheduler::run(cfg.scheduler, ctx).await,
        Role::Descheduler => crate::descheduler::run(cfg.descheduler, ctx).await,
        Role::Koordlet => crate::koordlet::run(cfg.koordlet, ctx).await,
        Role::RuntimeProxy => {
            crate::runtime_proxy::run(cfg.runtime_proxy, ctx, cfg.embedded.enabled).await
        }
    }
}

/// Waits for the first signal (or a failed role), drains, and aborts on a second signal
/// or when the grace period runs out. Exit 0 only after a clean drain with no failure.
async fn supervise(
    shutdown: &Shutdown,
    tasks: &Tasks,
    signals: &mut Signals,
    readiness: &Readiness,
    grace: Duration,
) -> ExitCode {
    tokio::select! {
        sig = signals.next() => {
            tracing::info!(signal = sig, grace_seconds = grace.as_secs(), "draining; send the signal again to abort");
            shutdown.begin_drain();
        }
        _ = shutdown.draining() => tracing::warn!("a role failed; draining"),
    }
    readiness.set_draining();
    tasks.close();
    let clean = tokio::select! {
        _ = tasks.wait() => true,
        sig = signals.next() => {
            tracing::warn!(signal = sig, "second signal; aborting");
            false
        }
        _ = tokio::time::sleep(grace) => {
            tracing::warn!(grace_seconds = grace.as_secs(), "grace period elapsed; aborting");
            false
        }
    };
    if !clean {
        shutdown.abort();
        let aborted = tasks.abort_all();
        tracing::warn!(tasks = ?aborted, "aborted unfinished tasks");
        let _ = tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await;
        return ExitCode::FAILURE;
    }
    let failures = tasks.failures();
    if failures.is_empty() {
        tracing::info!("drained cleanly");
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            eprintln!("koord: {f}");
        }
        ExitCode::FAILURE
    }
}
