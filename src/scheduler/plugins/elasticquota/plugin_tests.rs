//! The ElasticQuota plugin over a cluster state: admission against runtime, the
//! non-preemptible bound, preemption within a quota and min reclaim across quotas, and
//! the figures the status writer publishes.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ElasticQuota;
use super::args::Args;
use crate::scheduler::config;
use crate::scheduler::framework::runtime::Scope;
use crate::scheduler::framework::{ClusterState, Code, CycleState, Plugin};
use crate::scheduler::test_util::{cluster, node_json, pod};

fn quota(name: &str, min: &str, max: &str, extra: Value) -> crate::api::quota::ElasticQuota {
    let mut v = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "ns", "labels": {}},
        "spec": {"min": {"cpu": min, "memory": "100Gi"}, "max": {"cpu": max, "memory": "100Gi"}}});
    if let Some(labels) = extra.get("labels") {
        v["metadata"]["labels"] = labels.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn quota_pod(name: &str, quota: &str, cpu: &str, node: Option<&str>, prio: i32) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {"quota.scheduling.koordinator.sh/name": quota},
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": node, "priority": prio,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
}

/// Two 4-cpu nodes; quotas a (min 2, max 6) and b (min 2, max 6).
fn setup() -> (ClusterState, ElasticQuota) {
    let plugin = ElasticQuota {
        args: Args::parse(None).unwrap(),
    };
    let mut c = cluster(vec![
        node_json("n1", "4", "8Gi"),
        node_json("n2", "4", "8Gi"),
    ]);
    plugin.setup(&mut c);
    for q in ["a", "b"] {
        c.quotas.upsert(&quota(q, "2", "6", json!({}))).unwrap();
    }
    (c, plugin)
}

fn add(c: &mut ClusterState, v: Value) {
    c.upsert_pod(Arc::new(serde_json::from_value(v).unwrap()));
}

#[test]
fn controllers_take_the_args_of_the_profile_running_elasticquota() {
    let mut quiet = config::default_config().unwrap().profiles.remove(0);
    quiet.scheduler_name = "configures-only".into();
    for list in quiet.points.values_mut() {
        list.retain(|(n, _)| n != "ElasticQuota");
    }
    quiet
        .args
        .insert("ElasticQuota".into(), json!({"monitorAllQuotas": true}));
    let mut runs = config::default_config().unwrap().profiles.remove(0);
    runs.args
        .insert("ElasticQuota".into(), json!({"delayEvictTime": "30s"}));
    let a = crate::scheduler::quota_args_of(&[quiet.clone(), runs]).unwrap();
    assert!(
        !a.monitor_all_quotas,
        "the first profile does not run ElasticQuota"
    );
    assert_eq!(a.delay_evict_time.as_secs(), 30);
    assert!(crate::scheduler::quota_args_of(&[quiet]).is_none());
}

