//! The manager's webhooks called for real by the embedded API server over HTTPS with the
//! self-managed certificate: a ClusterColocationProfile turns a plain pod into a BE batch
//! pod, an ElasticQuota tree violation and a bad slo-controller-config are denied with
//! their reasons, and with the webhook down `Fail` entries block while `Ignore` ones pass.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Koord, TestApi, eventually, free_port, kubeconfig};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use koord::api::config::ClusterColocationProfile;
use koord::api::quota::ElasticQuota;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CONFIG: &str = "manager:\n  featureGates:\n    ConfigMapValidatingWebhook: true\n    NodeValidatingWebhook: true\n    NodeMutatingWebhook: true\n    EnablePodEnhancedValidator: true\n";

fn start_manager(dir: &std::path::Path, api_port: u16, webhook_port: u16) -> Koord {
    start_manager_with(dir, api_port, webhook_port, &[], &[])
}

fn start_manager_with(
    dir: &std::path::Path,
    api_port: u16,
    webhook_port: u16,
    envs: &[(&str, &str)],
    more_gates: &[&str],
) -> Koord {
    let admin = format!("127.0.0.1:{}", free_port());
    let kc = kubeconfig(dir, api_port);
    let cfg = dir.join("koord.yaml");
    let more: String = more_gates
        .iter()
        .map(|g| format!("    {g}: true\n"))
        .collect();
    std::fs::write(&cfg, format!("{CONFIG}{more}")).unwrap();
    let port = webhook_port.to_string();
    Koord::start(
        &[
            "--role=manager",
            "--config",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--admin-addr",
            &admin,
            "--data-dir",
            dir.to_str().unwrap(),
            "--node-name",
            "m1",
        ],
        &[&[("KOORD_MANAGER__WEBHOOK__PORT", port.as_str())], envs].concat(),
        dir,
    )
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn denial(r: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) => s.message,
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// The configurations call the webhook Service and some replica is an endpoint of it.
async fn webhooks_ready(c: &kube::Client) -> bool {
    let api: Api<MutatingWebhookConfiguration> = Api::all(c.clone());
    let Ok(m) = api.get("koordinator-mutating-webhook-configuration").await else {
        return false;
    };
    let registered = m.webhooks.unwrap_or_default().iter().any(|w| {
        w.client_config.ca_bundle.is_some()
            && w.client_config.service.as_ref().is_some_and(|s| {
                s.name == "koordinator-webhook-service" && s.path.as_deref() == Some("/mutate-pod")
            })
    });
    registered && !endpoint_ports(c).await.is_empty()
}

/// The ports of the webhook Service's endpoints.
async fn endpoint_ports(c: &kube::Client) -> Vec<u16> {
    let slices: Api<EndpointSlice> = Api::namespaced(c.clone(), "koordinator-system");
    let lp = ListParams::default().labels("kubernetes.io/service-name=koordinator-webhook-service");
    let Ok(list) = slices.list(&lp).await else {
        return Vec::new();
    };
    let mut ports: Vec<u16> = list
        .items
        .iter()
        .flat_map(|s| s.ports.iter().flatten().filter_map(|p| p.port))
        .map(|p| p as u16)
        .collect();
    ports.sort();
    ports
}

/// An API server and a manager whose webhooks are registered.
async fn api_and_manager(dir: &std::path::Path, more_gates: &[&str]) -> (TestApi, u16, Koord) {
    api_and_manager_with(dir, more_gates, &[]).await
}

async fn api_and_manager_with(
    dir: &std::path::Path,
    more_gates: &[&str],
    envs: &[(&str, &str)],
) -> (TestApi, u16, Koord) {
    let api_port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], api_port));
    let api = TestApi::start_with(opts).await;
    let mgr = start_manager_with(dir, api_port, free_port(), envs, more_gates);
    let c = api.client.clone();
    assert!(
        eventually(Duration::from_secs(30), || webhooks_ready(&c)).await,
        "{}",
        mgr.logs()
    );
    (api, api_port, mgr)
}

