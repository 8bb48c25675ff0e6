//! The scheduler against the embedded API server: 50 pods over 10 nodes bound respecting
//! taints, selectors and capacity; a hot node (NodeMetric over threshold) receives nothing;
//! a pod that fits nowhere gets FailedScheduling with the aggregated reasons and is bound
//! once a node frees up; `koord explain schedule` on the same snapshot agrees with the
//! bindings; a bind conflict makes the scheduler forget the pod.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use koord::api::slo::NodeMetric;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

const CONFIG: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    filter: {enabled: [{name: LoadAwareScheduling}]}
    score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
    reserve: {enabled: [{name: LoadAwareScheduling}]}
  pluginConfig:
  - name: LoadAwareScheduling
    args: {usageThresholds: {cpu: 65, memory: 95}}
"#;

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn node(i: usize) -> Node {
    let mut n = json!({"metadata": {"name": format!("node-{i}"), "labels": {"zone": if i.is_multiple_of(2) { "a" } else { "b" }}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}});
    if i == 9 {
        n["spec"] =
            json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]});
    }
    obj(n)
}

pub(crate) fn pod(i: usize) -> Pod {
    let mut spec = json!({"schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]});
    if i.is_multiple_of(5) {
        spec["nodeSelector"] = json!({"zone": "a"});
    }
    if i.is_multiple_of(7) {
        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    }
    let mut labels = json!({});
    if i % 10 == 3 {
        labels["app"] = "spread".into();
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "spread"}}}]);
    }
    obj(
        json!({"metadata": {"name": format!("pod-{i:02}"), "namespace": "default", "labels": labels}, "spec": spec}),
    )
}

/// The real `koord --role=scheduler` against the test API server on `port`.
pub(crate) fn start_scheduler(dir: &std::path::Path, port: u16, env: &[(&str, &str)]) -> Koord {
    let admin = format!("127.0.0.1:{}", free_port());
    start_scheduler_at(dir, port, env, &admin)
}

/// [`start_scheduler`] serving /metrics on `admin`.
pub(crate) fn start_scheduler_at(
    dir: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
    admin: &str,
) -> Koord {
    let kc = kubeconfig(dir, port);
    let args = [
        "--role=scheduler",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--admin-addr",
        admin,
        "--data-dir",
        dir.to_str().unwrap(),
        "--node-name",
        "s1",
    ];
    Koord::start(&args, env, dir)
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

async fn hot_metric(c: &kube::Client) {
    let api: Api<NodeMetric> = Api::all(c.clone());
    let m: NodeMetric = obj(
        json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "node-3"}, "spec": {}}),
    );
    api.create(&PostParams::default(), &m).await.unwrap();
    let status = json!({"status": {"updateTime": now_rfc3339(), "nodeMetric": {"nodeUsage": {"resources": {"cpu": "7", "memory": "4Gi"}}}}});
    api.patch_status(
        "node-3",
        &Default::default(),
        &kube::api::Patch::Merge(status),
    )
    .await
    .unwrap();
}

/// The snapshot `koord explain` reads: what `kubectl get nodes,pods,nodemetrics -o yaml` prints.
/// Every object of kind `K` as `kubectl get -o yaml` prints it (kind and apiVersion set).
pub(crate) async fn listed<K>(c: &kube::Client) -> Vec<Value>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let list = Api::<K>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    list.into_iter()
        .map(|o| {
            let mut v = serde_json::to_value(o).unwrap();
            v["kind"] = K::kind(&()).to_string().into();
            v["apiVersion"] = K::api_version(&()).to_string().into();
            v
        })
        .collect()
}

async fn snapshot(c: &kube::Client, dir: &std::path::Path) -> std::path::PathBuf {
    let mut items = listed::<Node>(c).await;
    items.extend(listed::<Pod>(c).await);
    items.extend(listed::<NodeMetric>(c).await);
    let path = dir.join("snapshot.json");
    std::fs::write(
        &path,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .unwrap(),
    )
    .unwrap();
    path
}

