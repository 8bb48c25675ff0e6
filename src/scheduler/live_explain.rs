//! ScheduleExplanation, answered live by the leader: each object's question is answered
//! from a dry run of the scheduling cycle on the scheduler's own cache, at most once per
//! `scheduler.explanationRefreshSeconds` per object. The status is written when it changes
//! and at least once a minute (`lastUpdateTime` as heartbeat); an object past its
//! `spec.ttl` (24h unless set; 0: never) is deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::watcher;

use super::Scheduler;
use crate::api::scheduling::explanation::{ScheduleExplanation, ScheduleExplanationStatus};
use crate::scheduler::cycle;
use crate::scheduler::explanation::{self, Asked, LABEL_QUESTIONED_OBJECT_KEY};
use crate::scheduler::framework::PodInfo;
use crate::scheduler::status_writer::Publisher;

/// The status is written at least this often while the object lives.
const HEARTBEAT: Duration = Duration::from_secs(60);
/// Objects answered per loop iteration at most, so a burst of questions cannot hold up
/// scheduling; the rest are answered on the next wake.
const PER_TICK: usize = 16;
/// Pods one question (a job, a gang) is answered for at most.
const MAX_PODS: usize = 64;
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// What the writer does for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Write this status; `beat` changes at each heartbeat so an unchanged answer is
    /// written again.
    Status {
        status: ScheduleExplanationStatus,
        beat: u64,
    },
    /// Its TTL is over.
    Delete,
}

struct Entry {
    object: Arc<ScheduleExplanation>,
    /// When it is next answered.
    due: Instant,
    answer: Option<Answer>,
    written_at: Option<Instant>,
}

pub struct Explanations {
    objects: BTreeMap<String, Entry>,
    pub every: Duration,
    writer: Publisher<Answer>,
    changed: bool,
}

impl Explanations {
    pub fn new(every: Duration, writer: Publisher<Answer>) -> Explanations {
        Explanations {
            objects: BTreeMap::new(),
            every,
            writer,
            changed: false,
        }
    }

    pub fn apply(&mut self, ev: watcher::Event<ScheduleExplanation>) {
        use watcher::Event::*;
        match ev {
            Apply(o) | InitApply(o) => {
                let key = key_of(&o);
                let spec_changed = self
                    .objects
                    .get(&key)
                    .is_none_or(|e| e.object.spec != o.spec);
                let e = self.objects.entry(key).or_insert_with(|| Entry {
                    object: Arc::new(o.clone()),
                    due: Instant::now(),
                    answer: None,
                    written_at: None,
                });
                e.object = Arc::new(o);
                if spec_changed {
                    e.due = Instant::now();
                }
            }
            Delete(o) => {
                self.objects.remove(&key_of(&o));
                self.changed = true;
            }
            Init | InitDone => {}
        }
    }

    /// The objects due at `now`, the earliest first, at most [`PER_TICK`].
    fn due(&self, now: Instant) -> Vec<String> {
        let mut due: Vec<(&Instant, &String)> = self
            .objects
            .iter()
            .filter(|(_, e)| e.due <= now)
            .map(|(k, e)| (&e.due, k))
            .collect();
        due.sort();
        due.into_iter()
            .take(PER_TICK)
            .map(|(_, k)| k.clone())
            .collect()
    }

    fn next_due(&self) -> Option<Instant> {
        self.objects.values().map(|e| e.due).min()
    }

    /// Records an answer: the writer is told when it differs from the last, or the last
    /// was written a heartbeat ago.
    fn record(&mut self, key: &str, answer: Answer, now: Instant) {
        let every = self.every;
        let Some(e) = self.objects.get_mut(key) else {
            return;
        };
        e.due = now + every.min(HEARTBEAT);
        let stale = e.written_at.is_none_or(|w| now >= w + HEARTBEAT);
        let answer = match (answer, &e.answer) {
            (Answer::Status { status, .. }, Some(Answer::Status { status: old, beat }))
                if &status == old && !stale =>
            {
                Answer::Status {
                    status,
                    beat: *beat,
                }
            }
            (Answer::Status { status, .. }, Some(Answer::Status { beat, .. })) => Answer::Status {
                status,
                beat: beat + 1,
            },
            (a, _) => a,
        };
        if e.answer.as_ref() != Some(&answer) {
            e.written_at = Some(now);
            e.answer = Some(answer);
            self.changed = true;
        }
    }

    fn publish(&mut self) {
        if !std::mem::take(&mut self.changed) {
            return;
        }
        let all = self
            .objects
            .iter()
            .filter_map(|(k, e)| Some((k.clone(), e.answer.clone()?)))
            .collect();
        self.writer.publish(all);
    }
}

