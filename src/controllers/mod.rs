//! The workload controllers of `--embedded` (a real cluster has kube-controller-manager):
//! ReplicaSet, Deployment, Job, DaemonSet, StatefulSet and the garbage collector (background, foreground
//! and orphan deletion for those kinds). One loop, woken by any change of what it
//! watches and every few seconds; it writes through the API like any client.

pub mod daemonset;
pub mod deployment;
pub mod gc;
pub mod job;
pub mod replicaset;
pub mod revisions;
pub mod statefulset;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::kernel::{Shutdown, Tasks, pump};

const RESYNC: Duration = Duration::from_secs(5);
/// Pods created per ReplicaSet per pass (kube's slow start caps bursts similarly).
const MAX_CREATES: usize = 100;

fn watch_into<K: crate::kernel::watch::Watchable>(
    client: &Client,
    kick: &Arc<Notify>,
    tasks: &Tasks,
    shutdown: &Shutdown,
    what: &'static str,
) -> Store<K> {
    let kick = kick.clone();
    let (reader, index) = pump::reflect::<K, _>(move |_| kick.notify_one());
    let name = format!("controllers/watch/{what}");
    let cfg = watcher::Config::default();
    pump::spawn::<K, _>(tasks, name, client.clone(), None, cfg, index, shutdown);
    reader
}

struct Caches {
    pods: Store<Pod>,
    sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    jobs: Store<Job>,
    daemons: Store<DaemonSet>,
    stateful: Store<StatefulSet>,
    revisions: Store<ControllerRevision>,
    claims: Store<PersistentVolumeClaim>,
    nodes: Store<Node>,
}