async fn bindings(c: &kube::Client) -> BTreeMap<String, Option<String>> {
    Api::<Pod>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .map(|p| {
            (
                format!("default/{}", p.metadata.name.unwrap()),
                p.spec.unwrap().node_name,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_respecting_constraints_load_and_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut api = TestApi::start_with(opts).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    for i in 0..10 {
        Api::<Node>::all(c.clone())
            .create(&pp, &node(i))
            .await
            .unwrap();
    }
    hot_metric(&c).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..50 {
        pods.create(&pp, &pod(i)).await.unwrap();
    }
    let snap = snapshot(&c, dir.path()).await;
    let cfg_path = dir.path().join("sched.yaml");
    std::fs::write(&cfg_path, CONFIG).unwrap();
    let sched = start_scheduler(
        dir.path(),
        port,
        &[("KOORD_SCHEDULER__CONFIG_FILE", cfg_path.to_str().unwrap())],
    );
    let all_bound = eventually(Duration::from_secs(30), || async {
        bindings(&c).await.values().all(Option::is_some)
    })
    .await;
    assert!(all_bound, "{}", sched.logs());
    let bound = bindings(&c).await;
    let mut per_node: HashMap<String, i64> = HashMap::new();
    for (i, (key, n)) in bound.iter().enumerate() {
        let n = n.clone().unwrap();
        let idx: usize = n.trim_start_matches("node-").parse().unwrap();
        assert_ne!(n, "node-3", "{key} landed on the hot node");
        if i.is_multiple_of(5) {
            assert_eq!(idx % 2, 0, "{key} has nodeSelector zone=a, got {n}");
        }
        if i % 7 != 0 {
            assert_ne!(n, "node-9", "{key} does not tolerate node-9's taint");
        }
        *per_node.entry(n).or_insert(0) += 500;
    }
    assert!(per_node.values().all(|m| *m <= 8000), "{per_node:?}");
    let mut spread: HashMap<usize, i64> = HashMap::new();
    for (_, n) in bound.values().enumerate().filter(|(i, _)| i % 10 == 3) {
        let idx: usize = n
            .as_deref()
            .unwrap()
            .trim_start_matches("node-")
            .parse()
            .unwrap();
        *spread.entry(idx % 2).or_insert(0) += 1;
    }
    let (a, b) = (
        spread.get(&0).copied().unwrap_or(0),
        spread.get(&1).copied().unwrap_or(0),
    );
    assert!(
        (a - b).abs() <= 1 && a + b == 5,
        "zone spread of app=spread: {spread:?}"
    );

    // explain on the pre-scheduling snapshot agrees with what was bound.
    let out = std::process::Command::new(common::koord_bin())
        .args([
            "explain",
            "schedule",
            "-f",
            snap.to_str().unwrap(),
            "--config",
            cfg_path.to_str().unwrap(),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    let predicted: BTreeMap<String, Option<String>> = explained["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().to_string(),
                p["node"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        predicted, bound,
        "koord explain schedule vs the live scheduler"
    );
    // Every node is listed; feasible ones carry every Score plugin's score and the total.
    let first = &explained["pods"][1]["nodes"];
    assert_eq!(first.as_object().unwrap().len(), 10);
    let feasible = &first["node-0"];
    assert_eq!(feasible["feasible"], true);
    let scores = feasible["scores"].as_object().unwrap();
    for plugin in [
        "LoadAwareScheduling",
        "NodeResourcesFit",
        "TaintToleration",
        "NodeAffinity",
    ] {
        assert!(
            scores.contains_key(plugin),
            "{plugin} missing in {feasible}"
        );
    }
    assert!(feasible["total"].as_i64().is_some());
    assert_eq!(
        explained["pods"][1]["nodes"]["node-3"]["plugin"],
        "LoadAwareScheduling"
    );
    assert_eq!(
        explained["pods"][1]["nodes"]["node-3"]["reason"],
        "node(s) cpu usage exceed threshold"
    );

    // A pod that fits nowhere (every schedulable node runs pods, 7.6 CPU is needed): a
    // FailedScheduling event with the aggregated reasons, then bound as soon as node-0 frees up.
    let mut big = pod(99);
    big.spec.as_mut().unwrap().containers[0].resources =
        Some(obj(json!({"requests": {"cpu": "7600m"}})));
    big.spec.as_mut().unwrap().node_selector = None;
    pods.create(&pp, &big).await.unwrap();
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let find = || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.involved_object.name.as_deref() == Some("pod-99")
            })
            .and_then(|e| e.message)
    };
    let failed = eventually(Duration::from_secs(15), || async { find().await.is_some() }).await;
    assert!(failed, "{}", sched.logs());
    let message = find().await.unwrap();
    assert!(
        message.starts_with("0/10 nodes are available:"),
        "{message}"
    );
    assert!(message.contains("8 Insufficient cpu"), "{message}");
    assert!(
        message.contains("1 node(s) cpu usage exceed threshold"),
        "{message}"
    );
    assert!(
        message.contains("1 node(s) had untolerated taint {dedicated: gpu}"),
        "{message}"
    );
    // The event and the PodScheduled condition are separate writes: wait for both.
    let unschedulable = eventually(Duration::from_secs(10), || async {
        let cond = pods
            .get("pod-99")
            .await
            .ok()
            .and_then(|p| p.status?.conditions)
            .unwrap_or_default();
        cond.iter().any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
    })
    .await;
    assert!(unschedulable, "{}", sched.logs());
    // Removed for good (as once their kubelet has stopped them): a terminating pod still
    // holds its node, as in kube-scheduler.
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for (key, n) in &bound {
        if n.as_deref() == Some("node-0") {
            let name = key.trim_start_matches("default/");
            pods.delete(name, &now).await.unwrap();
        }
    }
    let placed = eventually(Duration::from_secs(15), || async {
        pods.get("pod-99")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref()
            == Some("node-0")
    })
    .await;
    assert!(placed, "{}", sched.logs());
    drop(sched);
    api.stop().await;
}

/// A test API server with `node-0` registered, its client and default post parameters.
pub(crate) async fn api_with_one_node() -> (TestApi, kube::Client, PostParams) {
    let api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    Api::<Node>::all(c.clone())
        .create(&pp, &node(0))
        .await
        .unwrap();
    (api, c, pp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_conflict_is_forgotten() {
    let (mut api, c, pp) = api_with_one_node().await;
    let mut s = crate::common::default_scheduler(&c);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let created = pods.create(&pp, &pod(1)).await.unwrap();
    s.apply(koord::scheduler::live::Ev::Node(
        kube::runtime::watcher::Event::Apply(
            Api::<Node>::all(c.clone()).get("node-0").await.unwrap(),
        ),
    ));
    s.apply(koord::scheduler::live::Ev::Pod(
        kube::runtime::watcher::Event::Apply(created),
    ));
    // Someone else binds the pod first.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pod-01"}, "target": {"kind": "Node", "name": "node-0"}});
    pods.create_subresource::<Value, Value>("binding", "pod-01", &pp, &binding)
        .await
        .unwrap();
    assert!(s.schedule_one());
    assert_eq!(
        s.cluster.placement("default/pod-01"),
        Some("node-0"),
        "assumed"
    );
    // The failed binding (409) makes the scheduler forget the assumed pod and retry it
    // after the backoff; the watch showing the pod bound takes it out of the queue.
    s.settle().await;
    assert_eq!(s.cluster.placement("default/pod-01"), None, "forgotten");
    assert!(!s.queue.is_empty(), "retried after the backoff");
    let now_bound = pods.get("pod-01").await.unwrap();
    s.apply(koord::scheduler::live::Ev::Pod(
        kube::runtime::watcher::Event::Apply(now_bound),
    ));
    assert!(
        s.queue.is_empty(),
        "bound by someone else: no longer pending"
    );
    assert_eq!(
        s.cluster.placement("default/pod-01"),
        Some("node-0"),
        "counted where it runs"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_pod_preempts_a_lower_one() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut api = TestApi::start_with(opts).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    Api::<Node>::all(c.clone())
        .create(&pp, &node(0))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let with = |name: &str, class: &str, cpu: &str| -> Pod {
        obj(
            json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"schedulerName": "koord-scheduler", "priorityClassName": class,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
    };
    let sched = start_scheduler(dir.path(), port, &[]);
    pods.create(&pp, &with("batch", "koord-batch", "6"))
        .await
        .unwrap();
    let node_of = |name: &'static str| {
        let pods = pods.clone();
        async move {
            pods.get_opt(name)
                .await
                .unwrap()
                .and_then(|p| p.spec.unwrap().node_name)
        }
    };
    assert!(
        eventually(Duration::from_secs(15), || async {
            node_of("batch").await.is_some()
        })
        .await,
        "{}",
        sched.logs()
    );
    let kubelet = kubelet_stand_in(pods.clone());
    pods.create(&pp, &with("prod", "koord-prod", "4"))
        .await
        .unwrap();
    let placed = eventually(Duration::from_secs(20), || async {
        node_of("prod").await.as_deref() == Some("node-0")
    })
    .await;
    assert!(placed, "{}", sched.logs());
    let victim = pods.get_opt("batch").await.unwrap();
    assert!(
        victim.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the batch pod was preempted"
    );
    kubelet.abort();
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let list = events.list(&ListParams::default()).await.unwrap();
    assert!(
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Preempted")
                && e.involved_object.name.as_deref() == Some("batch"))
    );
    drop(sched);
    api.stop().await;
}

/// What a kubelet does for a pod being deleted gracefully: it stops it and removes it
/// (here at once). The scheduler counts a terminating pod on its node until then.
pub(crate) fn kubelet_stand_in(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let now = kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_some())
                {
                    let _ = pods
                        .delete(p.metadata.name.as_deref().unwrap_or_default(), &now)
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// A plugin at Permit (waits) and PreBind (annotates), as gang and NUMA plugins will be.
struct Gate;

impl koord::scheduler::framework::Plugin for Gate {
    fn name(&self) -> &'static str {
        "TestGate"
    }
    fn points(&self) -> &'static [koord::scheduler::framework::Point] {
        &[
            koord::scheduler::framework::Point::Permit,
            koord::scheduler::framework::Point::PreBind,
        ]
    }
    fn permit(
        &self,
        _: &koord::scheduler::framework::CycleState,
        _: &koord::scheduler::framework::PodInfo,
        _: &str,
        _: &koord::scheduler::framework::ClusterState,
    ) -> (koord::scheduler::framework::Status, Duration) {
        let wait = koord::scheduler::framework::Status {
            code: koord::scheduler::framework::Code::Wait,
            reasons: Default::default(),
        };
        (wait, Duration::from_secs(10))
    }
    fn pre_bind(
        &self,
        _: &koord::scheduler::framework::CycleState,
        _: &koord::scheduler::framework::PodInfo,
        node: &str,
        modified: &mut koord::scheduler::framework::PodDraft,
    ) -> koord::scheduler::framework::Status {
        modified
            .annotations_mut()
            .insert("test.koord.io/prebind".into(), node.into());
        koord::scheduler::framework::Status::success()
    }
}

/// A live scheduler of the default profile with [`Gate`] at `points`.
pub(crate) fn gated_scheduler(
    c: &kube::Client,
    points: &[koord::scheduler::framework::Point],
) -> koord::scheduler::live::Scheduler {
    let cfg = koord::scheduler::config::default_config().unwrap();
    let mut fw = koord::scheduler::config::framework(&cfg.profiles[0]).unwrap();
    for point in points {
        let at = fw.points.entry(*point).or_default();
        at.push(koord::scheduler::framework::runtime::Enabled {
            plugin: std::sync::Arc::new(Gate),
            weight: 1,
        });
    }
    koord::scheduler::live::Scheduler::with_frameworks(
        c.clone(),
        vec![fw],
        cfg.backoff,
        koord::kernel::lease::Leadership::always(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_waits_and_prebind_patches_before_binding() {
    use koord::scheduler::framework::Point;
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let mut s = gated_scheduler(&c, &[Point::Permit, Point::PreBind]);
    let n = Api::<Node>::all(c.clone())
        .create(&pp, &node(0))
        .await
        .unwrap();
    s.apply(koord::scheduler::live::Ev::Node(
        kube::runtime::watcher::Event::Apply(n),
    ));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in [1, 2] {
        let p = pods.create(&pp, &pod(i)).await.unwrap();
        s.apply(koord::scheduler::live::Ev::Pod(
            kube::runtime::watcher::Event::Apply(p),
        ));
    }
    assert!(s.schedule_one() && s.schedule_one());
    let both_wait = eventually(Duration::from_secs(5), || async {
        s.waiting_pods().len() == 2
    })
    .await;
    assert!(both_wait);
    assert_eq!(
        pods.get("pod-01").await.unwrap().spec.unwrap().node_name,
        None,
        "held at Permit"
    );
    assert!(s.resolve_waiting("default/pod-01", true));
    assert!(s.resolve_waiting("default/pod-02", false));
    s.settle().await;
    let bound = pods.get("pod-01").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-0"));
    assert_eq!(
        bound.metadata.annotations.unwrap()["test.koord.io/prebind"],
        "node-0",
        "PreBind patched before Bind"
    );
    assert_eq!(
        pods.get("pod-02").await.unwrap().spec.unwrap().node_name,
        None,
        "rejected at Permit"
    );
    assert_eq!(s.cluster.placement("default/pod-02"), None, "forgotten");
    assert!(!s.queue.is_empty(), "requeued with backoff");
    api.stop().await;
}

/// `koord_loop_iterations_total{name="<loop>"}` from an admin `/metrics` page.
fn loop_iterations(metrics: &str, name: &str) -> Option<u64> {
    let prefix = format!("koord_loop_iterations_total{{name=\"{name}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// An idle control plane (leader election on, as by default, nothing to schedule) must
/// not spin: its loops' wake-up counters stand (nearly) still. Counts, not time: the old
/// scheduler loop re-cloned its leadership receiver each turn and woke millions of times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_loops_stand_still() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut api = TestApi::start_with(opts).await;
    let c = api.client.clone();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let kc = kubeconfig(dir.path(), port);
    let args = [
        "--role=manager,scheduler",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--admin-addr",
        &admin.to_string(),
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--node-name",
        "idle",
    ];
    let koord = Koord::start(&args, &[], dir.path());
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(c.clone(), "koordinator-system");
    let leading = eventually(Duration::from_secs(30), || async {
        let held = |l: Option<k8s_openapi::api::coordination::v1::Lease>| {
            l.and_then(|l| l.spec?.holder_identity)
                .is_some_and(|h| h.starts_with("idle_"))
        };
        held(leases.get_opt("koord-scheduler").await.ok().flatten())
            && held(leases.get_opt("koordinator-manager").await.ok().flatten())
            && common::http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    })
    .await;
    assert!(leading, "never ready and leading: {}", koord.logs());
    // Let the first passes after winning the leases finish.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let read = || {
        let (_, body) = common::http_get(admin, "/metrics").unwrap_or_default();
        let get = |n| loop_iterations(&body, n).unwrap_or_else(|| panic!("no {n} counter"));
        (get("scheduler"), get("manager"))
    };
    let before = read();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = read();
    let (sched, manager) = (after.0 - before.0, after.1 - before.1);
    assert!(sched <= 20, "scheduler loop woke {sched} times in 3 idle s");
    assert!(
        manager <= 20,
        "manager loop woke {manager} times in 3 idle s"
    );
    drop(koord);
    api.stop().await;
}

/// A pod that does not decode as a Pod (a field of the wrong type) used to fail the
/// scheduler's whole pod list, so it scheduled nothing. Now it is skipped and counted,
/// and the good pods are scheduled; the same holds for custom resources (NodeSLO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_object_does_not_hide_the_good_ones() {
    use futures::StreamExt;
    let (mut api, c, pp) = api_with_one_node().await;
    let mut bad = serde_json::to_value(pod(2)).unwrap();
    bad["spec"]["hostNetwork"] = "yes".into();
    bad["metadata"]["namespace"] = "default".into();
    bad["metadata"]["uid"] = "bad-uid".into();
    bad["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z".into();
    let bad_name = bad["metadata"]["name"].as_str().unwrap().to_string();
    // The API server refuses such a body (400), as kube-apiserver does; a stored object can
    // still be malformed (written by an older server, or by hand into etcd), so the test
    // puts it straight into the store.
    api.server()
        .store()
        .commit(
            &(String::new(), "pods".to_string()),
            "default",
            &bad_name,
            |_| {
                Ok::<_, koord::apiserver::store::StoreError>(koord::apiserver::store::Change::Put(
                    bad,
                ))
            },
        )
        .unwrap();
    assert!(
        Api::<Pod>::namespaced(c.clone(), "default")
            .list(&ListParams::default())
            .await
            .is_err(),
        "the typed list really fails"
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    pods.create(&pp, &pod(1)).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let port = api.server().addr().port();
    let sched = start_scheduler(dir.path(), port, &[]);
    let bound = eventually(Duration::from_secs(20), || async {
        pods.get("pod-01")
            .await
            .is_ok_and(|p| p.spec.and_then(|s| s.node_name).is_some())
    })
    .await;
    assert!(bound, "the good pod was not scheduled:\n{}", sched.logs());
    assert!(
        sched.logs().contains("does not decode"),
        "the bad one is reported:\n{}",
        sched.logs()
    );

    let slos: Api<kube::api::DynamicObject> = Api::all_with(
        c.clone(),
        &kube::api::ApiResource::erase::<koord::api::slo::NodeSLO>(&()),
    );
    let good = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
        "metadata": {"name": "good"}, "spec": {}});
    slos.create(&pp, &obj(good)).await.unwrap();
    // The CRD's schema refuses it (422), as kube-apiserver does; one stored under an older
    // schema can still be there, so it goes straight into the store.
    let bad = json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
        "metadata": {"name": "bad", "uid": "bad-slo", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"cpuBurstStrategy": 5}});
    let refused = slos.create(&pp, &obj(bad.clone())).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("spec.cpuBurstStrategy in body must be of type object"),
        "{refused}"
    );
    api.server()
        .store()
        .commit(
            &("slo.koordinator.sh".to_string(), "nodeslos".to_string()),
            "",
            "bad",
            |_| {
                Ok::<_, koord::apiserver::store::StoreError>(koord::apiserver::store::Change::Put(
                    bad,
                ))
            },
        )
        .unwrap();
    let errors = koord::kernel::watch::DecodeErrors::default();
    let mut stream = std::pin::pin!(koord::kernel::watch::watch::<koord::api::slo::NodeSLO>(
        c.clone(),
        None,
        Default::default(),
        errors.clone(),
    ));
    let mut seen = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
    {
        match ev.unwrap() {
            kube::runtime::watcher::Event::InitApply(s) => seen.push(s.metadata.name.unwrap()),
            kube::runtime::watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen, ["good"]);
    assert_eq!(errors.count(), 1);
    drop(sched);
    api.stop().await;
}
