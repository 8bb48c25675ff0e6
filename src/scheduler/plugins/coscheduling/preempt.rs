//! Coscheduling's job preemption (`enablePreemption`, on in Koordinator's chart, which
//! leaves DefaultPreemption out of postFilter): a gang's pending members — or a lone pod —
//! are placed together as if every lower-priority, preemptible pod on the nodes where
//! preemption may help were gone, each member on the cheapest node that fits it (cost: per
//! job among the victims, the rank of its priority); then on each chosen node the victims
//! are given back, most important first, while all members placed there still fit. Every
//! member is nominated; members waiting at Permit go back to the queue, nominated where
//! they waited. Koordinator's `coscheduling/core/preemption.go`; a gang with a network
//! topology (`awareNetworkTopology`) is planned in its topology instead (`PlanNodes`), each
//! node scored by minus its preemption cost.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::super::super::framework::fit_error::nodes_available;
use super::super::super::framework::gangs::gang_of;
use super::super::super::framework::runtime::Verdicts;
use super::super::super::framework::{
    ClusterState, Code, FitsPod, JobNomination, NodeInfo, Nomination, PodInfo, Status,
};
use super::topology::{self, NoCandidates, NodeFigures, Requirements, topology_of};
use crate::api::extension::keys::{
    LABEL_DISABLE_PREEMPTIBLE, LABEL_QUESTIONED_OBJECT_KEY, LABEL_QUOTA_PREEMPTIBLE,
};
use crate::api::scheduling::network_topology::GatherSpec;
use crate::scheduler::model::network_topology::Tree;

pub const REASON_NO_PENDING_PODS: &str = "no pending pods";
pub const REASON_POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
pub const REASON_TERMINATING: &str = "not eligible due to terminating pod on the nominated node.";
pub const REASON_NO_VICTIMS: &str = "no potential victims";
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// The preemptor: the gang group (or the lone pod), its pending members (the pod whose
/// cycle this is first) and its members waiting at Permit with their nodes.
struct Job {
    preemptor: String,
    pending: Vec<Arc<PodInfo>>,
    waiting: Vec<(Arc<PodInfo>, String)>,
}

impl Job {
    fn of(pod: &PodInfo, cluster: &ClusterState) -> Result<Job, String> {
        let me = Arc::new(pod.clone());
        let g = &cluster.gangs;
        let id = g.gang_id(&pod.key).map(str::to_string);
        let Some(id) = id.or_else(|| gang_of(&pod.pod)).filter(|_| g.enabled()) else {
            return Ok(Job {
                preemptor: pod.key.clone(),
                pending: vec![me],
                waiting: Vec::new(),
            });
        };
        let preemptor = g.group_id(&id);
        if let Some((by, msg)) = g.preempted_by(&preemptor).filter(|(t, _)| *t != pod.key) {
            return Err(format!(
                "preemption already attempted by {by} with message {msg}"
            ));
        }
        // The gang cache's pending members (none: "no pending pods"), this pod first.
        let others = g.pending_members(&id, &cluster.assumed);
        let pending = match others.is_empty() {
            true => others,
            false => std::iter::once(me)
                .chain(others.into_iter().filter(|p| p.key != pod.key))
                .collect(),
        };
        let waiting = g
            .waiting_members(&id)
            .into_iter()
            .filter_map(|k| {
                let node = cluster.assumed.get(&k)?;
                let info = cluster.node(node)?.pods.iter().find(|p| p.key == k)?;
                Some((info.clone(), node.clone()))
            })
            .collect();
        Ok(Job {
            preemptor,
            pending,
            waiting,
        })
    }

    fn keys(&self) -> HashSet<String> {
        self.pending.iter().map(|p| p.key.clone()).collect()
    }
}

/// `IsEligiblePod` and the priority rule: a lower-priority pod not marked
/// `disable-preemptible` nor quota-non-preemptible (a Reservation's reserve pod is never
/// evicted through the pod API, so it is never a victim).
fn may_preempt(victim: &PodInfo, preemptor: &PodInfo) -> bool {
    victim.priority < preemptor.priority
        && victim.reserve_of.is_none()
        && victim
            .labels
            .get(LABEL_DISABLE_PREEMPTIBLE)
            .map(String::as_str)
            != Some("true")
        && victim
            .labels
            .get(LABEL_QUOTA_PREEMPTIBLE)
            .map(String::as_str)
            != Some("false")
}

