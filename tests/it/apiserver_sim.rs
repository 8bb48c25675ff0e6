//! `--sim-nodes`: fake Nodes whose pods the simulator runs and finishes deleting.

use crate::common;

use std::time::Duration;

use common::{TestApi, api_code, eventually};
use k8s_openapi::api::core::v1::{Node, Pod};
use koord::apiserver::Options;
use koord::apiserver::sim::SimNodes;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn simulated_nodes_run_and_delete_pods() {
    let mut opts = Options::for_tests();
    opts.sim = Some(SimNodes {
        count: 3,
        cpu: "16".into(),
        memory: "64Gi".into(),
        pods: 110,
    });
    let api = TestApi::start_with(opts).await;
    let nodes: Api<Node> = Api::all(api.client.clone());
    let list = nodes
        .list(&ListParams::default().labels("sim.koord.io/simulated=true"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    let alloc = list.items[0]
        .status
        .as_ref()
        .unwrap()
        .allocatable
        .as_ref()
        .unwrap();
    assert_eq!(alloc["cpu"].0, "16");

    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
        "terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "sim-node-1"}});
    pods.create_subresource::<Value, Value>("binding", "p", &PostParams::default(), &binding)
        .await
        .unwrap();
    let running = eventually(Duration::from_secs(10), || {
        let pods = pods.clone();
        async move {
            let s = pods.get("p").await.unwrap().status.unwrap_or_default();
            s.phase.as_deref() == Some("Running") && s.pod_ip.is_some()
        }
    })
    .await;
    assert!(running, "simulator did not run the pod");
    let status = pods.get("p").await.unwrap().status.unwrap();
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(status.host_ip.as_deref(), Some("10.255.0.2"));

    pods.delete("p", &DeleteParams::default()).await.unwrap();
    let gone = eventually(Duration::from_secs(10), || {
        let pods = pods.clone();
        async move { pods.get("p").await.is_err() }
    })
    .await;
    assert!(gone, "graceful deletion was not finished by the simulator");
    assert_eq!(api_code(pods.get("p").await), 404);
}
