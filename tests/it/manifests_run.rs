//! koord's own `manifests/base`, run as a cluster runs it (see `podrun`): its CRDs, RBAC
//! (the chart's names, each role granted exactly what it asks for at start), ConfigMaps,
//! webhook configurations, Deployments and DaemonSet applied to the embedded API server
//! with RBAC and CRD schemas enforced, each container run as its ServiceAccount. Every
//! role does its job (`rolejobs`), none logs a refused request, and no role is left
//! without a permission it checks for. Then the upgrade: Koordinator's chart CRDs and
//! objects first (a NodeResourceTopology stored as `v1alpha2`), koord's CRDs applied over
//! them — accepted, and the objects still served.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::podrun::{Cluster, NAMESPACE, docs_of, logs, refused};

const NODE: &str = "chart-node";
const HOT: &str = "hot-node";

/// `manifests/base`'s objects (the namespace exists already), the descheduler's interval
/// shortened as in the chart test.
fn base() -> Vec<Value> {
    koord::manifests::all()
        .into_iter()
        .filter(|m| m.path.starts_with("base/") && m.path.ends_with(".yaml"))
        .filter(|m| m.path != "base/kustomization.yaml" && m.path != "base/namespace.yaml")
        .flat_map(|m| docs_of(&m.text))
        .map(|mut d| {
            if let Some(text) = d
                .pointer_mut("/data/koord-descheduler-config")
                .and_then(|v| v.as_str().map(str::to_string))
            {
                d["data"]["koord-descheduler-config"] =
                    crate::chart::with_lownodeload(&text).into();
            }
            d
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn koords_manifests_run_every_role_under_their_rbac() {
    let cluster = Cluster::start(&[(NODE, "32", "64Gi"), (HOT, "8", "16Gi")]).await;
    let c = cluster.client();
    let docs = base();
    cluster.apply(&docs).await;
    let cms: std::collections::BTreeMap<String, ConfigMap> = docs
        .iter()
        .filter(|d| d["kind"] == "ConfigMap")
        .map(|d| {
            let cm: ConfigMap = serde_json::from_value(d.clone()).unwrap();
            (cm.metadata.name.clone().unwrap(), cm)
        })
        .collect();
    crate::rolejobs::hot_node(&c, HOT).await;
    let (running, webhook) = crate::chart::run_all(&cluster, &docs, &cms).await;
    assert!(webhook > 0, "koord-manager declares its webhook port");
    crate::rolejobs::webhook_endpoint(&c, NAMESPACE, webhook).await;
    let all_logs = || logs(&running);
    crate::rolejobs::check(&c, NODE, HOT, &all_logs).await;
    let refusals = refused(&running);
    assert!(
        refusals.is_empty(),
        "requests refused under koord's own RBAC:\n{}",
        refusals.join("\n")
    );
    // Granted exactly what each role asks for: none does without one of its requests.
    let missing: Vec<String> = running
        .iter()
        .flat_map(|r| {
            r.koord
                .plain_logs()
                .lines()
                .filter(|l| l.contains("RBAC does not allow"))
                .map(|l| format!("{}: {l}", r.name))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    drop(running);
    let mut cluster = cluster;
    cluster.api.stop().await;
}

fn nrt(version: &str, name: &str) -> Value {
    json!({"apiVersion": format!("topology.node.k8s.io/{version}"), "kind": "NodeResourceTopology",
        "metadata": {"name": name}, "topologyPolicies": ["None"],
        "zones": [{"name": "node-0", "type": "Node",
            "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"}]}]})
}

fn api(
    c: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::all_with(c.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// A cluster that ran Koordinator (its CRDs, a NodeResourceTopology written as
/// `v1alpha2`, a Reservation), then koord's CRDs applied over the chart's: the API
/// server takes them (their versions keep every stored one), and the objects are still
/// served, the NRT at both versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn koords_crds_apply_over_koordinators() {
    let cluster = Cluster::start(&[]).await;
    let c = cluster.client();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/koordinator/crds"
    );
    let mut chart = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        chart.extend(docs_of(&std::fs::read_to_string(e.path()).unwrap()));
    }
    cluster.apply(&chart).await;
    let pp = PostParams::default();
    let v2 = api(
        &c,
        "topology.node.k8s.io",
        "v1alpha2",
        "NodeResourceTopology",
        "noderesourcetopologies",
    );
    v2.create(
        &pp,
        &serde_json::from_value(nrt("v1alpha2", "old-node")).unwrap(),
    )
    .await
    .unwrap();
    let rs = api(
        &c,
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Reservation",
        "reservations",
    );
    let r = json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
        "metadata": {"name": "kept"},
        "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "x"}}}],
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    rs.create(&pp, &serde_json::from_value(r).unwrap())
        .await
        .unwrap();
    let koord_crds: Vec<Value> = koord::api::crds::all()
        .iter()
        .map(|crd| docs_of(&koord::api::crds::to_yaml(crd)).remove(0))
        .collect();
    cluster.apply(&koord_crds).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(c.clone());
    let nrt_crd = crds
        .get("noderesourcetopologies.topology.node.k8s.io")
        .await
        .unwrap();
    let stored = nrt_crd
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default();
    assert!(stored.contains(&"v1alpha2".to_string()), "{stored:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let v1 = api(
        &c,
        "topology.node.k8s.io",
        "v1alpha1",
        "NodeResourceTopology",
        "noderesourcetopologies",
    );
    for (api, version) in [(&v1, "v1alpha1"), (&v2, "v1alpha2")] {
        let got = api
            .get("old-node")
            .await
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        let av = got.types.map(|t| t.api_version).unwrap_or_default();
        assert_eq!(av, format!("topology.node.k8s.io/{version}"));
        assert_eq!(got.data["zones"][0]["name"], "node-0");
    }
    // koord's own client reads it as v1alpha1.
    let typed: Api<koord::api::topology::NodeResourceTopology> = Api::all(c.clone());
    assert_eq!(typed.get("old-node").await.unwrap().spec.zones.len(), 1);
    let kept = rs.get("kept").await.unwrap();
    assert_eq!(kept.data["spec"]["ttl"], "24h", "the chart's default, kept");
    let mut cluster = cluster;
    cluster.api.stop().await;
}

/// A role missing a permission it cannot do without is not ready — `/readyz` and
/// `/healthz` 503, a log line naming verb, group and resource — and starts once RBAC
/// grants it (asked again every 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_waits_for_a_permission_it_needs() {
    let cluster = Cluster::start(&[(NODE, "8", "16Gi")]).await;
    let docs = base();
    let rbac: Vec<Value> = docs
        .iter()
        .filter(|d| {
            d["apiVersion"].as_str().unwrap_or("").starts_with("rbac.")
                || d["kind"] == "ServiceAccount"
        })
        .cloned()
        .collect();
    let role = |keep_metrics: bool| -> Vec<Value> {
        rbac.iter()
            .filter(|d| d["metadata"]["name"] == "koord-descheduler-role")
            .map(|d| {
                let mut d = d.clone();
                if !keep_metrics {
                    let rules = d["rules"].as_array_mut().unwrap();
                    rules.retain(|r| r["resources"] != json!(["nodemetrics"]));
                }
                d
            })
            .collect()
    };
    cluster.apply(&rbac).await;
    cluster.apply(&role(false)).await;
    let cms = docs
        .iter()
        .filter(|d| d["kind"] == "ConfigMap")
        .map(|d| {
            let cm: ConfigMap = serde_json::from_value(d.clone()).unwrap();
            (cm.metadata.name.clone().unwrap(), cm)
        })
        .collect();
    cluster
        .apply(
            &docs
                .iter()
                .filter(|d| d["kind"] == "ConfigMap")
                .cloned()
                .collect::<Vec<_>>(),
        )
        .await;
    let w = crate::podrun::Workload::all(&docs)
        .into_iter()
        .find(|w| w.name == "koord-descheduler")
        .unwrap();
    let r = cluster.run(&w, NODE, &cms).await;
    let (path, addr) = r.ready_at.clone().unwrap();
    let said = crate::common::wait_until(Duration::from_secs(20), || {
        r.koord
            .plain_logs()
            .contains("RBAC does not allow a request this role needs")
    });
    assert!(said, "{}", r.koord.logs());
    let log = r.koord.plain_logs();
    let line = log
        .lines()
        .find(|l| l.contains("RBAC does not allow a request"))
        .unwrap();
    for part in [
        "verbs=get,list,watch",
        "group=slo.koordinator.sh",
        "resources=nodemetrics",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    let (status, body) = crate::common::http_get(addr, &path).unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("[-]descheduler/access not ready"), "{body}");
    let (status, _) = crate::common::http_get(addr, "/healthz").unwrap();
    assert_eq!(status, 503, "never synced: not healthy");
    cluster.apply(&role(true)).await;
    r.wait_ready(Duration::from_secs(45));
    assert_eq!(crate::common::http_get(addr, "/healthz").unwrap().0, 200);
    drop(r);
    let mut cluster = cluster;
    cluster.api.stop().await;
}
