//! The upstream descheduler plugins end to end, the way an operator meets them: three
//! replicas piled on one node (RemoveDuplicates), a topology spread skew of 3 over maxSkew 1
//! (RemovePodsViolatingTopologySpreadConstraint), a pod whose required anti-affinity selects
//! its neighbour (RemovePodsViolatingInterPodAntiAffinity), and a plugin koord does not know.
//! `koord explain deschedule` over a snapshot names the evictions and the unknown plugin; the
//! real `koord --role=descheduler` with DefaultEvictor then evicts exactly those pods through
//! the Eviction API and logs the warning.

use crate::common;
use crate::descheduler::{api_server, explain, obj, start};
use crate::scheduler::listed;

use std::time::Duration;

use common::eventually;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CONFIG: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: upstream
  plugins:
    deschedule: {enabled: [{name: RemovePodsViolatingInterPodAntiAffinity}, {name: NopePlugin}]}
    balance: {enabled: [{name: RemoveDuplicates}, {name: RemovePodsViolatingTopologySpreadConstraint}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
"#;

fn pod(name: &str, node: &str, owner: &str, image: &str, extra: Value) -> Pod {
    let mut v = json!({"metadata": {"name": name, "namespace": "default",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": format!("{owner}-uid"), "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "100m"}}}]}});
    json_patch::merge(&mut v, &extra);
    obj(v)
}

async fn setup(c: &kube::Client) {
    let nodes: Api<Node> = Api::all(c.clone());
    for (i, zone) in ["a", "b", "c"].iter().enumerate() {
        let labels = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}});
        nodes
            .patch(
                &format!("sim-node-{i}"),
                &PatchParams::default(),
                &Patch::Merge(labels),
            )
            .await
            .unwrap();
    }
    let spread = json!({"metadata": {"labels": {"app": "spread"}}, "spec": {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "spread"}}}]}});
    let anti = json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "neighbour"}}, "topologyKey": "kubernetes.io/hostname"}]}}}});
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut all = Vec::new();
    for i in 0..3 {
        all.push(pod(
            &format!("dup-{i}"),
            "sim-node-0",
            "dup",
            "x",
            json!({}),
        ));
        // Distinct images: not duplicates of each other, only a spread to balance.
        all.push(pod(
            &format!("spread-{i}"),
            "sim-node-1",
            "spread",
            &format!("s{i}"),
            spread.clone(),
        ));
    }
    all.push(pod("anti", "sim-node-2", "anti", "x", anti));
    all.push(pod(
        "neighbour",
        "sim-node-2",
        "neighbour",
        "x",
        json!({"metadata": {"labels": {"app": "neighbour"}}}),
    ));
    for p in all {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
}