fn plain_pod(name: &str, ns: &str) -> Pod {
    obj(
        json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": "spark"}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}}]}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_mutate_validate_and_honour_failure_policies() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, api_port, mut mgr) = api_and_manager(dir.path(), &[]).await;
    let c = api.client.clone();
    let pp = PostParams::default();

    // 1. A profile matching the namespace turns a plain pod into a BE batch pod.
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(
        &pp,
        &obj(json!({"metadata": {"name": "batch", "labels": {"colocation": "on"}}})),
    )
    .await
    .unwrap();
    nss.create(&pp, &obj(json!({"metadata": {"name": "plain"}})))
        .await
        .unwrap();
    let profile: ClusterColocationProfile = obj(
        json!({"apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile", "metadata": {"name": "colocation"},
        "spec": {"namespaceSelector": {"matchLabels": {"colocation": "on"}}, "qosClass": "BE",
            "priorityClassName": "koord-batch", "koordinatorPriority": 1111, "schedulerName": "koord-scheduler",
            "labels": {"koordinator.sh/mutated": "true"}}}),
    );
    Api::<ClusterColocationProfile>::all(c.clone())
        .create(&pp, &profile)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "batch");
    let mut n = 0;
    let mutated = eventually(Duration::from_secs(15), || {
        n += 1;
        let pods = pods.clone();
        let name = format!("spark-{n}");
        async move {
            let p = pods
                .create(&PostParams::default(), &plain_pod(&name, "batch"))
                .await
                .unwrap();
            p.metadata
                .labels
                .unwrap_or_default()
                .contains_key("koordinator.sh/qosClass")
        }
    })
    .await;
    assert!(mutated, "{}", mgr.logs());
    let p = pods.get(&format!("spark-{n}")).await.unwrap();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["koordinator.sh/qosClass"], "BE");
    assert_eq!(labels["koordinator.sh/priority"], "1111");
    let spec = p.spec.clone().unwrap();
    assert_eq!(spec.priority_class_name.as_deref(), Some("koord-batch"));
    assert_eq!(spec.priority, Some(5000));
    assert_eq!(spec.scheduler_name.as_deref(), Some("koord-scheduler"));
    let res = spec.containers[0].resources.clone().unwrap();
    let req = res.requests.unwrap();
    assert_eq!(req["kubernetes.io/batch-cpu"].0, "500");
    assert_eq!(req["kubernetes.io/batch-memory"].0, "268435456");
    assert!(!req.contains_key("cpu") && !req.contains_key("memory"));
    assert_eq!(res.limits.unwrap()["kubernetes.io/batch-cpu"].0, "1000");
    let qos = p.status.as_ref().and_then(|s| s.qos_class.as_deref());
    assert_eq!(qos, Some("BestEffort"), "QoS class computed after mutation");
    let ann = p.metadata.annotations.unwrap_or_default();
    assert!(ann["node.koordinator.sh/extended-resource-spec"].contains("batch-cpu"));
    let other = Api::<Pod>::namespaced(c.clone(), "plain")
        .create(&pp, &plain_pod("web", "plain"))
        .await
        .unwrap();
    assert!(
        !other
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("koordinator.sh/qosClass")
    );
    // The validating webhook is live too: a BE pod without a batch priority is refused.
    let bad: Pod = obj(
        json!({"metadata": {"name": "bad", "namespace": "plain", "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    );
    let msg = denial(
        Api::<Pod>::namespaced(c.clone(), "plain")
            .create(&pp, &bad)
            .await,
    );
    assert!(msg.contains("cannot be used in combination"), "{msg}");

    // 2. ElasticQuota: the children's min may not exceed the parent's.
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "default");
    let quota = |name: &str, labels: Value, min: &str| -> ElasticQuota {
        obj(
            json!({"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"min": {"cpu": min}, "max": {"cpu": "20"}}}),
        )
    };
    quotas
        .create(
            &pp,
            &quota(
                "parent",
                json!({"quota.scheduling.koordinator.sh/is-parent": "true"}),
                "10",
            ),
        )
        .await
        .unwrap();
    let child_labels = json!({"quota.scheduling.koordinator.sh/parent": "parent"});
    let a = quotas
        .create(&pp, &quota("child-a", child_labels.clone(), "6"))
        .await
        .unwrap();
    assert!(
        a.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("quota.scheduling.koordinator.sh/shared-weight"),
        "mutated"
    );
    let msg = denial(
        quotas
            .create(&pp, &quota("child-b", child_labels, "6"))
            .await,
    );
    assert!(
        msg.contains("spec.min[cpu]") && msg.contains("more than its min"),
        "{msg}"
    );
    let msg = denial(quotas.delete("parent", &Default::default()).await);
    assert!(msg.contains("child quotas"), "{msg}");

    // 3. slo-controller-config: an invalid update is denied, the stored one kept.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "koordinator-system");
    let cm: ConfigMap = obj(
        json!({"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system",
        "labels": {"koordinator.sh/configmap-type": "slo-controller-config"}},
        "data": {"resource-threshold-config": "{\"clusterStrategy\":{\"enable\":true,\"cpuSuppressThresholdPercent\":65}}"}}),
    );
    cms.create(&pp, &cm).await.unwrap();
    let bad = json!({"data": {"resource-threshold-config": "{\"clusterStrategy\":{\"cpuSuppressThresholdPercent\":165}}"}});
    let msg = denial(
        cms.patch(
            "slo-controller-config",
            &PatchParams::default(),
            &Patch::Merge(bad),
        )
        .await,
    );
    assert!(msg.contains("cpuSuppressThresholdPercent"), "{msg}");
    let kept = cms.get("slo-controller-config").await.unwrap();
    assert!(kept.data.unwrap()["resource-threshold-config"].contains("65"));

    // 4. Killed: the chart's policies: pods (`Ignore`) pass unmutated, the
    // slo-controller-config (`Fail`) waits for a webhook.
    mgr.signal("KILL");
    assert!(mgr.wait_exit(Duration::from_secs(20)).is_some());
    let late = pods.create(&pp, &plain_pod("late", "batch")).await.unwrap();
    assert!(
        !late
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("koordinator.sh/qosClass")
    );
    let msg = denial(
        cms.patch(
            "slo-controller-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": "1"}})),
        )
        .await,
    );
    assert!(msg.contains("failed calling webhook"), "{msg}");
    let node: Node = obj(json!({"metadata": {"name": "late-node"}}));
    Api::<Node>::all(c.clone())
        .create(&pp, &node)
        .await
        .unwrap();

    // 5. The last replica to stop cleanly takes the configurations with it (no endpoint
    // is left to answer them). It removes the killed one's endpoint and leads once the
    // killed one's lease runs out.
    let port = free_port();
    let mut again = start_manager(dir.path(), api_port, port);
    let ours = eventually(Duration::from_secs(40), || async {
        endpoint_ports(&c).await == vec![port] && again.plain_logs().contains("leading=true")
    });
    assert!(ours.await, "{}", again.logs());
    again.signal("TERM");
    assert!(again.wait_exit(Duration::from_secs(20)).is_some());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(c.clone());
    assert!(
        mutating
            .get_opt("koordinator-mutating-webhook-configuration")
            .await
            .unwrap()
            .is_none(),
        "{}",
        again.logs()
    );
    cms.patch(
        "slo-controller-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    api.stop().await;
}