/// Starts the controllers; they stop when the process drains.
pub fn spawn(client: Client, tasks: &Tasks, shutdown: &Shutdown) {
    let kick = Arc::new(Notify::new());
    let caches = Caches {
        pods: watch_into(&client, &kick, tasks, shutdown, "pods"),
        sets: watch_into(&client, &kick, tasks, shutdown, "replicasets"),
        deployments: watch_into(&client, &kick, tasks, shutdown, "deployments"),
        jobs: watch_into(&client, &kick, tasks, shutdown, "jobs"),
        daemons: watch_into(&client, &kick, tasks, shutdown, "daemonsets"),
        stateful: watch_into(&client, &kick, tasks, shutdown, "statefulsets"),
        revisions: watch_into(&client, &kick, tasks, shutdown, "controllerrevisions"),
        claims: watch_into(&client, &kick, tasks, shutdown, "persistentvolumeclaims"),
        nodes: watch_into(&client, &kick, tasks, shutdown, "nodes"),
    };
    let shutdown = shutdown.clone();
    tasks.spawn("controllers", async move {
        let _ = caches.pods.wait_until_ready().await;
        let _ = caches.sets.wait_until_ready().await;
        let _ = caches.deployments.wait_until_ready().await;
        let _ = caches.jobs.wait_until_ready().await;
        let _ = caches.daemons.wait_until_ready().await;
        let _ = caches.stateful.wait_until_ready().await;
        let _ = caches.revisions.wait_until_ready().await;
        let _ = caches.claims.wait_until_ready().await;
        let _ = caches.nodes.wait_until_ready().await;
        loop {
            pass(&client, &caches).await;
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                _ = kick.notified() => tokio::time::sleep(Duration::from_millis(50)).await,
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    });
}

async fn pass(client: &Client, c: &Caches) {
    let deployments = c.deployments.state();
    let sets = c.sets.state();
    let pods = c.pods.state();
    for d in &deployments {
        let owned = controlled_by(sets.iter().map(|r| r.as_ref()), d.metadata.uid.as_deref());
        apply_deployment(client, d, deployment::plan(d, &owned)).await;
    }
    let all_pods: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    for rs in &sets {
        apply_replica_set(client, rs, replicaset::plan(rs, &all_pods)).await;
    }
    let jobs = c.jobs.state();
    let (now, now_s) = (
        crate::api::time::now(),
        k8s_openapi::jiff::Timestamp::now().as_second(),
    );
    for j in &jobs {
        let owned = controlled_by(all_pods.iter().copied(), j.metadata.uid.as_deref());
        apply_job(client, j, job::plan(j, &owned, &now, now_s)).await;
    }
    let daemons = c.daemons.state();
    let nodes = c.nodes.state();
    let node_refs: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
    let revs = c.revisions.state();
    for ds in &daemons {
        let owned = controlled_by(all_pods.iter().copied(), ds.metadata.uid.as_deref());
        if let Some(spec) = &ds.spec {
            let owner = revisions::Owner {
                api_version: "apps/v1",
                kind: "DaemonSet",
                meta: &ds.metadata,
                template: &spec.template,
                history_limit: spec.revision_history_limit.unwrap_or(10),
            };
            let name = |hash: &str| revisions::name_for(&ds.metadata, hash);
            let hash = daemonset::revision_of(ds);
            keep_history(client, &owner, &hash, &revs, &owned, name).await;
        }
        apply_daemon_set(client, ds, daemonset::plan(ds, &node_refs, &owned)).await;
    }
    let stateful = c.stateful.state();
    let claims = c.claims.state();
    for s in &stateful {
        let owned = controlled_by(all_pods.iter().copied(), s.metadata.uid.as_deref());
        let history = controlled_by(revs.iter().map(|r| r.as_ref()), s.metadata.uid.as_deref());
        if let Some(spec) = &s.spec {
            let owner = revisions::Owner {
                api_version: "apps/v1",
                kind: "StatefulSet",
                meta: &s.metadata,
                template: &spec.template,
                history_limit: spec.revision_history_limit.unwrap_or(10),
            };
            let hash = statefulset::template_hash(s);
            keep_history(client, &owner, &hash, &revs, &owned, str::to_string).await;
        }
        let mut plan = statefulset::plan(s, &owned, &history);
        let ns = s.metadata.namespace.as_deref();
        let mine: Vec<&PersistentVolumeClaim> = claims
            .iter()
            .map(|c| c.as_ref())
            .filter(|c| c.metadata.namespace.as_deref() == ns)
            .collect();
        plan.claim_owners = statefulset::claim_owners(s, &owned, &mine);
        apply_stateful_set(client, s, plan).await;
    }
    let mut objs = Vec::new();
    gc_objs(&mut objs, &gc::DEPLOYMENT, &deployments);
    gc_objs(&mut objs, &gc::REPLICA_SET, &sets);
    gc_objs(&mut objs, &gc::JOB, &jobs);
    gc_objs(&mut objs, &gc::DAEMON_SET, &daemons);
    gc_objs(&mut objs, &gc::STATEFUL_SET, &stateful);
    gc_objs(&mut objs, &gc::CONTROLLER_REVISION, &revs);
    gc_objs(&mut objs, &gc::PERSISTENT_VOLUME_CLAIM, &claims);
    gc_objs(&mut objs, &gc::POD, &pods);
    gc::apply(client, gc::plan(&objs)).await;
}

/// The owner's template history kept as kube keeps it; `name` turns a pod's revision
/// label into the revision's name.
async fn keep_history(
    client: &Client,
    owner: &revisions::Owner<'_>,
    hash: &str,
    all: &[Arc<ControllerRevision>],
    pods: &[&Pod],
    name: impl Fn(&str) -> String,
) {
    let owned = controlled_by(all.iter().map(|r| r.as_ref()), owner.meta.uid.as_deref());
    let in_use = pods
        .iter()
        .filter(|p| replicaset::active(p))
        .filter_map(|p| p.metadata.labels.as_ref()?.get(revisions::LABEL_HASH))
        .map(|l| name(l))
        .collect();
    let plan = revisions::plan(owner, hash, &owned, &in_use);
    let ns = owner.meta.namespace.clone().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    if let Some(cr) = plan.create {
        match serde_json::from_value::<ControllerRevision>(cr) {
            Ok(cr) => report(
                "revision",
                hash,
                api.create(&PostParams::default(), &cr).await,
            ),
            Err(e) => tracing::warn!(error = %e, "controller revision"),
        }
    }
    if let Some((n, rev)) = plan.renumber {
        let p = json!({"revision": rev});
        report(
            "revision",
            &n,
            api.patch(&n, &PatchParams::default(), &Patch::Merge(p))
                .await,
        );
    }
    for n in plan.delete {
        report(
            "revision",
            &n,
            api.delete(&n, &DeleteParams::default()).await,
        );
    }
}

/// The objects whose controller has this uid.
fn controlled_by<'a, K: kube::Resource + 'a>(
    items: impl Iterator<Item = &'a K>,
    uid: Option<&str>,
) -> Vec<&'a K> {
    items
        .filter(|i| replicaset::controller_of(i.meta()).map(|o| o.uid.as_str()) == uid)
        .collect()
}

