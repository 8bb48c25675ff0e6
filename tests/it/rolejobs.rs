//! What each role is deployed for, checked from outside against a cluster that runs them
//! under RBAC (see `podrun`): the manager renders NodeSLO and batch resources and admits a
//! BE pod through its webhook; the koordlet reports its NodeMetric; the scheduler places
//! that BE pod (LoadAware among its plugins), counts a pod in an ElasticQuota's status
//! and puts an owner into its Reservation; the descheduler's LowNodeLoad moves a pod off a
//! hot node through a PodMigrationJob.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use koord::api::config::ClusterColocationProfile;
use koord::api::quota::ElasticQuota;
use koord::api::scheduling::migration::PodMigrationJob;
use koord::api::scheduling::reservation::Reservation;
use koord::api::slo::{NodeMetric, NodeSLO};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::eventually;

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The webhook Service's endpoint: what the endpoint controller publishes for the
/// manager's pod (here, the process's loopback port).
pub async fn webhook_endpoint(c: &kube::Client, ns: &str, port: u16) {
    let pp = PostParams::default();
    let services: Api<Service> = Api::namespaced(c.clone(), ns);
    if services
        .get_opt("koordinator-webhook-service")
        .await
        .unwrap()
        .is_none()
    {
        let svc = json!({"metadata": {"name": "koordinator-webhook-service", "namespace": ns},
            "spec": {"ports": [{"port": 443, "targetPort": 9876}],
                "selector": {"koord-app": "koord-manager"}}});
        services.create(&pp, &obj(svc)).await.unwrap();
    }
    let slice = json!({"metadata": {"name": "koordinator-webhook-service-test", "namespace": ns,
            "labels": {"kubernetes.io/service-name": "koordinator-webhook-service"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"port": port, "protocol": "TCP"}]});
    Api::<EndpointSlice>::namespaced(c.clone(), ns)
        .create(&pp, &obj(slice))
        .await
        .unwrap();
}