fn profile() -> ClusterColocationProfile {
    obj(json!({"apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile", "metadata": {"name": "colocation"},
        "spec": {"namespaceSelector": {"matchLabels": {"colocation": "on"}}, "qosClass": "BE",
            "priorityClassName": "koord-batch", "koordinatorPriority": 1111,
            "schedulerName": "koord-scheduler"}}))
}

fn is_be(p: &Pod) -> bool {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("koordinator.sh/qosClass"))
        == Some(&"BE".to_string())
}

/// Two replicas serve admission as endpoints of the webhook Service: they write the same
/// configurations (no fight), and with one killed by SIGKILL — the leader or not — every
/// pod created right after is still mutated by the other (before, only the leader's URL
/// was registered and pods went unmutated for the whole failover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_serve_admission_through_the_service_and_a_killed_one_loses_none() {
    let dir = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], api_port));
    let mut api = TestApi::start_with(opts).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let (p1, p2) = (free_port(), free_port());
    let fast = [("KOORD_MANAGER__WEBHOOK__RESYNC_SECONDS", "1")];
    let m1 = start_manager_with(dir.path(), api_port, p1, &fast, &[]);
    let m2 = start_manager_with(dir.path(), api_port, p2, &fast, &[]);
    let mut both = vec![p1, p2];
    both.sort();
    let ready = eventually(Duration::from_secs(30), || async {
        webhooks_ready(&c).await && endpoint_ports(&c).await == both
    });
    assert!(ready.await, "{}\n{}", m1.logs(), m2.logs());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(c.clone());
    let name = "koordinator-mutating-webhook-configuration";
    let rv = |m: MutatingWebhookConfiguration| m.metadata.resource_version;
    let before = rv(mutating.get(name).await.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        rv(mutating.get(name).await.unwrap()),
        before,
        "no replica rewrote them"
    );

    let nss: Api<Namespace> = Api::all(c.clone());
    let ns = json!({"metadata": {"name": "batch", "labels": {"colocation": "on"}}});
    nss.create(&pp, &obj(ns)).await.unwrap();
    Api::<ClusterColocationProfile>::all(c.clone())
        .create(&pp, &profile())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "batch");
    let mut n = 0;
    let profiled = eventually(Duration::from_secs(15), || {
        n += 1;
        let (pods, name) = (pods.clone(), format!("warm-{n}"));
        async move {
            is_be(
                &pods
                    .create(&PostParams::default(), &plain_pod(&name, "batch"))
                    .await
                    .unwrap(),
            )
        }
    });
    assert!(profiled.await, "the profile reached both replicas' caches");
    // Both replicas have read the profile once each has mutated a pod.
    for i in 0..10 {
        let p = pods
            .create(&pp, &plain_pod(&format!("both-{i}"), "batch"))
            .await
            .unwrap();
        assert!(is_be(&p), "pod both-{i} unmutated with both replicas up");
    }
    // The leader goes: the one that wrote the configurations.
    let (mut leader, survivor, left) = if m1.plain_logs().contains("leading=true") {
        (m1, m2, p2)
    } else {
        (m2, m1, p1)
    };
    leader.signal("KILL");
    assert!(leader.wait_exit(Duration::from_secs(10)).is_some());
    for i in 0..30 {
        let p = pods
            .create(&pp, &plain_pod(&format!("after-{i}"), "batch"))
            .await
            .unwrap();
        assert!(
            is_be(&p),
            "pod after-{i} unmutated after the leader was killed\n{}",
            survivor.logs()
        );
    }
    let pruned = eventually(Duration::from_secs(15), || async {
        endpoint_ports(&c).await == vec![left]
    });
    assert!(
        pruned.await,
        "the killed replica's endpoint was not removed: {:?}",
        endpoint_ports(&c).await
    );
    drop(survivor);
    api.stop().await;
}

