//! `koord simulate record`: one list and one watch per kind the scheduler, descheduler
//! and manager read, every change written to the recording as it arrives, until the
//! duration or size bound, or Ctrl-C. A progress line on stderr while it records.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::mpsc;

use super::recording::{Change, FORMAT, Header, Op, Writer};

/// (group, version, kind, plural, namespace to watch in: "" for all).
pub const KINDS: &[(&str, &str, &str, &str, &str)] = &[
    ("", "v1", "Node", "nodes", ""),
    ("", "v1", "Pod", "pods", ""),
    (
        "slo.koordinator.sh",
        "v1alpha1",
        "NodeMetric",
        "nodemetrics",
        "",
    ),
    ("slo.koordinator.sh", "v1alpha1", "NodeSLO", "nodeslos", ""),
    (
        "topology.node.k8s.io",
        "v1alpha1",
        "NodeResourceTopology",
        "noderesourcetopologies",
        "",
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Device",
        "devices",
        "",
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Reservation",
        "reservations",
        "",
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "PodMigrationJob",
        "podmigrationjobs",
        "",
    ),
    (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "ClusterNetworkTopology",
        "clusternetworktopologies",
        "",
    ),
    (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "ElasticQuota",
        "elasticquotas",
        "",
    ),
    (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "PodGroup",
        "podgroups",
        "",
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "",
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "",
    ),
    ("", "v1", "PersistentVolume", "persistentvolumes", ""),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "",
    ),
    ("storage.k8s.io", "v1", "StorageClass", "storageclasses", ""),
    ("storage.k8s.io", "v1", "CSINode", "csinodes", ""),
    ("apps", "v1", "ReplicaSet", "replicasets", ""),
    ("apps", "v1", "StatefulSet", "statefulsets", ""),
    ("", "v1", "Service", "services", ""),
    (
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "",
    ),
    // Koordinator's own configuration (slo-controller-config, the GPU templates).
    ("", "v1", "ConfigMap", "configmaps", "koordinator-system"),
];

#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Where to write the recording (gzip-compressed JSON lines)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The cluster to record (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Stop after this long (Go duration: 30s, 10m, 1h; 0 records until Ctrl-C)
    #[arg(long, default_value = "10m")]
    pub duration: String,
    /// Stop once the recording holds this many bytes of JSON (before compression)
    #[arg(long, default_value_t = 1 << 30)]
    pub max_bytes: u64,
}

type Event = (usize, Result<watcher::Event<DynamicObject>, watcher::Error>);

pub async fn run(args: &RecordArgs) -> anyhow::Result<()> {
    let duration = crate::api::duration::parse(&args.duration)
        .map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let host = crate::kernel::host::HostEnv::capture();
    let cluster = crate::kernel::cluster::resolve(args.kubeconfig.as_deref(), &host).await?;
    let client = cluster.client;
    let (served, skipped) = served_kinds(&client).await;
    let header = Header {
        format: FORMAT.into(),
        started_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        server: cluster.source,
        kinds: served.iter().map(|i| KINDS[*i].2.to_string()).collect(),
        skipped: skipped.clone(),
        embedded: crate::kernel::cluster::is_koord_embedded(&client).await,
    };
    let mut out = Writer::create(&args.output, &header)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    for s in &skipped {
        eprintln!("koord simulate record: {s} not served by this cluster; not recorded");
    }
    let (tx, mut rx) = mpsc::channel::<Event>(4096);
    let mut tasks = tokio::task::JoinSet::new();
    for i in served {
        tasks.spawn(watch_kind(client.clone(), i, tx.clone()));
    }
    drop(tx);
    let started = Instant::now();
    let deadline = (!duration.is_zero()).then(|| started + duration);
    let mut progress = Progress::new(started);
    let why = loop {
        let until = deadline.map(tokio::time::Instant::from_std);
        tokio::select! {
            ev = rx.recv() => match ev {
                Some((i, Ok(e))) => write_event(&mut out, started, i, e)?,
                Some((i, Err(e))) => tracing::warn!(kind = KINDS[i].2, error = %e, "watch error; retrying"),
                None => break "every watch ended",
            },
            _ = async { match until { Some(u) => tokio::time::sleep_until(u).await, None => std::future::pending().await } } => break "duration reached",
            _ = tokio::signal::ctrl_c() => break "interrupted",
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if out.raw_bytes >= args.max_bytes {
            break "size bound reached";
        }
        progress.show(&out, false);
    };
    tasks.abort_all();
    progress.show(&out, true);
    let changes = out.changes;
    out.finish()
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.output.display()))?;
    eprintln!(
        "koord simulate record: {why}; wrote {} ({} changes)",
        args.output.display(),
        changes
    );
    Ok(())
}