#[test]
fn args_defaults_and_errors() {
    let a = Args::parse(None).unwrap();
    assert!(a.enable_runtime_quota && a.disable_default_quota_preemption);
    assert!(!a.monitor_all_quotas && !a.enable_check_parent_quota);
    assert_eq!(a.delay_evict_time.as_secs(), 120);
    assert_eq!(a.quota_group_namespace, "koordinator-system");
    let e = Args::parse(Some(&json!({"delayEvictTime": "soon"})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("delayEvictTime"), "{e}");
    assert!(Args::parse(Some(&json!({"bogus": 1}))).is_err());
}

#[test]
fn a_quota_at_its_runtime_rejects_with_koordinators_reason() {
    let (mut c, plugin) = setup();
    add(&mut c, quota_pod("a1", "a", "3", Some("n1"), 0));
    add(&mut c, quota_pod("a2", "a", "3", Some("n2"), 0));
    // b asks for its min: a's runtime is 8 - 2 = 6, all used.
    add(&mut c, quota_pod("b1", "b", "2", None, 0));
    let p = pod(quota_pod("a3", "a", "1", None, 0));
    add(&mut c, quota_pod("a3", "a", "1", None, 0));
    let (s, _) = plugin.pre_filter(&mut CycleState::default(), &p, &c);
    assert_eq!(s.code, Code::Unschedulable);
    assert_eq!(
        s.message(),
        "Insufficient quotas, quotaName: a, runtime: cpu:6,memory:0, used: cpu:6, pod's request: cpu:1, exceedDimensions: [cpu]"
    );
    // b is within its runtime.
    let b = pod(quota_pod("b1", "b", "2", None, 0));
    assert!(
        plugin
            .pre_filter(&mut CycleState::default(), &b, &c)
            .0
            .is_success()
    );
    // a1 finishes: a has room again.
    let mut done = quota_pod("a1", "a", "3", Some("n1"), 0);
    done["status"] = json!({"phase": "Succeeded"});
    add(&mut c, done);
    assert!(
        plugin
            .pre_filter(&mut CycleState::default(), &p, &c)
            .0
            .is_success()
    );
}

#[test]
fn non_preemptible_pods_stay_within_min() {
    let (mut c, plugin) = setup();
    let mut np = quota_pod("np1", "a", "2", Some("n1"), 0);
    np["metadata"]["labels"]["quota.scheduling.koordinator.sh/preemptible"] = json!("false");
    add(&mut c, np.clone());
    np["metadata"]["name"] = json!("np2");
    np["spec"]["nodeName"] = Value::Null;
    add(&mut c, np.clone());
    let p = pod(np);
    let (s, _) = plugin.pre_filter(&mut CycleState::default(), &p, &c);
    assert!(
        s.message().starts_with("Insufficient non-preemptible quotas, quotaName: a, min: cpu:2,memory:100Gi, nonPreemptibleUsed: cpu:2"),
        "{}",
        s.message()
    );
}

#[test]
fn unknown_or_missing_quota_is_the_default_quota() {
    let (c, plugin) = setup();
    let p = pod(quota_pod("x", "nope", "100", None, 0));
    let mut st = CycleState::default();
    assert!(plugin.pre_filter(&mut st, &p, &c).0.is_success());
    assert_eq!(
        st.read::<super::QuotaCycle>(super::NAME).unwrap().quota,
        "koordinator-default-quota"
    );
}

fn default_fw() -> crate::scheduler::framework::runtime::Framework {
    config::framework(&config::default_config().unwrap().profiles[0]).unwrap()
}

#[test]
fn preemption_stays_within_the_quota() {
    let (mut c, _) = setup();
    let fw = default_fw();
    add(&mut c, quota_pod("a-low", "a", "4", Some("n1"), 10));
    add(&mut c, quota_pod("b-low", "b", "4", Some("n2"), 1));
    let p = pod(quota_pod("a-high", "a", "2", None, 100));
    add(&mut c, quota_pod("a-high", "a", "2", None, 100));
    let r = fw.schedule(&p, &c, Scope::Everything);
    assert!(r.node.is_none());
    let n = fw.post_filter(&r, &p, &c).expect("a nomination");
    let victims: Vec<&str> = n.victims.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        (n.node.as_str(), victims),
        ("n1", vec!["a-low"]),
        "b's pod is not a's to take"
    );
}

#[test]
fn a_quota_under_its_min_reclaims_from_one_over_its_runtime() {
    let (mut c, _) = setup();
    let fw = default_fw();
    // b borrowed the whole cluster while a was idle.
    add(&mut c, quota_pod("b1", "b", "4", Some("n1"), 0));
    add(&mut c, quota_pod("b2", "b", "4", Some("n2"), 0));
    // a asks for its min (2): b's runtime drops to 6, it uses 8.
    let p = pod(quota_pod("a1", "a", "2", None, 0));
    add(&mut c, quota_pod("a1", "a", "2", None, 0));
    let r = fw.schedule(&p, &c, Scope::Everything);
    assert!(r.node.is_none(), "no room on the nodes");
    assert_eq!(r.verdicts["n1"].reason, "Insufficient cpu");
    let n = fw.post_filter(&r, &p, &c).expect("b gives back");
    assert_eq!(n.victims.len(), 1);
    assert!(n.victims[0].name.starts_with('b'));
    // Above its min, a may not take from b.
    let big = pod(quota_pod("a2", "a", "4", None, 0));
    add(&mut c, quota_pod("a2", "a", "4", None, 0));
    let r = fw.schedule(&big, &c, Scope::Everything);
    assert!(fw.post_filter(&r, &big, &c).is_none());
}

#[test]
fn figures_for_the_status_writer() {
    let (mut c, _) = setup();
    add(&mut c, quota_pod("a1", "a", "3", Some("n1"), 0));
    add(&mut c, quota_pod("a2", "a", "1", None, 0));
    let f = &super::status::figures(&c)["a"];
    assert_eq!(f.used["cpu"], 3000);
    assert_eq!(f.request["cpu"], 4000);
    assert_eq!(f.runtime["cpu"], 4000, "a alone asks 4 of 8");
    let patch = super::status::patch(f);
    assert_eq!(patch["status"]["used"]["cpu"], "3");
    assert_eq!(
        patch["metadata"]["annotations"]["quota.scheduling.koordinator.sh/runtime"],
        "{\"cpu\":\"4\"}"
    );
    // Deleting a pod takes it out of every sum.
    c.delete_pod("ns/a2");
    assert_eq!(super::status::figures(&c)["a"].request["cpu"], 3000);
}