async fn healthz_trusting(port: u16, ca: &str) -> bool {
    use koord::kernel::http_client::{Trust, send};
    let trust = Trust::CaBundle(ca.as_bytes().to_vec());
    let url = format!("https://127.0.0.1:{port}/healthz");
    send(
        hyper::Method::GET,
        &url,
        &[],
        None,
        Some(&trust),
        Duration::from_secs(2),
    )
    .await
    .is_ok_and(|r| r.status.is_success())
}

/// `certWriter: provided`: the operator's files are served, and replaced files are picked
/// up without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provided_certificates_are_reloaded_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let names = ["127.0.0.1".to_string()];
    let write = |b: &koord::kernel::tls::CertBundle| {
        std::fs::write(certs.join("tls.crt"), &b.cert_pem).unwrap();
        std::fs::write(certs.join("tls.key"), &b.key_pem).unwrap();
        std::fs::write(certs.join("ca.crt"), &b.ca_pem).unwrap();
    };
    let first = koord::kernel::tls::generate("first-ca", &names).unwrap();
    write(&first);
    let api_port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], api_port));
    let mut api = TestApi::start_with(opts).await;
    let port = free_port();
    let mgr = Koord::start(
        &[
            "--role=manager",
            "--kubeconfig",
            kubeconfig(dir.path(), api_port).to_str().unwrap(),
            "--admin-addr",
            &format!("127.0.0.1:{}", free_port()),
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--node-name",
            "m1",
        ],
        &[
            ("KOORD_MANAGER__WEBHOOK__PORT", port.to_string().as_str()),
            ("KOORD_MANAGER__WEBHOOK__CERT_WRITER", "provided"),
            ("KOORD_MANAGER__WEBHOOK__CERT_DIR", certs.to_str().unwrap()),
            ("KOORD_MANAGER__WEBHOOK__RESYNC_SECONDS", "1"),
        ],
        dir.path(),
    );
    let ok = eventually(Duration::from_secs(30), || {
        healthz_trusting(port, &first.ca_pem)
    })
    .await;
    assert!(ok, "{}", mgr.logs());
    let second = koord::kernel::tls::generate("second-ca", &names).unwrap();
    assert!(!healthz_trusting(port, &second.ca_pem).await);
    write(&second);
    let ok = eventually(Duration::from_secs(15), || {
        healthz_trusting(port, &second.ca_pem)
    })
    .await;
    assert!(ok, "{}", mgr.logs());
    // The caBundle published to the API server follows the new CA too.
    let c = api.client.clone();
    let ca_now = || async {
        let m = Api::<MutatingWebhookConfiguration>::all(c.clone())
            .get("koordinator-mutating-webhook-configuration")
            .await;
        m.ok()
            .and_then(|m| m.webhooks?.first()?.client_config.ca_bundle.clone())
            .is_some_and(|b| b.0 == second.ca_pem.as_bytes())
    };
    assert!(
        eventually(Duration::from_secs(15), ca_now).await,
        "{}",
        mgr.logs()
    );
    drop(mgr);
    api.stop().await;
}