/// `podTerminatingByPreemption`: deleted after the scheduler's DisruptionTarget condition.
pub fn terminating_by_preemption(p: &PodInfo) -> bool {
    if p.pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let conditions = p.pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler"))
}

/// `jobEligibleToPreemptOthers`.
fn eligible(
    job: &Job,
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
) -> Result<(), &'static str> {
    if pod.spec().and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return Err(REASON_POLICY_NEVER);
    }
    for p in &job.pending {
        let Some(nominated) = cluster.nominated.node_of(&p.key).or_else(|| {
            let status = p.pod.status.as_ref()?;
            status
                .nominated_node_name
                .as_deref()
                .filter(|n| !n.is_empty())
        }) else {
            continue;
        };
        let unresolvable = rejected
            .get(nominated)
            .is_none_or(|v| v.code == Code::UnschedulableAndUnresolvable);
        if p.key == pod.key && unresolvable {
            continue;
        }
        let Some(node) = cluster.node(nominated) else {
            continue;
        };
        if node
            .pods
            .iter()
            .any(|q| may_preempt(q, p) && terminating_by_preemption(q))
        {
            return Err(REASON_TERMINATING);
        }
    }
    Ok(())
}

/// A node where preemption may help, with every possible victim taken off it.
struct Trial {
    name: String,
    node: NodeInfo,
    victims: Vec<Arc<PodInfo>>,
}

/// `estimatePreemptionCost`: per node, over the jobs among its victims, the rank of each
/// job's priority among all the victims' priorities.
fn costs(trials: &[Trial]) -> Vec<usize> {
    let mut priorities: Vec<i32> = trials
        .iter()
        .flat_map(|t| t.victims.iter().map(|v| v.priority))
        .collect();
    priorities.sort_unstable();
    priorities.dedup();
    let rank = |p: i32| priorities.binary_search(&p).unwrap_or(0);
    trials
        .iter()
        .map(|t| {
            let mut jobs = HashSet::new();
            t.victims
                .iter()
                .filter(|v| jobs.insert(job_key(v)))
                .map(|v| rank(v.priority))
                .sum()
        })
        .collect()
}

fn job_key(p: &PodInfo) -> &str {
    p.labels
        .get(LABEL_QUESTIONED_OBJECT_KEY)
        .map(String::as_str)
        .unwrap_or("")
}

/// The pod as assumed on `node`.
fn assumed(p: &PodInfo, node: &str) -> Arc<PodInfo> {
    let mut a = p.clone();
    a.node_name = Some(node.to_string());
    Arc::new(a)
}

/// The dry run's state: statuses per node for the FitError, and where members went.
struct DryRun<'a> {
    fits: &'a FitsPod<'a>,
    job: HashSet<String>,
    statuses: BTreeMap<String, String>,
}