/// A hot node (7.5 of 8 CPUs used, as its koordlet would report) running two replicas
/// of `web`.
pub async fn hot_node(c: &kube::Client, node: &str) {
    let pp = PostParams::default();
    let rs: ReplicaSet = obj(json!({"metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}));
    let rs = Api::<ReplicaSet>::namespaced(c.clone(), "default")
        .create(&pp, &rs)
        .await
        .unwrap();
    let uid = rs.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for name in ["web-a", "web-b"] {
        let p = json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": true}]},
            "spec": {"schedulerName": "koord-scheduler", "nodeName": node,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}});
        pods.create(&pp, &obj(p)).await.unwrap();
        // Running and ready, as its kubelet would report it (an unready replica counts
        // against the workload's maxUnavailable).
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let status = json!({"status": {"phase": "Running", "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
    report_hot(c, node).await;
}

/// The hot node's NodeMetric, fresh.
pub async fn report_hot(c: &kube::Client, node: &str) {
    let api: Api<NodeMetric> = Api::all(c.clone());
    let m: NodeMetric = obj(
        json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": node}, "spec": {}}),
    );
    let _ = api.create(&PostParams::default(), &m).await;
    let usage = |cpu: &str| json!({"resources": {"cpu": cpu, "memory": "4Gi"}});
    let pm = |name: &str| json!({"namespace": "default", "name": name, "podUsage": usage("3")});
    let status = json!({"status": {"updateTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        "nodeMetric": {"nodeUsage": usage("7500m"), "systemUsage": usage("1500m")},
        "podsMetric": [pm("web-a"), pm("web-b")]}});
    api.patch_status(node, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Every role's job on `node` (and the descheduler's on `hot`); `logs` for failures.
pub async fn check(c: &kube::Client, node: &str, hot: &str, logs: &dyn Fn() -> String) {
    manager_and_koordlet(c, node, logs).await;
    pod_metrics_reported(c, node, logs).await;
    be_pod_admitted_and_scheduled(c, node, logs).await;
    quota_status_written(c, logs).await;
    reservation_used(c, node, logs).await;
    lownodeload_migrates(c, hot, logs).await;
}

async fn manager_and_koordlet(c: &kube::Client, node: &str, logs: &dyn Fn() -> String) {
    let slos: Api<NodeSLO> = Api::all(c.clone());
    let rendered = eventually(Duration::from_secs(30), || async {
        slos.get_opt(node).await.ok().flatten().is_some()
    })
    .await;
    assert!(rendered, "no NodeSLO:\n{}", logs());
    let metrics: Api<NodeMetric> = Api::all(c.clone());
    let reported = eventually(Duration::from_secs(60), || async {
        let m = metrics.get_opt(node).await.ok().flatten();
        let s = m.and_then(|m| m.status);
        s.as_ref().and_then(|s| s.update_time.as_ref()).is_some()
            && s.and_then(|s| s.node_metric).is_some()
    })
    .await;
    assert!(reported, "no NodeMetric report:\n{}", logs());
    let nodes: Api<Node> = Api::all(c.clone());
    let batch = eventually(Duration::from_secs(60), || async {
        let n = nodes.get(node).await.ok();
        let alloc = n.and_then(|n| n.status?.allocatable).unwrap_or_default();
        alloc.contains_key("kubernetes.io/batch-cpu")
    })
    .await;
    assert!(batch, "no batch-cpu on {node}:\n{}", logs());
}

/// A pod running on `node` — its kubelet-style cgroup made here, with a process in it, as
/// the kubelet and the runtime would — is in the NodeMetric's `podsMetric` (root only).
async fn pod_metrics_reported(c: &kube::Client, node: &str, logs: &dyn Fn() -> String) {
    use koord::api::extension::qos::KubeQoS;
    use koord::os::process::{SIGKILL, Spawn, signal, spawn_in_cgroups};
    use koord::os::{Cgroups, Driver};
    if !crate::common::burner::can_run() {
        eprintln!("skipped the pod metrics check: it needs root and a cgroup hierarchy");
        return;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let p = json!({"metadata": {"name": "metered", "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}});
    let p = pods.create(&PostParams::default(), &obj(p)).await.unwrap();
    let uid = p.metadata.uid.unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "startTime": now}});
    pods.patch_status("metered", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let cgroups = Cgroups::detect(Path::new("/sys/fs/cgroup"), "", Driver::Cgroupfs).unwrap();
    let dir = cgroups.pod_dir(KubeQoS::BestEffort, &uid);
    // Only what this test made is removed afterwards.
    let mut made = Vec::new();
    let mut d = Some(dir.clone());
    while let Some(x) = d {
        if !cgroups.exists(&x) {
            made.push(x.clone());
        }
        d = x.parent();
    }
    cgroups.create(&dir).unwrap();
    let child = spawn_in_cgroups(Spawn {
        program: "sleep".into(),
        args: vec!["300".into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        stdin: std::process::Stdio::null(),
        stdout: std::process::Stdio::null(),
        stderr: std::process::Stdio::null(),
        cgroup_procs: cgroups.procs_files(&dir),
        identity: None,
        keep_fd: None,
        mounts: Default::default(),
    })
    .unwrap();
    let metrics: Api<NodeMetric> = Api::all(c.clone());
    let reported = eventually(Duration::from_secs(60), || async {
        let m = metrics.get_opt(node).await.ok().flatten();
        let pods = m.and_then(|m| m.status?.pods_metric).unwrap_or_default();
        pods.iter().any(|p| p.name.as_deref() == Some("metered"))
    })
    .await;
    if let Some(pid) = child.id() {
        let _ = signal(pid as i32, SIGKILL);
    }
    let _ = child.wait_with_output().await;
    for x in &made {
        for _ in 0..50 {
            if cgroups.remove(x).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(
        reported,
        "no pod metrics for {node}'s running pod:\n{}",
        logs()
    );
}

async fn be_pod_admitted_and_scheduled(c: &kube::Client, node: &str, logs: &dyn Fn() -> String) {
    let pp = PostParams::default();
    let ns = json!({"metadata": {"name": "batch", "labels": {"colocation": "on"}}});
    Api::<Namespace>::all(c.clone())
        .create(&pp, &obj(ns))
        .await
        .unwrap();
    let profile: ClusterColocationProfile =
        obj(json!({"apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile", "metadata": {"name": "colocation"},
        "spec": {"namespaceSelector": {"matchLabels": {"colocation": "on"}}, "qosClass": "BE",
            "priorityClassName": "koord-batch", "schedulerName": "koord-scheduler"}}));
    Api::<ClusterColocationProfile>::all(c.clone())
        .create(&pp, &profile)
        .await
        .unwrap();
    // The webhook's Ignore policy admits a pod unmutated while the manager is not yet
    // serving (its certificate and caBundle in place); ask until one is mutated.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "batch");
    let mut n = 0;
    let mutated = eventually(Duration::from_secs(40), || {
        n += 1;
        let (pods, name) = (pods.clone(), format!("spark-{n}"));
        async move {
            let p = json!({"metadata": {"name": name, "namespace": "batch"},
                "spec": {"containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}});
            let p = pods.create(&PostParams::default(), &obj(p)).await.unwrap();
            let req = p.spec.unwrap().containers[0]
                .resources
                .clone()
                .unwrap_or_default();
            req.requests
                .unwrap_or_default()
                .contains_key("kubernetes.io/batch-cpu")
        }
    })
    .await;
    assert!(mutated, "no BE pod mutated by the webhook:\n{}", logs());
    let name = format!("spark-{n}");
    let bound = eventually(Duration::from_secs(30), || async {
        let p = pods.get(&name).await.ok();
        p.and_then(|p| p.spec?.node_name).as_deref() == Some(node)
    })
    .await;
    assert!(
        bound,
        "the BE pod {name} not scheduled to {node}:\n{}",
        logs()
    );
}

async fn quota_status_written(c: &kube::Client, logs: &dyn Fn() -> String) {
    let pp = PostParams::default();
    Api::<Namespace>::all(c.clone())
        .create(&pp, &obj(json!({"metadata": {"name": "team"}})))
        .await
        .unwrap();
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "team");
    let q: ElasticQuota = obj(
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team", "namespace": "team"},
        "spec": {"min": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": "4", "memory": "8Gi"}}}),
    );
    quotas.create(&pp, &q).await.unwrap();
    let p = json!({"metadata": {"name": "member", "namespace": "team",
            "labels": {"quota.scheduling.koordinator.sh/name": "team"}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "300m", "memory": "128Mi"}}}]}});
    Api::<Pod>::namespaced(c.clone(), "team")
        .create(&pp, &obj(p))
        .await
        .unwrap();
    let used = eventually(Duration::from_secs(40), || async {
        let q = quotas.get("team").await.ok();
        let used = q.and_then(|q| q.status?.used).unwrap_or_default();
        used.get("cpu").map(|v| v.0.as_str()) == Some("300m")
    })
    .await;
    assert!(
        used,
        "ElasticQuota status.used not written: {:?}\n{}",
        quotas.get("team").await.ok().and_then(|q| q.status),
        logs()
    );
}

async fn reservation_used(c: &kube::Client, node: &str, logs: &dyn Fn() -> String) {
    let pp = PostParams::default();
    let rs: Api<Reservation> = Api::all(c.clone());
    let r: Reservation = obj(
        json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
        "metadata": {"name": "resv"},
        "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "resv"}}}],
            "template": {"spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}}]}}}}),
    );
    rs.create(&pp, &r).await.unwrap();
    let available = eventually(Duration::from_secs(30), || async {
        let r = rs.get("resv").await.ok();
        r.and_then(|r| r.status?.phase).as_deref() == Some("Available")
    })
    .await;
    assert!(
        available,
        "the Reservation never became Available:\n{}",
        logs()
    );
    let p = json!({"metadata": {"name": "owner", "namespace": "default", "labels": {"app": "resv"}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}}}]}});
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    pods.create(&pp, &obj(p)).await.unwrap();
    let used = eventually(Duration::from_secs(30), || async {
        let p = pods.get("owner").await.ok();
        let ann = p.as_ref().and_then(|p| p.metadata.annotations.clone());
        let allocated = ann
            .and_then(|a| {
                a.get("scheduling.koordinator.sh/reservation-allocated")
                    .cloned()
            })
            .is_some_and(|a| a.contains("\"resv\""));
        allocated && p.and_then(|p| p.spec?.node_name).as_deref() == Some(node)
    })
    .await;
    assert!(
        used,
        "the owner was not placed into its Reservation:\n{}",
        logs()
    );
}

async fn lownodeload_migrates(c: &kube::Client, hot: &str, logs: &dyn Fn() -> String) {
    let jobs: Api<PodMigrationJob> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let (c2, hot2) = (c.clone(), hot.to_string());
    // The hot node's "koordlet" keeps reporting while the descheduler watches.
    let reporter = tokio::spawn(async move {
        loop {
            report_hot(&c2, &hot2).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    let started = eventually(Duration::from_secs(60), || async {
        let all = jobs.list(&Default::default()).await.unwrap().items;
        all.iter().any(|j| {
            let a = j.metadata.annotations.clone().unwrap_or_default();
            a.get("koordinator.sh/evict-trigger").map(String::as_str) == Some("LowNodeLoad")
        })
    })
    .await;
    assert!(started, "no PodMigrationJob from LowNodeLoad:\n{}", logs());
    // Evicted: gone, or terminating (no kubelet here finishes a graceful deletion).
    let evicted = eventually(Duration::from_secs(60), || async {
        let left = pods.list(&Default::default()).await.unwrap().items;
        left.iter()
            .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with("web-"))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count()
            < 2
    })
    .await;
    reporter.abort();
    assert!(
        evicted,
        "no web pod evicted: {:?}\n{}",
        jobs.list(&Default::default()).await.map(|l| l.items),
        logs()
    );
}