/// Koordinator's quota_overuse_revoke_test shape: a quota over its runtime for longer than
/// the delay gives back its least important preemptible pods until it fits.
#[test]
fn over_used_quota_revokes_its_least_important_pods_after_the_delay() {
    let (mut c, _) = setup();
    c.quotas.upsert(&quota("a", "2", "4", json!({}))).unwrap();
    // Bound pods of quota a: 6 CPUs against a max (and so a runtime) of 4.
    add(&mut c, quota_pod("p1", "a", "2", Some("n1"), 10));
    add(&mut c, quota_pod("p2", "a", "2", Some("n1"), 5));
    add(&mut c, quota_pod("p3", "a", "2", Some("n2"), 1));
    let mut nonpreempt = quota_pod("p0", "a", "1", Some("n2"), 0);
    nonpreempt["metadata"]["labels"]["quota.scheduling.koordinator.sh/preemptible"] =
        "false".into();
    add(&mut c, nonpreempt);
    let delay = std::time::Duration::from_secs(120);
    let mut r = super::revoke::Revoker::new(delay);
    let t0 = std::time::Instant::now();
    assert!(r.due(&c, t0).is_empty(), "over, but not for long enough");
    assert!(r.due(&c, t0 + delay).is_empty());
    let keys: Vec<String> = r
        .due(&c, t0 + delay + std::time::Duration::from_secs(1))
        .iter()
        .map(|p| p.key.clone())
        .collect();
    // 7 CPUs used: p0 is not preemptible; p3 (priority 1) then p2 (5) go: 3 ≤ 4. Giving
    // either back would make 5 again: both are revoked (in Koordinator's give-back order).
    assert_eq!(keys, ["ns/p2", "ns/p3"]);
    assert!(
        r.due(&c, t0 + delay + std::time::Duration::from_secs(2))
            .is_empty(),
        "the clock restarts after a revocation"
    );
}

/// Koordinator's isSchedulableAfterPodDeletion / isSchedulableAfterQuotaChanged with
/// `enableQueueHint`: only a change in the pod's own quota — or one on its path to the
/// root, with `enableCheckParentQuota` — of its own tree may help; without the arg,
/// every pod deletion and quota change does.
#[test]
fn queue_hints_follow_the_pods_own_quota_tree() {
    use crate::scheduler::framework::events::{ClusterEvent, Events};
    let (mut c, off) = setup();
    let parent = json!({"labels": {"quota.scheduling.koordinator.sh/is-parent": "true"}});
    c.quotas.upsert(&quota("p", "4", "12", parent)).unwrap();
    let child = json!({"labels": {"quota.scheduling.koordinator.sh/parent": "p"}});
    c.quotas.upsert(&quota("a2", "1", "6", child)).unwrap();
    let other_tree = json!({"labels": {"quota.scheduling.koordinator.sh/tree-id": "t1"}});
    c.quotas.upsert(&quota("t", "1", "6", other_tree)).unwrap();
    let with = |v: Value| ElasticQuota {
        args: Args::parse(Some(&v)).unwrap(),
    };
    let on = with(json!({"enableQueueHint": true}));
    let parents = with(json!({"enableQueueHint": true, "enableCheckParentQuota": true}));
    let p = pod(quota_pod("pending", "a2", "1", None, 0));
    let deleted = |q: Option<&str>| {
        ClusterEvent::on_node(Events::POD_ASSIGNED_DELETE, "n1").with_quota(q.map(str::to_string))
    };
    let changed =
        |q: Option<&str>| ClusterEvent::of(Events::QUOTA).with_quota(q.map(str::to_string));
    for (name, plugin, ev, want) in [
        ("hint off: any deletion", &off, deleted(Some("b")), true),
        ("hint off: a pod of no quota", &off, deleted(None), true),
        ("same quota", &on, deleted(Some("a2")), true),
        ("another quota of the tree", &on, deleted(Some("b")), false),
        (
            "the parent, parents not checked",
            &on,
            deleted(Some("p")),
            false,
        ),
        (
            "the parent, parents checked",
            &parents,
            deleted(Some("p")),
            true,
        ),
        ("another tree", &parents, deleted(Some("t")), false),
        ("a pod of no quota", &on, deleted(None), false),
        ("its quota updated", &on, changed(Some("a2")), true),
        ("another quota updated", &on, changed(Some("b")), false),
        (
            "its parent updated, parents checked",
            &parents,
            changed(Some("p")),
            true,
        ),
        ("a quota added or deleted", &on, changed(None), true),
    ] {
        assert_eq!(plugin.hint(&p, &ev, &c), want, "{name}");
    }
}