impl DryRun<'_> {
    /// `placeToSchedulePods`: each member in turn on the cheapest node (first by name)
    /// among those that fit it and every member before; None when one fits nowhere.
    fn place(&mut self, trials: &[Trial], pending: &[Arc<PodInfo>]) -> Option<Vec<usize>> {
        let costs = costs(trials);
        let mut feasible: Vec<usize> = (0..trials.len()).collect();
        let mut with_members: HashMap<usize, NodeInfo> = HashMap::new();
        let mut chosen = Vec::with_capacity(pending.len());
        for (i, p) in pending.iter().enumerate() {
            feasible.retain(|t| {
                let node = with_members.get(t).unwrap_or(&trials[*t].node);
                let fit = (self.fits)(p, node, &self.job);
                if let Err(reason) = &fit {
                    self.statuses
                        .insert(trials[*t].name.clone(), reason.message());
                }
                fit.is_ok()
            });
            feasible.sort_by(|a, b| trials[*a].name.cmp(&trials[*b].name));
            let best = *feasible.iter().min_by_key(|t| costs[**t])?;
            if i + 1 < pending.len() {
                let name = &trials[best].name;
                with_members
                    .entry(best)
                    .or_insert_with(|| trials[best].node.clone())
                    .add_pod(assumed(p, name));
            }
            chosen.push(best);
        }
        Some(chosen)
    }

    /// `PlanNodes`: the members placed as the network-topology solver places a gang, on
    /// the trial nodes (victims gone), each node scored by minus its preemption cost.
    fn place_in(
        &mut self,
        trials: &[Trial],
        pending: &[Arc<PodInfo>],
        spec: &GatherSpec,
        tree: &Tree,
    ) -> Result<Vec<usize>, NoCandidates> {
        let mut ordered = pending.to_vec();
        topology::by_index(&mut ordered);
        let costs = costs(trials);
        let figures = NodeFigures {
            offer: trials
                .iter()
                .map(|t| (t.name.clone(), self.slots(&ordered, t)))
                .collect(),
            score: trials
                .iter()
                .zip(costs)
                .map(|(t, c)| (t.name.clone(), -(c as i64)))
                .collect(),
            existing: HashMap::new(),
        };
        let req = Requirements::of(spec, tree, ordered.len());
        let pods: Vec<_> = ordered
            .iter()
            .map(|p| (p.key.clone(), p.name.clone()))
            .collect();
        let placed = topology::place(&mut tree.clone(), &figures, &req, &pods)?;
        let trial_of = |key: &String| {
            let node = placed.pods.get(key)?;
            trials.iter().position(|t| &t.name == node)
        };
        // The domain holds enough slots for every member; should one be left over, the
        // job does not fit.
        let chosen: Option<Vec<usize>> = pending.iter().map(|p| trial_of(&p.key)).collect();
        chosen.ok_or(NoCandidates {
            desired: req.desired,
            domains: vec![placed.domain],
            multiples: Vec::new(),
        })
    }

    /// How many of `pods` fit on the trial's node one after another; the first that does
    /// not says why in the statuses.
    fn slots(&mut self, pods: &[Arc<PodInfo>], trial: &Trial) -> i64 {
        let mut node = trial.node.clone();
        for (i, p) in pods.iter().enumerate() {
            if let Err(why) = (self.fits)(p, &node, &self.job) {
                self.statuses.insert(trial.name.clone(), why.message());
                return i as i64;
            }
            node.add_pod(assumed(p, &trial.name));
        }
        pods.len() as i64
    }

    /// Whether the members placed on `node` all fit there, one after another.
    fn all_fit(&self, members: &[&Arc<PodInfo>], node: &NodeInfo) -> bool {
        let mut node = node.clone();
        for (i, p) in members.iter().enumerate() {
            if (self.fits)(p, &node, &self.job).is_err() {
                return false;
            }
            if i + 1 < members.len() {
                node.add_pod(assumed(p, &node.name.clone()));
            }
        }
        true
    }

    /// `selectVictims`: the victims given back (priority, job, name) while the members
    /// still fit; the rest go.
    fn victims(&self, trial: &Trial, members: &[&Arc<PodInfo>]) -> Vec<Arc<PodInfo>> {
        let mut node = trial.node.clone();
        let mut candidates = trial.victims.clone();
        candidates.sort_by(|a, b| {
            (b.priority.cmp(&a.priority))
                .then_with(|| job_key(a).cmp(job_key(b)))
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut out = Vec::new();
        for v in candidates {
            node.add_pod(v.clone());
            if !self.all_fit(members, &node) {
                node.remove_pod(&v.key);
                out.push(v);
            }
        }
        out
    }
}

/// Koordinator's reason for a job preemption that ended with `message` (PostFilter's,
/// without "preemption: "), for `scheduler_job_preemption_duration_seconds{result}`.
pub fn reason_label(message: &str, success: bool) -> &'static str {
    let m = message.strip_prefix("preemption: ").unwrap_or(message);
    match m {
        _ if success => "preempt success, alreadyWaitingForBound: %d/%d",
        _ if m.starts_with("preemption already attempted by") => {
            "preemption already attempted by %s with message %s"
        }
        REASON_NO_PENDING_PODS => REASON_NO_PENDING_PODS,
        REASON_POLICY_NEVER => REASON_POLICY_NEVER,
        REASON_TERMINATING => REASON_TERMINATING,
        _ => "preemption not helpful",
    }
}