/// PodEnhancedValidator: once `pod-enhanced-validator-config` asks for a label, a pod
/// without it is refused with Koordinator's reason; whitelisted namespaces and the skip
/// label pass; deleting the ConfigMap lifts the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_enhanced_validator_follows_its_configmap() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, _, mgr) = api_and_manager(dir.path(), &[]).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let nss: Api<Namespace> = Api::all(c.clone());
    let _ = nss
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "koordinator-system"}})),
        )
        .await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "koordinator-system");
    cms.create(
        &pp,
        &obj(
            json!({"metadata": {"name": "pod-enhanced-validator-config"},
            "data": {"enable": "true", "rules": r#"[{"name": "quota-label-required",
                "requiredLabels": ["quota.scheduling.koordinator.sh/name"],
                "namespaceWhitelist": ["kube-system"]}]"#}}),
        ),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut n = 0;
    let mut next = || {
        n += 1;
        format!("p{n}")
    };
    let refused = eventually(Duration::from_secs(10), || {
        let name = next();
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &plain_pod(&name, "default"))
                .await
                .is_err()
        }
    })
    .await;
    assert!(refused, "{}", mgr.logs());
    let why = denial(pods.create(&pp, &plain_pod("unlabelled", "default")).await);
    assert!(
        why.contains("validation rule 'quota-label-required' failed: required label 'quota.scheduling.koordinator.sh/name' is missing"),
        "{why}"
    );
    let mut skip = plain_pod("skipped", "default");
    skip.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(
            "koordinator.sh/skip-enhanced-validation".into(),
            "true".into(),
        );
    pods.create(&pp, &skip).await.unwrap();
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    system
        .create(&pp, &plain_pod("system", "kube-system"))
        .await
        .unwrap();
    cms.delete("pod-enhanced-validator-config", &Default::default())
        .await
        .unwrap();
    let lifted = eventually(Duration::from_secs(10), || {
        let name = format!("after-{}", next());
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &plain_pod(&name, "default"))
                .await
                .is_ok()
        }
    })
    .await;
    assert!(lifted, "{}", mgr.logs());
    drop(mgr);
    api.stop().await;
}

