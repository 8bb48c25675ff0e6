//! The workload controllers of `--embedded` (a real cluster has kube-controller-manager):
//! ReplicaSet, Deployment, Job and the garbage collector's background deletion of
//! dependents whose ReplicaSet, Deployment or Job owner is gone. One loop, woken by any change of what it
//! watches and every few seconds; it writes through the API like any client.

pub mod deployment;
pub mod job;
pub mod replicaset;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::kernel::{Shutdown, Tasks};

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
    let (reader, writer) = reflector::store();
    let stream = crate::kernel::watch::watch::<K>(
        client.clone(),
        None,
        watcher::Config::default(),
        Default::default(),
    )
    .reflect(writer);
    let (kick, shutdown) = (kick.clone(), shutdown.clone());
    tasks.spawn(format!("controllers/watch/{what}"), async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = shutdown.draining() => return Ok(()),
                ev = stream.next() => match ev {
                    None => return Ok(()),
                    Some(Ok(_)) => kick.notify_one(),
                    Some(Err(e)) => tracing::debug!(what, error = %e, "watch error; retrying"),
                },
            }
        }
    });
    reader
}

struct Caches {
    pods: Store<Pod>,
    sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    jobs: Store<Job>,
}

/// Starts the controllers; they stop when the process drains.
pub fn spawn(client: Client, tasks: &Tasks, shutdown: &Shutdown) {
    let kick = Arc::new(Notify::new());
    let caches = Caches {
        pods: watch_into(&client, &kick, tasks, shutdown, "pods"),
        sets: watch_into(&client, &kick, tasks, shutdown, "replicasets"),
        deployments: watch_into(&client, &kick, tasks, shutdown, "deployments"),
        jobs: watch_into(&client, &kick, tasks, shutdown, "jobs"),
    };
    let shutdown = shutdown.clone();
    tasks.spawn("controllers", async move {
        let _ = caches.pods.wait_until_ready().await;
        let _ = caches.sets.wait_until_ready().await;
        let _ = caches.deployments.wait_until_ready().await;
        let _ = caches.jobs.wait_until_ready().await;
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
        let uid = d.metadata.uid.as_deref();
        let owned: Vec<&ReplicaSet> = sets
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| replicaset::controller_of(&r.metadata).map(|o| o.uid.as_str()) == uid)
            .collect();
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
        let uid = j.metadata.uid.as_deref();
        let owned: Vec<&Pod> = all_pods
            .iter()
            .copied()
            .filter(|p| replicaset::controller_of(&p.metadata).map(|o| o.uid.as_str()) == uid)
            .collect();
        apply_job(client, j, job::plan(j, &owned, &now, now_s)).await;
    }
    let owners = Owners {
        deployments: &deployments,
        sets: &sets,
        jobs: &jobs,
    };
    collect_garbage(client, &owners, &pods).await;
}

async fn apply_job(client: &Client, j: &Job, plan: job::Plan) {
    let ns = j.metadata.namespace.clone().unwrap_or_default();
    let name = j.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    if plan.create > 0
        && let Some(template) = job::pod_from(j)
        && let Ok(pod) = serde_json::from_value::<Pod>(template)
    {
        for _ in 0..plan.create.min(MAX_CREATES) {
            report(
                "pod",
                &name,
                pods.create(&PostParams::default(), &pod).await,
            );
        }
    }
    for p in &plan.delete {
        report("pod", p, pods.delete(p, &DeleteParams::default()).await);
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    if let Some(status) = plan.status {
        let p = json!({"status": status});
        let r = jobs
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(p))
            .await;
        report("job", &name, r);
    }
    if plan.expire {
        report(
            "job",
            &name,
            jobs.delete(&name, &DeleteParams::background()).await,
        );
    }
}

/// The owners whose dependents the garbage collector looks after.
struct Owners<'a> {
    deployments: &'a [Arc<Deployment>],
    sets: &'a [Arc<ReplicaSet>],
    jobs: &'a [Arc<Job>],
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
    let name = rs.metadata.name.clone().unwrap_or_default();
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
    if plan.create > 0
        && let Some(template) = replicaset::pod_from(rs)
        && let Ok(pod) = serde_json::from_value::<Pod>(template)
    {
        for _ in 0..plan.create.min(MAX_CREATES) {
            report(
                "pod",
                &name,
                pods.create(&PostParams::default(), &pod).await,
            );
        }
    }
    for p in &plan.delete {
        report("pod", p, pods.delete(p, &DeleteParams::default()).await);
    }
    if let Some(status) = plan.status {
        let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        let p = json!({"status": status});
        report(
            "replicaset",
            &name,
            sets.patch_status(&name, &pp, &Patch::Merge(p)).await,
        );
    }
}

/// Background deletion: ReplicaSets whose controlling Deployment is gone, and pods whose
/// controlling ReplicaSet or Job is gone (kube's garbage collector for these kinds).
async fn collect_garbage(client: &Client, o: &Owners<'_>, pods: &[Arc<Pod>]) {
    fn uids<K: kube::Resource>(items: &[Arc<K>]) -> HashSet<String> {
        items.iter().filter_map(|i| i.meta().uid.clone()).collect()
    }
    let (live_d, live_rs, live_j) = (uids(o.deployments), uids(o.sets), uids(o.jobs));
    for rs in o.sets {
        if let Some(owner) = replicaset::controller_of(&rs.metadata)
            && owner.kind == "Deployment"
            && !live_d.contains(&owner.uid)
            && rs.metadata.deletion_timestamp.is_none()
        {
            let ns = rs.metadata.namespace.clone().unwrap_or_default();
            let name = rs.metadata.name.clone().unwrap_or_default();
            let api: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
            report(
                "replicaset",
                &name,
                api.delete(&name, &DeleteParams::background()).await,
            );
        }
    }
    for p in pods {
        let gone =
            replicaset::controller_of(&p.metadata).is_some_and(|owner| match owner.kind.as_str() {
                "ReplicaSet" => !live_rs.contains(&owner.uid),
                "Job" => !live_j.contains(&owner.uid),
                _ => false,
            });
        if gone && p.metadata.deletion_timestamp.is_none() {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            report(
                "pod",
                &name,
                api.delete(&name, &DeleteParams::default()).await,
            );
        }
    }
}
