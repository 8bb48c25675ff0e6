//! The live loop's side of a scheduling cycle: its outcome becomes the queue's next step
//! and, in the background, the API writes it needs (binding, status, preemption).

use std::sync::Arc;
use std::time::Instant;

use super::bind::binding_cycle;
use super::{BindDone, Placed, Scheduler, binder};
use crate::scheduler::cycle;
use crate::scheduler::framework::PodInfo;
use crate::scheduler::metrics::Outcome;

impl Scheduler {
    /// An inline batch's members: each taken from the queue (where it waited for its turn)
    /// and acted on as its own attempt; the batch's duration observed once.
    pub(super) fn act_batch(
        &mut self,
        fi: usize,
        batch: Vec<(Arc<PodInfo>, cycle::Attempt)>,
        started: Instant,
    ) {
        let ok = batch.iter().all(|(_, a)| a.node().is_some());
        for (member, attempt) in batch {
            let pod = self.queue.take_member(&member.key).unwrap_or(member);
            let profile = &self.frameworks[fi].scheduler_name;
            self.monitor.start(&pod.key, profile, started);
            self.act(fi, pod, attempt, started);
        }
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.koord.inline_batch(ok, seconds);
    }

    /// Turns a cycle's outcome into the queue's next step and the API writes it needs.
    pub(super) fn act(
        &mut self,
        fi: usize,
        pod: Arc<PodInfo>,
        attempt: cycle::Attempt,
        started: Instant,
    ) {
        let result = attempt.result.as_ref();
        let now = Instant::now();
        let binding = matches!(
            attempt.outcome,
            cycle::Outcome::Placed { .. } | cycle::Outcome::Reservation { .. }
        );
        if !binding {
            self.monitor_complete(&pod.key);
        }
        self.observe_job_preemption(&pod, &attempt.post_filter);
        match attempt.outcome {
            cycle::Outcome::Gated { plugin, reason } => {
                tracing::debug!(pod = %pod.key, plugin, %reason, "waiting at PreEnqueue");
                self.queue.gate(pod);
            }
            cycle::Outcome::Unschedulable {
                message,
                nomination,
                rejected,
            } => {
                self.observe_unschedulable(fi, result, nomination.as_ref(), started);
                self.note_unschedulable(fi, &pod.key, result);
                let nominated = nomination.as_ref().map(|n| n.node.clone());
                tracing::info!(pod = %pod.key, reason = %message, ?nominated, "unschedulable");
                // A victim waiting at Permit is sent back to the queue, not deleted.
                let sent_back: Vec<String> = rejected.iter().flat_map(|r| r.keys.clone()).collect();
                let nomination = nomination.map(|mut n| {
                    n.victims.retain(|v| !sent_back.contains(&v.key));
                    n
                });
                for r in rejected {
                    self.reject_waiting(r);
                }
                self.queue.requeue_unschedulable(pod.clone(), now);
                self.write_unschedulable(pod, message, nomination);
            }
            cycle::Outcome::Failed { plugin, reason, .. } => {
                tracing::warn!(pod = %pod.key, plugin, %reason, "reserve or prebind failed");
                self.observe(fi, result, Outcome::Error, started);
                self.queue.requeue_backoff(pod, now);
            }
            cycle::Outcome::PermitRejected {
                plugin,
                reason,
                rejected,
                ..
            } => {
                tracing::info!(pod = %pod.key, plugin, %reason, "rejected at Permit");
                self.observe(fi, result, Outcome::Unschedulable, started);
                self.reject_waiting(rejected);
                self.queue.requeue_backoff(pod, now);
            }
            cycle::Outcome::Reservation {
                name,
                node,
                before,
                allocatable,
                annotations,
                pre_allocated,
            } => {
                tracing::debug!(reservation = %name, %node, "placed");
                self.observe(fi, result, Outcome::Scheduled, started);
                self.assumed_reservations
                    .insert(name.clone(), (before, pre_allocated.clone()));
                let client = self.client.clone();
                self.binds.spawn(async move {
                    let result = crate::scheduler::reservation_live::bind(
                        &client,
                        (&name, &node),
                        &allocatable,
                        &annotations,
                        &pre_allocated,
                    )
                    .await;
                    BindDone { pod, node, result }
                });
            }
            cycle::Outcome::Placed {
                node,
                modified,
                permit,
            } => {
                tracing::debug!(pod = %pod.key, %node, "placed");
                self.observe(fi, result, Outcome::Scheduled, started);
                let state = attempt.result.map(|r| r.state).unwrap_or_default();
                let permit = self.permit_wait(&pod.key, permit);
                let placed = Placed {
                    state,
                    modified,
                    permit,
                };
                let history = self.queue.history(&pod.key);
                self.bind(fi, pod, node, placed, (started, history));
            }
        }
    }

    /// The binding cycle of a placed pod, in the background.
    fn bind(
        &mut self,
        fi: usize,
        pod: Arc<PodInfo>,
        node: String,
        placed: Placed,
        (started, (attempts, first)): (Instant, (u32, Option<Instant>)),
    ) {
        let (client, metrics) = (self.client.clone(), self.metrics.clone());
        let (fws, waiting) = (self.frameworks.clone(), self.waiting.clone());
        let lease = self.leadership.clone();
        self.binds.spawn(async move {
            let fw = &fws[fi];
            let api = (&client, &lease);
            let result = binding_cycle(fw, api, &waiting, &pod, &node, placed, &metrics).await;
            let outcome = if result.is_ok() {
                let since = first.unwrap_or(started).elapsed().as_secs_f64();
                metrics.pods.scheduled(attempts, since);
                Outcome::Scheduled
            } else {
                Outcome::Error
            };
            metrics.e2e(&fw.scheduler_name, outcome, started.elapsed().as_secs_f64());
            BindDone { pod, node, result }
        });
    }

    /// The unschedulable pod's (or Reservation's) status, and the preemption PostFilter
    /// nominated, written in the background.
    fn write_unschedulable(
        &mut self,
        pod: Arc<PodInfo>,
        msg: String,
        nomination: Option<crate::scheduler::framework::Nomination>,
    ) {
        let client = self.client.clone();
        self.binds.spawn(async move {
            match &pod.reserve_of {
                Some(name) => {
                    crate::scheduler::reservation_live::unschedulable(&client, name, &msg).await;
                    if let Some(n) = nomination {
                        binder::preempt(&client, &pod, &n).await;
                    }
                }
                None => {
                    binder::unschedulable(&client, &pod, &msg).await;
                    if let Some(n) = nomination {
                        binder::preempt(&client, &pod, &n).await;
                    }
                }
            }
            BindDone {
                pod,
                node: String::new(),
                result: Ok(()),
            }
        });
    }
}