/// Coscheduling's PostFilter with `enablePreemption`.
pub fn preempt(
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
    fits: &FitsPod<'_>,
) -> (Status, Option<Nomination>) {
    let fail = |m: &str| (Status::unschedulable(format!("preemption: {m}")), None);
    let job = match Job::of(pod, cluster) {
        Ok(j) => j,
        Err(m) => return fail(&m),
    };
    if job.pending.is_empty() {
        return fail(REASON_NO_PENDING_PODS);
    }
    if let Err(m) = eligible(&job, pod, cluster, rejected) {
        return fail(m);
    }
    let mut run = DryRun {
        fits,
        job: job.keys(),
        statuses: BTreeMap::new(),
    };
    let (trials, unhelped) = trials(pod, cluster, rejected, &mut run.statuses);
    let not_helpful = |statuses: &BTreeMap<String, String>| {
        let reasons = statuses.values().map(String::as_str);
        fail(&nodes_available(cluster.nodes.len(), reasons))
    };
    if trials.is_empty() {
        return not_helpful(&unhelped);
    }
    let placed = match (
        trials.iter().all(|t| t.victims.is_empty()),
        topology_of(pod, cluster),
    ) {
        (true, _) => None,
        (false, None) => run.place(&trials, &job.pending),
        (false, Some((spec, tree))) => match run.place_in(&trials, &job.pending, &spec, &tree) {
            Ok(chosen) => Some(chosen),
            Err(no) => {
                return fail(&no.message(&nodes_available(
                    cluster.nodes.len(),
                    run.statuses.values().map(String::as_str),
                )));
            }
        },
    };
    let Some(chosen) = placed else {
        return not_helpful(&run.statuses);
    };
    let mut by_node: BTreeMap<&str, (usize, Vec<&Arc<PodInfo>>)> = BTreeMap::new();
    for (p, t) in job.pending.iter().zip(&chosen) {
        by_node
            .entry(&trials[*t].name)
            .or_insert((*t, Vec::new()))
            .1
            .push(p);
    }
    let victims = by_node
        .values()
        .flat_map(|(t, members)| run.victims(&trials[*t], members))
        .collect();
    let node_of = |i: usize| trials[chosen[i]].name.clone();
    let all = job.pending.len() + job.waiting.len();
    let nomination = Nomination {
        node: node_of(0),
        victims,
        job: Some(JobNomination {
            message: format!(
                "preempt success, alreadyWaitingForBound: {}/{all}",
                job.waiting.len()
            ),
            pending: (1..job.pending.len())
                .map(|i| (job.pending[i].clone(), node_of(i)))
                .collect(),
            waiting: job.waiting,
            preemptor: job.preemptor,
        }),
    };
    (Status::success(), Some(nomination))
}

/// `nodesWherePreemptionMightHelp` and `removePossibleVictims`: the nodes rejected as
/// Unschedulable, each without the pods `pod` may preempt (a node with none noted in
/// `statuses`), and the other rejected nodes, noted as not helped.
fn trials(
    pod: &PodInfo,
    cluster: &ClusterState,
    rejected: &Verdicts,
    statuses: &mut BTreeMap<String, String>,
) -> (Vec<Trial>, BTreeMap<String, String>) {
    let (mut out, mut unhelped) = (Vec::new(), BTreeMap::new());
    for n in &cluster.nodes {
        match rejected.get(n.name.as_str()).map(|v| v.code) {
            Some(Code::Unschedulable) => {}
            None | Some(Code::UnschedulableAndUnresolvable) => {
                unhelped.insert(n.name.clone(), NOT_HELPFUL.to_string());
                continue;
            }
            Some(_) => continue,
        }
        let victims: Vec<Arc<PodInfo>> = n
            .pods
            .iter()
            .filter(|q| may_preempt(q, pod))
            .cloned()
            .collect();
        if victims.is_empty() {
            statuses.insert(n.name.clone(), REASON_NO_VICTIMS.into());
        }
        let mut node = n.clone();
        for v in &victims {
            node.remove_pod(&v.key);
        }
        out.push(Trial {
            name: n.name.clone(),
            node,
            victims,
        });
    }
    (out, unhelped)
}

#[cfg(test)]
#[path = "preempt_tests.rs"]
mod tests;