async fn names(c: &kube::Client) -> Vec<String> {
    let mut v: Vec<String> = Api::<Pod>::namespaced(c.clone(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_and_the_live_role_evicts_what_upstream_plugins_choose() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_server(3).await;
    let c = api.client.clone();
    setup(&c).await;
    let dcfg = dir.path().join("d.yaml");
    std::fs::write(&dcfg, CONFIG).unwrap();

    let mut items = listed::<Node>(&c).await;
    items.extend(listed::<Pod>(&c).await);
    let explained = explain(dir.path(), items, &dcfg);
    let mut chosen: Vec<(String, String)> = explained["evictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["pod"].as_str().unwrap().to_string(),
                e["plugin"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    chosen.sort();
    let want = [
        ("default/anti", "RemovePodsViolatingInterPodAntiAffinity"),
        ("default/dup-1", "RemoveDuplicates"),
        ("default/dup-2", "RemoveDuplicates"),
    ];
    for (p, plugin) in want {
        assert!(
            chosen.contains(&(p.to_string(), plugin.to_string())),
            "{explained:#}"
        );
    }
    let spread: Vec<&String> = chosen
        .iter()
        .filter(|(_, pl)| pl == "RemovePodsViolatingTopologySpreadConstraint")
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        spread.len(),
        2,
        "skew 3 over maxSkew 1 moves two: {explained:#}"
    );
    assert_eq!(chosen.len(), 5, "{explained:#}");
    assert_eq!(
        explained["unsupported"][0]["plugin"], "NopePlugin",
        "{explained:#}"
    );

    let koord = start(dir.path(), port, "descheduler", &dcfg, None, "d1");
    let evicted: Vec<String> = chosen
        .iter()
        .map(|(p, _)| p.trim_start_matches("default/").to_string())
        .collect();
    let gone = eventually(Duration::from_secs(30), || async {
        let left = names(&c).await;
        evicted.iter().all(|p| !left.contains(p))
    })
    .await;
    let left = names(&c).await;
    assert!(
        gone,
        "live pass did not evict {evicted:?}; left {left:?}\n{}",
        koord.logs()
    );
    assert_eq!(
        left.len(),
        8 - 5,
        "only the chosen pods were evicted: {left:?}"
    );
    assert!(
        koord.logs().contains("NopePlugin"),
        "the unknown plugin is warned about\n{}",
        koord.logs()
    );
    drop(koord);
    api.stop().await;
}

const KOORD_PLUGINS: &str = r#"apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koordinator
  plugins:
    balance: {enabled: [{name: CustomPriority}, {name: ScaleDownBinPack}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
  pluginConfig:
  - name: CustomPriority
    args:
      mode: DrainNode
      autoCordon: true
      evictionOrder:
      - {name: gold, nodeSelector: {matchLabels: {tier: gold}}}
      - {name: silver, nodeSelector: {matchLabels: {tier: silver}}}
  - name: ScaleDownBinPack
    args: {podSelectors: [{name: binpack, selector: {matchLabels: {app: binpack}}}]}
"#;

/// Koordinator's own plugins' changes besides evictions: CustomPriority drains and cordons
/// the expensive node, ScaleDownBinPack writes a pod-deletion-cost — named by explain,
/// applied by the live role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn koordinator_plugins_cordon_and_annotate_live_as_explain_says() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_server(3).await;
    let c = api.client.clone();
    let nodes: Api<Node> = Api::all(c.clone());
    for (n, tier) in [("sim-node-0", "gold"), ("sim-node-1", "silver")] {
        let labels = json!({"metadata": {"labels": {"tier": tier}}});
        nodes
            .patch(n, &PatchParams::default(), &Patch::Merge(labels))
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let binpack = json!({"metadata": {"labels": {"app": "binpack"}}});
    for p in [
        pod("gold-pod", "sim-node-0", "g", "x", json!({})),
        pod("packed", "sim-node-2", "b", "x", binpack),
    ] {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let dcfg = dir.path().join("d.yaml");
    std::fs::write(&dcfg, KOORD_PLUGINS).unwrap();
    let mut items = listed::<Node>(&c).await;
    items.extend(listed::<Pod>(&c).await);
    let explained = explain(dir.path(), items, &dcfg);
    assert_eq!(
        explained["evictions"][0]["pod"], "default/gold-pod",
        "{explained:#}"
    );
    let actions = explained["actions"].as_array().expect("actions");
    assert!(
        actions
            .iter()
            .any(|a| a["action"] == "cordon" && a["node"] == "sim-node-0"),
        "{explained:#}"
    );
    assert!(
        actions.iter().any(|a| a["action"] == "annotate"
            && a["pod"] == "default/packed"
            && a["annotation"] == "controller.kubernetes.io/pod-deletion-cost"
            && a["value"] == "0"),
        "{explained:#}"
    );

    let koord = start(dir.path(), port, "descheduler", &dcfg, None, "d1");
    let done = eventually(Duration::from_secs(30), || async {
        let cordoned = nodes
            .get("sim-node-0")
            .await
            .unwrap()
            .spec
            .and_then(|s| s.unschedulable)
            == Some(true);
        let cost = pods
            .get("packed")
            .await
            .unwrap()
            .metadata
            .annotations
            .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost").cloned());
        let gone = pods.get_opt("gold-pod").await.unwrap().is_none();
        cordoned && gone && cost.as_deref() == Some("0")
    })
    .await;
    assert!(
        done,
        "live pass did not apply what explain planned\n{}",
        koord.logs()
    );
    drop(koord);
    api.stop().await;
}