/// The kinds the server serves (by discovery, no list), and the ones it does not.
async fn served_kinds(client: &kube::Client) -> (Vec<usize>, Vec<String>) {
    let mut served = Vec::new();
    let mut skipped = Vec::new();
    let mut lists = std::collections::HashMap::new();
    for (i, (group, version, kind, plural, _)) in KINDS.iter().enumerate() {
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        if !lists.contains_key(&gv) {
            let list = if group.is_empty() {
                client.list_core_api_resources(version).await
            } else {
                client.list_api_group_resources(&gv).await
            };
            lists.insert(gv.clone(), list.ok());
        }
        let has = lists[&gv]
            .as_ref()
            .is_some_and(|l| l.resources.iter().any(|r| r.name == *plural));
        if has {
            served.push(i);
        } else {
            skipped.push(format!("{kind} ({gv})"));
        }
    }
    (served, skipped)
}

async fn watch_kind(client: kube::Client, i: usize, tx: mpsc::Sender<Event>) {
    let (group, version, kind, plural, ns) = KINDS[i];
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: kube::Api<DynamicObject> = if ns.is_empty() {
        kube::Api::all_with(client, &ar)
    } else {
        kube::Api::namespaced_with(client, ns, &ar)
    };
    let cfg = watcher::Config::default().page_size(500);
    let mut stream = std::pin::pin!(watcher(api, cfg));
    while let Some(ev) = stream.next().await {
        if tx.send((i, ev)).await.is_err() {
            return;
        }
    }
}

fn write_event(
    out: &mut Writer,
    started: Instant,
    i: usize,
    e: watcher::Event<DynamicObject>,
) -> anyhow::Result<()> {
    use watcher::Event::*;
    let (group, version, kind, _, _) = KINDS[i];
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let object = |o: DynamicObject| -> Value {
        let mut v = serde_json::to_value(o).unwrap_or_default();
        v["apiVersion"] = Value::String(api_version.clone());
        v["kind"] = Value::String(kind.to_string());
        // Who wrote which field is no input to any decision, and half an object's size.
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    };
    let (op, obj) = match e {
        Init => (Op::Init, Value::Null),
        InitApply(o) => (Op::Sync, object(o)),
        InitDone => (Op::Synced, Value::Null),
        Apply(o) => (Op::Apply, object(o)),
        Delete(o) => (Op::Delete, object(o)),
    };
    let c = Change {
        t: started.elapsed().as_millis() as u64,
        op,
        kind: kind.to_string(),
        object: obj,
    };
    out.change(&c)?;
    Ok(())
}

struct Progress {
    started: Instant,
    shown: Instant,
    tty: bool,
}

impl Progress {
    fn new(started: Instant) -> Progress {
        Progress {
            started,
            shown: started,
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// Once a second on a terminal (rewriting the line), every ten seconds otherwise.
    fn show(&mut self, out: &Writer, last: bool) {
        let every = if self.tty { 1 } else { 10 };
        if !last && self.shown.elapsed() < Duration::from_secs(every) {
            return;
        }
        self.shown = Instant::now();
        let line = format!(
            "recording {:.0} s: {} changes, {:.1} MiB",
            self.started.elapsed().as_secs_f64(),
            out.changes,
            out.raw_bytes as f64 / (1 << 20) as f64
        );
        if self.tty {
            eprint!("\r{line}{}", if last { "\n" } else { "" });
        } else {
            eprintln!("{line}");
        }
    }
}
