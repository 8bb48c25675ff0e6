//! The live PodMigrationJob controller (leader only): arbitration of pending jobs, then each
//! active job moved one [`step`] forward. Evictions go through the Eviction API (PDBs
//! honoured), a delete, or the soft-eviction annotation, at most `evictQPS` (burst
//! `evictBurst`).

use std::time::Instant;

use futures::StreamExt;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::arbitration::{Pending, order};
use super::args::MigrationArgs;
use super::filter::{check, migration_check};
use super::job::{Condition, Seen, Step, reservation_for, scavengeable, step};
use super::{ANNOTATION_JOB_CREATED_BY, LABEL_EVICT_POLICY, PASSED_ARBITRATION};
use crate::api::extension::keys::{ANNOTATION_RESERVATION_ALLOCATED, ANNOTATION_SOFT_EVICTION};
use crate::api::scheduling::migration::PodMigrationJob;
use crate::api::scheduling::reservation::Reservation;
use crate::descheduler::framework::podview::PodView;
use crate::descheduler::framework::world::{World, job_active};

pub struct Controller {
    client: kube::Client,
    pub args: MigrationArgs,
    /// This instance's UUID (`koordinator.sh/job-created-by`).
    pub instance: String,
    /// The eviction rate limiter's bucket: (tokens, last refill).
    bucket: std::sync::Mutex<(f64, Instant)>,
    /// `maxConcurrentReconciles`: jobs stepped at once.
    concurrency: usize,
}

fn now_str() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn cond_json(c: &Condition) -> Value {
    json!({"type": c.type_, "status": c.status, "reason": c.reason, "message": c.message,
        "lastProbeTime": now_str(), "lastTransitionTime": now_str()})
}

type StepFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), kube::Error>> + Send + 'a>>;

fn passed_arbitration(j: &PodMigrationJob) -> bool {
    j.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PASSED_ARBITRATION))
        .is_some_and(|v| v == "true")
}

/// Migrations in flight (passed arbitration or Running) of the pods of batch Job `owner`.
fn migrating_of(owner: &str, world: &World, jobs: &[PodMigrationJob]) -> usize {
    jobs.iter()
        .filter(|j| {
            let running = j.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            running || passed_arbitration(j)
        })
        .filter(|j| {
            let r = j.spec.pod_ref.as_ref();
            let (ns, name) = (
                r.and_then(|r| r.namespace.as_deref()),
                r.and_then(|r| r.name.as_deref()),
            );
            world.by_owner.get(owner).is_some_and(|pods| {
                pods.iter()
                    .any(|p| Some(p.namespace.as_str()) == ns && Some(p.name.as_str()) == name)
            })
        })
        .count()
}

fn name_of(j: &PodMigrationJob) -> String {
    j.metadata.name.clone().unwrap_or_default()
}

impl Controller {
    pub fn new(client: kube::Client, args: MigrationArgs, instance: String) -> Controller {
        Controller {
            client,
            bucket: std::sync::Mutex::new((args.evict_burst as f64, Instant::now())),
            concurrency: args.max_concurrent_reconciles.max(1),
            args,
            instance,
        }
    }

    fn take_token(&self) -> bool {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, refilled) = &mut *b;
        let elapsed = refilled.elapsed().as_secs_f64();
        *refilled = Instant::now();
        *tokens = (*tokens + elapsed * self.args.evict_qps).min(self.args.evict_burst as f64);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn jobs(&self) -> Api<PodMigrationJob> {
        Api::all(self.client.clone())
    }

    /// One round over every job; whether any is still active (look again soon). Pending
    /// jobs are arbitrated first, in Koordinator's order; then every job that may run moves
    /// one step.
    pub async fn round(
        &mut self,
        world: &World,
        jobs: &[PodMigrationJob],
    ) -> Result<bool, kube::Error> {
        let mine: Vec<&PodMigrationJob> = jobs
            .iter()
            .filter(|j| job_active(j) && j.spec.paused != Some(true))
            .filter(|j| {
                let by = j.metadata.annotations.as_ref();
                by.and_then(|a| a.get(ANNOTATION_JOB_CREATED_BY))
                    .is_none_or(|b| b == &self.instance)
            })
            .collect();
        // The world keeps slim pod views; each job's own pod is read whole (its spec becomes
        // the Reservation's template).
        let mut pods = Vec::with_capacity(mine.len());
        for job in &mine {
            let r = job.spec.pod_ref.clone().unwrap_or_default();
            pods.push(match r.name.as_deref() {
                Some(n) => {
                    let ns = r.namespace.unwrap_or_default();
                    Api::<Pod>::namespaced(self.client.clone(), &ns)
                        .get_opt(n)
                        .await?
                }
                None => None,
            });
        }
        let passed = self.arbitrate(&mine, &pods, world, jobs).await?;
        // Up to `maxConcurrentReconciles` jobs step at once, as controller-runtime's workers.
        // (Boxed: a stream of borrowing futures trips the Send check of the spawned task.)
        let this = &*self;
        let mut steps: Vec<StepFuture<'_>> = Vec::new();
        for (k, job) in mine.iter().enumerate() {
            if passed[k] {
                steps.push(Box::pin(this.advance(job, pods[k].as_ref(), world)));
            }
        }
        let results: Vec<Result<(), kube::Error>> = futures::stream::iter(steps)
            .buffer_unordered(this.concurrency)
            .collect()
            .await;
        results.into_iter().collect::<Result<(), _>>()?;
        Ok(!mine.is_empty())
    }