/// Claims first (one that exists stays as it is), then the pod that mounts them.
async fn apply_stateful_set(client: &Client, s: &StatefulSet, plan: statefulset::Plan) {
    let ns = s.metadata.namespace.clone().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    for (name, owners) in &plan.claim_owners {
        let p = json!({"metadata": {"ownerReferences": owners}});
        let r = claims
            .patch(name, &PatchParams::default(), &Patch::Merge(p))
            .await;
        report("claim", name, r);
    }
    let mut new = Vec::new();
    for (pod, needs) in plan.create.into_iter().take(MAX_CREATES) {
        for c in needs {
            let name = c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match serde_json::from_value::<PersistentVolumeClaim>(c) {
                Ok(c) => report(
                    "claim",
                    &name,
                    claims.create(&PostParams::default(), &c).await,
                ),
                Err(e) => tracing::warn!(claim = %name, error = %e, "claim from template"),
            }
        }
        new.extend(serde_json::from_value::<Pod>(pod).ok());
    }
    write_pods_and_status::<StatefulSet>(client, &s.metadata, new, &plan.delete, plan.status).await;
}

fn gc_objs<'a, K: kube::Resource>(
    out: &mut Vec<gc::Obj<'a>>,
    kind: &'static gc::Kind,
    items: &'a [Arc<K>],
) {
    out.extend(items.iter().map(|i| gc::Obj {
        kind,
        meta: i.meta(),
    }));
}

async fn apply_job(client: &Client, j: &Job, plan: job::Plan) {
    let from = |i: Option<i32>| {
        let mut v = job::pod_from(j, i)?;
        if let Some(i) = i {
            job::per_index::annotate(&mut v, &plan.index_failures, i);
        }
        serde_json::from_value::<Pod>(v).ok()
    };
    let new: Vec<Pod> = if plan.indexes.is_empty() {
        from(None).map_or_else(Vec::new, |p| vec![p; plan.create.min(MAX_CREATES)])
    } else {
        plan.indexes
            .iter()
            .take(MAX_CREATES)
            .filter_map(|i| from(Some(*i)))
            .collect()
    };
    write_pods_and_status::<Job>(client, &j.metadata, new, &plan.delete, plan.status).await;
    if plan.expire {
        let ns = j.metadata.namespace.clone().unwrap_or_default();
        let name = j.metadata.name.clone().unwrap_or_default();
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        report(
            "job",
            &name,
            jobs.delete(&name, &DeleteParams::background()).await,
        );
    }
}

