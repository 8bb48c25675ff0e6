//! Eviction through a real CRI runtime (`pkg/koordlet/qosmanager/plugins/util/evictor.go`): a private containerd + runc
//! runs a BE pod; with node memory over the NodeSLO threshold the koordlet stops the pod's
//! container through the CRI socket it discovers (StopContainer, timeout 0) and records a
//! Warning event, without deleting the pod object. With `onlyEvictByAPI` the same pick goes
//! through the Eviction API and the container keeps running. Needs root and the packages
//! of `scripts/deps.sh`; skips with the reason otherwise.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::TestApi;
use common::containerd::{Containerd, IMAGE};
use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use koord::kernel::cri::{ContainerState, CriClient};
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::qos::evictor::Evictor;
use koord::koordlet::qos::evictor::Runtimes;
use koord::koordlet::qos::memoryevict::memory_pass;
use koord::os::{Cgroups, Driver, Version};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use tonic::transport::Channel;

const GIB: i64 = 1 << 30;

async fn runtime(c: &Containerd) -> RuntimeServiceClient<Channel> {
    let path = c.socket.clone();
    let ch = tonic::transport::Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .unwrap();
    RuntimeServiceClient::new(ch)
}

/// A host-network sandbox under the test's cgroup parent with one sleeping container;
/// returns (sandbox id, container id).
async fn run_pod(
    rt: &mut RuntimeServiceClient<Channel>,
    c: &Containerd,
    name: &str,
    uid: &str,
) -> (String, String) {
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("{}/besteffort/pod{uid}", c.cgroup_parent),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: cri::NamespaceMode::Node as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sandbox = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", c.log()))
        .into_inner()
        .pod_sandbox_id;
    let ctr = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: "work".into(),
                    attempt: 0,
                }),
                image: Some(cri::ImageSpec {
                    image: IMAGE.into(),
                    ..Default::default()
                }),
                command: vec!["/bin/sleep".into(), "3600".into()],
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_config),
        })
        .await
        .unwrap_or_else(|e| panic!("CreateContainer: {e}\n{}", c.log()))
        .into_inner()
        .container_id;
    rt.start_container(cri::StartContainerRequest {
        container_id: ctr.clone(),
    })
    .await
    .unwrap();
    (sandbox, ctr)
}

async fn remove_pod(rt: &mut RuntimeServiceClient<Channel>, sandbox: &str) {
    let id = sandbox.to_string();
    let _ = rt
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: id.clone(),
        })
        .await;
    let _ = rt
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id })
        .await;
}

/// The BE pod as the API server has it, with the running container in its status.
fn be_pod(api_pod: &Pod, container: &str) -> Pod {
    let mut p = api_pod.clone();
    p.status = Some(
        serde_json::from_value(json!({"phase": "Running", "qosClass": "BestEffort", "containerStatuses": [{
            "name": "work", "containerID": format!("containerd://{container}"), "state": {"running": {}},
            "image": IMAGE, "imageID": "", "ready": true, "restartCount": 0}]}))
        .unwrap(),
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_eviction_stops_the_be_containers_through_cri() {
    let _cpu = common::cpu_exclusive();
    let Some(ctrd) = Containerd::start("cri-evict") else {
        return;
    };
    let mut rt = runtime(&ctrd).await;
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1"}, "status": {"capacity": {"memory": "10Gi"}}}),
    )
    .unwrap();
    Api::<Node>::all(c.clone())
        .create(&pp, &node)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut created = Vec::new();
    for name in ["be-cri", "be-api"] {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"koordinator.sh/qosClass": "BE"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "work", "image": IMAGE}]}})).unwrap();
        let p = pods.create(&pp, &p).await.unwrap();
        let uid = p.metadata.uid.clone().unwrap();
        let (sandbox, ctr) = run_pod(&mut rt, &ctrd, name, &uid).await;
        created.push((be_pod(&p, &ctr), sandbox, ctr));
    }
    let state = CriClient::new(&ctrd.endpoint()).unwrap();
    for (_, _, ctr) in &created {
        assert_eq!(
            state.container_state(ctr).await.unwrap(),
            ContainerState::Running
        );
    }

    // The runtime path: the socket is discovered as <varRun>/containerd.sock.
    let tmp = tempfile::tempdir().unwrap();
    let cg = Cgroups::new(tmp.path(), Version::V1, Driver::Cgroupfs, "");
    let meta = PodMeta::new(created[0].0.clone(), &cg).unwrap();
    let slo = json!({"metadata": {"name": "n1"}, "spec": {"resourceUsedThresholdWithBE": {"enable": true, "memoryEvictThresholdPercent": 70}}});
    let states = States {
        node: Some(Arc::new(node.clone())),
        pods: Arc::new(vec![meta.clone()]),
        node_slo: Some(Arc::new(serde_json::from_value(slo).unwrap())),
        node_metric: None,
        slo_view: Default::default(),
    };
    let evictor = Evictor::new(
        false,
        Runtimes {
            endpoint: None,
            var_run: ctrd.dir().to_path_buf(),
        },
    );
    let used = HashMap::from([(meta.uid.clone(), 2 * GIB)]);
    let evicted = memory_pass(&c, &evictor, &states, Some(8 * GIB), &used).await;
    assert_eq!(evicted, ["default/be-cri"]);
    let stopped = common::wait_until(Duration::from_secs(10), || {
        futures::executor::block_on(state.container_state(&created[0].2))
            .is_ok_and(|s| s == ContainerState::Exited)
    });
    assert!(stopped, "the container was stopped through CRI");
    let obj = pods.get("be-cri").await.unwrap();
    assert!(
        obj.metadata.deletion_timestamp.is_none(),
        "the runtime path does not delete the pod object"
    );
    let events = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let e = events
        .items
        .iter()
        .find(|e| e.involved_object.name.as_deref() == Some("be-cri"))
        .expect("a Warning event on the evicted pod");
    assert_eq!(e.reason.as_deref(), Some("evictPodSuccess"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));

    // --only-evict-by-api: the Eviction API, the container is left to the kubelet.
    let by_api = Evictor::new(
        true,
        Runtimes {
            endpoint: Some(ctrd.endpoint()),
            var_run: ctrd.dir().to_path_buf(),
        },
    );
    assert!(
        by_api
            .evict(&c, &created[1].0, "n1", "Test", "only by API")
            .await
    );
    let gone = pods
        .get_opt("be-api")
        .await
        .unwrap()
        .is_none_or(|p| p.metadata.deletion_timestamp.is_some());
    assert!(gone, "evicted through the API");
    assert_eq!(
        state.container_state(&created[1].2).await.unwrap(),
        ContainerState::Running
    );

    for (_, sandbox, _) in &created {
        remove_pod(&mut rt, sandbox).await;
    }
    api.stop().await;
    drop(ctrd);
}