    /// Arbitration over `mine` in Koordinator's order; which may run now.
    async fn arbitrate(
        &self,
        mine: &[&PodMigrationJob],
        pods: &[Option<Pod>],
        world: &World,
        jobs: &[PodMigrationJob],
    ) -> Result<Vec<bool>, kube::Error> {
        let mut passed: Vec<bool> = mine
            .iter()
            .map(|j| !self.waits_for_arbitration(j))
            .collect();
        let views: Vec<Option<PodView>> =
            pods.iter().map(|p| p.as_ref().map(PodView::from)).collect();
        let pending: Vec<usize> = (0..mine.len()).filter(|k| !passed[*k]).collect();
        let entries: Vec<Pending> = pending
            .iter()
            .map(|&k| Pending {
                job: mine[k],
                pod: views[k].as_ref(),
            })
            .collect();
        let migrating = |owner: &str| migrating_of(owner, world, jobs);
        let mut now_passed: Vec<String> = Vec::new();
        for i in order(&entries, &migrating) {
            let k = pending[i];
            if self
                .arbitrated(mine[k], views[k].as_ref(), world, jobs, &now_passed)
                .await?
            {
                now_passed.push(name_of(mine[k]));
                passed[k] = true;
            }
        }
        Ok(passed)
    }

    /// Running, already arbitrated, or arbitration off: nothing to wait for.
    fn waits_for_arbitration(&self, job: &PodMigrationJob) -> bool {
        let phase = job.status.as_ref().and_then(|s| s.phase.as_deref());
        !(phase == Some("Running")
            || passed_arbitration(job)
            || self.args.arbitration_interval.is_zero())
    }

    /// One step of a job that may run.
    async fn advance(
        &self,
        job: &PodMigrationJob,
        pod: Option<&Pod>,
        world: &World,
    ) -> Result<(), kube::Error> {
        let reservations: Api<Reservation> = Api::all(self.client.clone());
        let res_name = job
            .spec
            .reservation_options
            .as_ref()
            .and_then(|o| o.reservation_ref.as_ref()?.name.clone());
        let reservation = match &res_name {
            Some(n) => reservations.get_opt(n).await?,
            None => None,
        };
        let bound = res_name.as_deref().and_then(|n| {
            world.pods.iter().find(|p| {
                p.annotation(ANNOTATION_RESERVATION_ALLOCATED)
                    .is_some_and(|v| v.contains(&format!("\"{n}\"")))
            })
        });
        let seen = Seen {
            pod,
            reservation: reservation.as_ref(),
            bound: bound.map(|p| p.as_ref()),
            now_ms: k8s_openapi::jiff::Timestamp::now().as_millisecond(),
        };
        let next = step(job, &seen, &self.args.default_job_mode);
        tracing::debug!(job = %name_of(job), ?next, "migration step");
        self.apply(job, next, pod).await
    }