/// Creates `new` pods and deletes `gone` ones in the owner's namespace, then merges
/// `status` into the owner's status.
async fn write_pods_and_status<K>(
    client: &Client,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    new: Vec<Pod>,
    gone: &[String],
    status: Option<Value>,
) where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let ns = owner.namespace.clone().unwrap_or_default();
    let name = owner.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for pod in &new {
        report("pod", &name, pods.create(&PostParams::default(), pod).await);
    }
    for p in gone {
        report("pod", p, pods.delete(p, &DeleteParams::default()).await);
    }
    if let Some(status) = status {
        let api: Api<K> = Api::namespaced(client.clone(), &ns);
        let p = json!({"status": status});
        let r = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(p))
            .await;
        report("status", &name, r);
    }
}

async fn apply_daemon_set(client: &Client, ds: &DaemonSet, plan: daemonset::Plan) {
    let new: Vec<Pod> = plan
        .create
        .iter()
        .take(MAX_CREATES)
        .filter_map(|node| daemonset::pod_for(ds, node))
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    write_pods_and_status::<DaemonSet>(client, &ds.metadata, new, &plan.delete, plan.status).await;
}

fn report<T>(what: &str, name: &str, r: Result<T, kube::Error>) {
    match r {
        Ok(_) => {}
        // Someone else changed it first, or it is gone: the next pass sees the news.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
        Err(e) => tracing::warn!(what, name, error = %e, "controller write failed"),
    }
}

async fn apply_deployment(client: &Client, d: &Deployment, plan: deployment::Plan) {
    let ns = d.metadata.namespace.clone().unwrap_or_default();
    let name = d.metadata.name.clone().unwrap_or_default();
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let pp = PatchParams::default();
    if let Some(rs) = plan.create {
        match serde_json::from_value::<ReplicaSet>(rs) {
            Ok(rs) => report(
                "replicaset",
                &name,
                sets.create(&PostParams::default(), &rs).await,
            ),
            Err(e) => tracing::warn!(deployment = %name, error = %e, "new ReplicaSet"),
        }
    }
    let revision = |rev: i64| json!({"metadata": {"annotations": {deployment::ANN_REVISION: rev.to_string()}}});
    if let Some((rs, rev)) = plan.revision {
        let r = sets.patch(&rs, &pp, &Patch::Merge(revision(rev))).await;
        report("replicaset", &rs, r);
    }
    if let Some(rev) = plan.deployment_revision {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let r = deployments
            .patch(&name, &pp, &Patch::Merge(revision(rev)))
            .await;
        report("deployment", &name, r);
    }
    for (rs, n) in plan.scale {
        let p = json!({"spec": {"replicas": n}});
        report(
            "replicaset",
            &rs,
            sets.patch(&rs, &pp, &Patch::Merge(p)).await,
        );
    }
    for rs in plan.delete {
        report(
            "replicaset",
            &rs,
            sets.delete(&rs, &DeleteParams::background()).await,
        );
    }
    if let Some(status) = plan.status {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let p = json!({"status": status});
        report(
            "deployment",
            &name,
            deployments.patch_status(&name, &pp, &Patch::Merge(p)).await,
        );
    }
}

async fn apply_replica_set(client: &Client, rs: &ReplicaSet, plan: replicaset::Plan) {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pp = PatchParams::default();
    for p in &plan.adopt {
        let owner = replicaset::owner_ref("apps/v1", "ReplicaSet", &rs.metadata);
        let patch = json!({"metadata": {"ownerReferences": [owner]}});
        report("pod", p, pods.patch(p, &pp, &Patch::Merge(patch)).await);
    }
    for p in &plan.release {
        let patch = json!({"metadata": {"ownerReferences": Value::Null}});
        report("pod", p, pods.patch(p, &pp, &Patch::Merge(patch)).await);
    }
    let template = replicaset::pod_from(rs).and_then(|v| serde_json::from_value::<Pod>(v).ok());
    let new = template.map(|p| vec![p; plan.create.min(MAX_CREATES)]);
    write_pods_and_status::<ReplicaSet>(
        client,
        &rs.metadata,
        new.unwrap_or_default(),
        &plan.delete,
        plan.status,
    )
    .await;
}