/// ElasticQuota admission (`EnableQuotaAdmission`): pods are admitted while the quota's
/// `child-request` plus their requests stays within its max, and each admitted pod is
/// added to `child-request` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_admission_counts_admitted_pods_against_max() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, _, mgr) = api_and_manager(dir.path(), &["EnableQuotaAdmission"]).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let quotas: Api<ElasticQuota> = Api::namespaced(c.clone(), "default");
    quotas
        .create(
            &pp,
            &obj(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": "team-a", "namespace": "default"},
                "spec": {"min": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": "1200m", "memory": "4Gi"}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let quota_pod = |name: &str| -> Pod {
        let mut p = plain_pod(name, "default");
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(
                "quota.scheduling.koordinator.sh/name".into(),
                "team-a".into(),
            );
        p
    };
    // The webhook's quota cache sees the new quota within moments.
    let first = eventually(Duration::from_secs(10), || {
        let pods = pods.clone();
        let p = quota_pod("first");
        async move { pods.create(&PostParams::default(), &p).await.is_ok() }
    })
    .await;
    assert!(first, "{}", mgr.logs());
    pods.create(&pp, &quota_pod("second")).await.unwrap();
    let why = denial(pods.create(&pp, &quota_pod("third")).await);
    assert!(
        why.ends_with(
            "denied the request: exceeded quota: default/team-a, requested: cpu=500m, used: cpu=1, limited: cpu=1200m"
        ),
        "{why}\n{}",
        mgr.logs()
    );
    let q = quotas.get("team-a").await.unwrap();
    let child: Value = serde_json::from_str(
        &q.metadata.annotations.unwrap()["quota.scheduling.koordinator.sh/child-request"],
    )
    .unwrap();
    assert_eq!(child, json!({"cpu": "1", "memory": "512Mi"}));
    drop(mgr);
    api.stop().await;
}

/// `/validate-pod-binding` (`BindingAdmissionWebhook`): with only koord-scheduler allowed
/// to bind, the embedded API server's `system:admin` is refused, a pod with the bypass
/// label is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_admission_lets_only_the_named_schedulers_bind() {
    let dir = tempfile::tempdir().unwrap();
    let envs = [
        (
            "KOORD_MANAGER__WEBHOOK__BINDING_ADMISSION__USER_NAME",
            "koord-scheduler",
        ),
        ("KOORD_MANAGER__WEBHOOK__BINDING_ADMISSION__NAMESPACES", "*"),
    ];
    let (mut api, _, mgr) =
        api_and_manager_with(dir.path(), &["BindingAdmissionWebhook"], &envs).await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut bypass = plain_pod("bypass", "default");
    bypass
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(
            "koordinator.sh/binding-admission-bypass".into(),
            String::new(),
        );
    for p in [plain_pod("plain", "default"), bypass] {
        pods.create(&pp, &p).await.unwrap();
    }
    let bind = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}})
    };
    // The manager's pod cache catches up within moments; until then the pod is unknown
    // and passes, so wait for the first refusal.
    let refused = eventually(Duration::from_secs(10), || {
        let pods = pods.clone();
        let body = bind("plain");
        async move {
            matches!(
                pods.create_subresource::<Value, Value>("binding", "plain", &PostParams::default(), &body).await,
                Err(kube::Error::Api(ref e)) if e.message.contains("binding denied: username is not in the allowed list")
            )
        }
    })
    .await;
    assert!(refused, "{}", mgr.logs());
    pods.create_subresource::<Value, Value>("binding", "bypass", &pp, &bind("bypass"))
        .await
        .unwrap();
    let bound = pods.get("bypass").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    drop(mgr);
    api.stop().await;
}