    /// Deletes the jobs [`scavengeable`] says are done with, and their Reservations.
    pub async fn scavenge(
        &self,
        jobs: &[PodMigrationJob],
        now_ms: i64,
    ) -> Result<usize, kube::Error> {
        let reservations: Api<Reservation> = Api::all(self.client.clone());
        let mut n = 0;
        for job in jobs.iter().filter(|j| scavengeable(j, now_ms)) {
            let res = job.spec.reservation_options.as_ref();
            if let Some(r) = res.and_then(|o| o.reservation_ref.as_ref()?.name.clone()) {
                match reservations.delete(&r, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            match self
                .jobs()
                .delete(&name_of(job), &DeleteParams::default())
                .await
            {
                Ok(_) => n += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(job = %name_of(job), error = %e, "cannot scavenge the PodMigrationJob")
                }
            }
        }
        Ok(n)
    }

    /// Arbitration of one pending job: it runs only once its pod passes the filter given
    /// the jobs already arbitrated (`now_passed`: those passed earlier in this round); a pod
    /// that can never pass fails the job.
    async fn arbitrated(
        &self,
        job: &PodMigrationJob,
        pod: Option<&PodView>,
        world: &World,
        jobs: &[PodMigrationJob],
        now_passed: &[String],
    ) -> Result<bool, kube::Error> {
        let Some(pod) = pod else {
            return Ok(true); // step() fails it with MissingPod
        };
        let skip = |g: &str| self.args.skipped(g);
        if let Err(why) = check(&self.args.filter, &skip, pod, world) {
            tracing::debug!(job = %name_of(job), %why, "pod may not migrate");
            let msg = format!(
                "Pod {:?} is forbidden to migrate because it does not meet the requirements",
                pod.key()
            );
            self.finish(job, "Failed", "ForbiddenMigratePod", &msg)
                .await?;
            return Ok(false);
        }
        let mut held = World {
            pods: world.pods.clone(),
            ..Default::default()
        };
        let others: Vec<PodMigrationJob> = jobs
            .iter()
            .filter(|j| name_of(j) != name_of(job))
            .filter(|j| {
                let p = j.status.as_ref().and_then(|s| s.phase.as_deref());
                p == Some("Running") || passed_arbitration(j) || now_passed.contains(&name_of(j))
            })
            .cloned()
            .collect();
        held.add_jobs(&others);
        // The job's own pod is excluded by the filter; this job is not in `others`.
        if let Err(why) = migration_check(&self.args, pod, world, &held.jobs) {
            tracing::debug!(job = %name_of(job), %why, "job waits for arbitration");
            return Ok(false);
        }
        let patch = json!({"metadata": {"annotations": {PASSED_ARBITRATION: "true"}}});
        self.merge(job, &patch).await?;
        Ok(true)
    }

    /// A merge patch of the job's metadata or spec.
    async fn merge(&self, job: &PodMigrationJob, patch: &Value) -> Result<(), kube::Error> {
        self.jobs()
            .patch(&name_of(job), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
    }

    async fn status(&self, job: &PodMigrationJob, status: Value) -> Result<(), kube::Error> {
        let patch = json!({"status": status});
        self.jobs()
            .patch_status(
                &name_of(job),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }

    async fn condition(
        &self,
        job: &PodMigrationJob,
        c: &Condition,
        extra: Value,
    ) -> Result<(), kube::Error> {
        let mut conds: Vec<Value> = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|c| {
                c.iter()
                    .filter_map(|c| serde_json::to_value(c).ok())
                    .collect()
            })
            .unwrap_or_default();
        let same = |v: &Value, k: &str, want: &str| v.get(k).and_then(Value::as_str) == Some(want);
        if extra.as_object().is_none_or(|e| e.is_empty())
            && conds.iter().any(|v| {
                same(v, "type", c.type_)
                    && same(v, "status", c.status)
                    && same(v, "reason", c.reason)
                    && same(v, "message", &c.message)
            })
        {
            return Ok(()); // unchanged: no write, so no event to wake another round
        }
        conds.retain(|v| v.get("type").and_then(Value::as_str) != Some(c.type_));
        conds.push(cond_json(c));
        let mut st = json!({"conditions": conds, "status": c.type_, "reason": c.reason, "message": c.message});
        if let (Some(o), Some(e)) = (st.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        self.status(job, st).await
    }

    async fn finish(
        &self,
        job: &PodMigrationJob,
        phase: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        tracing::info!(job = %name_of(job), phase, reason, message, "PodMigrationJob finished");
        if phase == "Failed"
            && let Some(n) = job
                .spec
                .reservation_options
                .as_ref()
                .and_then(|o| o.reservation_ref.as_ref()?.name.clone())
        {
            let api: Api<Reservation> = Api::all(self.client.clone());
            let _ = api.delete(&n, &DeleteParams::default()).await;
        }
        self.status(
            job,
            json!({"phase": phase, "reason": reason, "message": message}),
        )
        .await
    }

    async fn apply(
        &self,
        job: &PodMigrationJob,
        next: Step,
        pod: Option<&Pod>,
    ) -> Result<(), kube::Error> {
        match next {
            Step::Fail(reason, msg) => self.finish(job, "Failed", reason, &msg).await,
            Step::Start(uid) => {
                let patch = json!({"spec": {"podRef": {"uid": uid}}});
                self.merge(job, &patch).await?;
                self.status(job, json!({"phase": "Running"})).await
            }
            Step::CreateReservation => self.create_reservation(job, pod).await,
            Step::Wait(c) => self.condition(job, &c, json!({})).await,
            Step::Scheduled(node) => {
                let c = Condition {
                    type_: "ReservationScheduled",
                    status: "True",
                    reason: "Scheduled",
                    message: format!("the Reservation is on {node}"),
                };
                self.condition(job, &c, json!({"nodeName": node})).await
            }
            Step::Evict => match pod {
                Some(p) if self.take_token() => {
                    self.evict(job, p).await?;
                    let c = Condition {
                        type_: "Eviction",
                        status: "False",
                        reason: "Evicting",
                        message: "the pod is being evicted".into(),
                    };
                    self.condition(job, &c, json!({})).await
                }
                _ => Ok(()),
            },
            Step::Assigned(node) => {
                let r = job.spec.pod_ref.clone().unwrap_or_default();
                let who = format!(
                    "{}/{}",
                    r.namespace.unwrap_or_default(),
                    r.name.unwrap_or_default()
                );
                let msg = format!("Assign Pod {who:?} to node {node:?}");
                let c = Condition {
                    type_: "PodScheduled",
                    status: "True",
                    reason: "",
                    message: msg.clone(),
                };
                let extra = json!({"phase": "Succeeded", "status": "Complete", "message": msg});
                self.condition(job, &c, extra).await
            }
            Step::Succeed(new_pod) => {
                let mut extra = json!({"phase": "Succeeded"});
                if let Some(n) = new_pod {
                    extra["podRef"] = json!({"name": n, "namespace": job.spec.pod_ref.as_ref().and_then(|r| r.namespace.clone())});
                }
                let c = Condition {
                    type_: "Eviction",
                    status: "True",
                    reason: "EvictComplete",
                    message: "the pod has been migrated".into(),
                };
                self.condition(job, &c, extra).await
            }
        }
    }

    async fn create_reservation(
        &self,
        job: &PodMigrationJob,
        pod: Option<&Pod>,
    ) -> Result<(), kube::Error> {
        let Some(pod) = pod else { return Ok(()) };
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let ttl = job
            .spec
            .ttl
            .as_deref()
            .and_then(|t| crate::api::duration::parse(t).ok());
        let r = reservation_for(job, pod, ttl, now);
        let name = r.metadata.name.clone().unwrap_or_default();
        let api: Api<Reservation> = Api::all(self.client.clone());
        if let Err(e) = api.create(&PostParams::default(), &r).await
            && !matches!(&e, kube::Error::Api(s) if s.code == 409)
        {
            let c = Condition {
                type_: "ReservationCreated",
                status: "False",
                reason: "FailedCreateReservation",
                message: e.to_string(),
            };
            return self.condition(job, &c, json!({})).await;
        }
        crate::kernel::fault::point("descheduler.after-reservation");
        let patch = json!({"spec": {"reservationOptions": {"reservationRef": {"name": name, "kind": "Reservation", "apiVersion": "scheduling.koordinator.sh/v1alpha1"}}}});
        self.merge(job, &patch).await?;
        let c = Condition {
            type_: "ReservationCreated",
            status: "True",
            reason: "Created",
            message: format!("Reservation {name} created"),
        };
        self.condition(job, &c, json!({})).await
    }

    /// The pod label `koordinator.sh/evict-policy`, then the job's, then `evictionPolicy`.
    async fn evict(&self, job: &PodMigrationJob, pod: &Pod) -> Result<(), kube::Error> {
        let label = |l: Option<&std::collections::BTreeMap<String, String>>| {
            l.and_then(|l| l.get(LABEL_EVICT_POLICY)).cloned()
        };
        let policy = label(pod.metadata.labels.as_ref())
            .or_else(|| label(job.metadata.labels.as_ref()))
            .unwrap_or_else(|| self.args.eviction_policy.clone());
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let reason = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::ANNOTATION_EVICT_REASON))
            .cloned()
            .unwrap_or_default();
        tracing::info!(pod = %format!("{ns}/{name}"), job = %name_of(job), %policy, %reason, "evicting");
        let r = match policy.as_str() {
            "Delete" => api
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
            "SoftEviction" => {
                let v = json!({"timestamp": now_str(), "initiator": "koord-descheduler", "reason": reason,
                    "deleteOptions": job.spec.delete_options});
                let patch =
                    json!({"metadata": {"annotations": {ANNOTATION_SOFT_EVICTION: v.to_string()}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            _ => api.evict(&name, &EvictParams::default()).await.map(|_| ()),
        };
        match r {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                tracing::info!(pod = %name, message = %s.message, "eviction refused for now (PodDisruptionBudget)");
                Ok(())
            }
            other => other,
        }
    }
}