fn key_of(o: &ScheduleExplanation) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

/// Past its TTL at `now_ms` (ms since the epoch)?
pub fn expired(o: &ScheduleExplanation, now_ms: i64) -> bool {
    let ttl = match o.spec.ttl.as_deref() {
        Some(t) => match crate::api::duration::parse(t) {
            Ok(d) => d,
            Err(_) => DEFAULT_TTL,
        },
        None => DEFAULT_TTL,
    };
    let Some(created) = &o.metadata.creation_timestamp else {
        return false;
    };
    !ttl.is_zero() && created.0.as_millisecond() + ttl.as_millis() as i64 <= now_ms
}

impl Scheduler {
    /// Answers the objects due (on the leader, once synced); the instant to wake next.
    pub(super) fn explain_tick(&mut self, now: Instant) -> Option<Instant> {
        if !self.synced() || !self.leadership.is_leader() {
            return None;
        }
        let x = self.explanations.as_ref()?;
        let due: Vec<(String, Arc<ScheduleExplanation>)> = x
            .due(now)
            .into_iter()
            .filter_map(|k| {
                let o = x.objects.get(&k)?.object.clone();
                Some((k, o))
            })
            .collect();
        let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let answers: Vec<(String, Answer)> = due
            .into_iter()
            .map(|(k, o)| {
                if expired(&o, now_ms) {
                    return (k, Answer::Delete);
                }
                let status = self.answer(o.spec.question_object_key.as_deref());
                (k, Answer::Status { status, beat: 0 })
            })
            .collect();
        let x = self.explanations.as_mut()?;
        for (k, a) in answers {
            x.record(&k, a, now);
        }
        x.publish();
        x.next_due()
    }

    /// The answer to a question about `key`: a pending pod, the pending pods labelled with
    /// it (a job's), or the pending members of the gang (or gang group) it names.
    pub fn answer(&self, key: Option<&str>) -> ScheduleExplanationStatus {
        let key = key.unwrap_or("");
        if let Some(node) = self.cluster.placement(key) {
            return explanation::bound(key, node);
        }
        let pods = self.questioned(key);
        if pods.is_empty() {
            return explanation::not_found(key);
        }
        let attempts: Vec<(Arc<PodInfo>, cycle::Attempt)> = pods
            .into_iter()
            .filter_map(|p| {
                let fi = self.framework_for(&p.pod)?;
                let a = cycle::dry_run(&self.frameworks[fi], &p, &self.cluster);
                Some((p, a))
            })
            .collect();
        let asked: Vec<Asked<'_>> = attempts
            .iter()
            .map(|(pod, attempt)| Asked { pod, attempt })
            .collect();
        explanation::status(&asked, &self.cluster)
    }

    fn questioned(&self, key: &str) -> Vec<Arc<PodInfo>> {
        if let Some(p) = self.queue.get(key) {
            return vec![p.clone()];
        }
        let gangs = &self.cluster.gangs;
        let named = |p: &PodInfo| {
            p.labels
                .get(LABEL_QUESTIONED_OBJECT_KEY)
                .map(String::as_str)
                == Some(key)
                || gangs
                    .gang_id(&p.key)
                    .is_some_and(|id| id == key || gangs.group_id(id) == key)
        };
        let mut pods: Vec<Arc<PodInfo>> =
            self.queue.pending().filter(|p| named(p)).cloned().collect();
        pods.sort_by(|a, b| a.key.cmp(&b.key));
        pods.truncate(MAX_PODS);
        pods
    }
}

/// Writes one object's answer: a merge patch of its status subresource (every field
/// named, absent ones as null, so a field the last answer had and this one lacks goes),
/// or its deletion.
pub async fn write(client: kube::Client, key: String, answer: Answer) -> Result<(), kube::Error> {
    use kube::api::{DeleteParams, Patch, PatchParams};
    let (ns, name) = key.split_once('/').unwrap_or(("", &key));
    let api: kube::Api<ScheduleExplanation> = kube::Api::namespaced(client, ns);
    match answer {
        Answer::Delete => match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        },
        Answer::Status { mut status, .. } => {
            status.last_update_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
            let mut body = serde_json::to_value(&status).unwrap_or_default();
            for field in [
                "schedulable",
                "schedulableAfterPreemption",
                "failedMessage",
                "detailedExplanation",
            ] {
                if body.get(field).is_none() {
                    body[field] = serde_json::Value::Null;
                }
            }
            let patch = serde_json::json!({ "status": body });
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok(())
        }
    }
}
