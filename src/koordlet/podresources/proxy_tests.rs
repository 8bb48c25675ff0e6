//! Koordinator's `TestFillPodDevicesAllocatedByKoord` cases, with their names, and the
//! proxy between a client and a stand-in kubelet over unix sockets.

use super::fill::fill_pod_devices_allocated_by_koord;
use super::*;
use crate::koordlet::informer::{PodMeta, States};

const ALLOCATED: &str = r#"{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"23040Mi","koordinator.sh/gpu-memory-ratio":"100"},"id":"0"}],"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:01:00.0","extension":{"vfs":[{"minor":-1,"busID":"0000:01:00.2"}]}}]}"#;

fn pod(name: &str, annotation: Option<&str>) -> k8s_openapi::api::core::v1::Pod {
    let mut p =
        serde_json::json!({"metadata": {"name": name, "namespace": "test-namespace", "uid": name}});
    if let Some(a) = annotation {
        p["metadata"]["annotations"] =
            serde_json::json!({"scheduling.koordinator.sh/device-allocated": a});
    }
    serde_json::from_value(p).unwrap()
}

fn answer(names: &[&str]) -> pb::ListPodResourcesResponse {
    pb::ListPodResourcesResponse {
        pod_resources: names
            .iter()
            .map(|n| pb::PodResources {
                name: n.to_string(),
                namespace: "test-namespace".into(),
                containers: vec![pb::ContainerResources {
                    name: "test-container".into(),
                    ..Default::default()
                }],
            })
            .collect(),
    }
}

fn devices(a: &pb::ListPodResourcesResponse, i: usize) -> Vec<(String, Vec<String>)> {
    a.pod_resources[i].containers[0]
        .devices
        .iter()
        .map(|d| (d.resource_name.clone(), d.device_ids.clone()))
        .collect()
}

fn gpu_and_vf() -> Vec<(String, Vec<String>)> {
    vec![
        ("koordinator.sh/rdma".into(), vec!["0000:01:00.2".into()]),
        ("nvidia.com/gpu".into(), vec!["0".into()]),
    ]
}

#[test]
fn fill_pod_devices_allocated_by_koord_cases() {
    // MatchingPodWithDeviceAllocationsWithVf
    let mut a = answer(&["test-pod"]);
    let pods = [pod("test-pod", Some(ALLOCATED))];
    fill_pod_devices_allocated_by_koord(&mut a, pods.iter());
    assert_eq!(devices(&a, 0), gpu_and_vf());
    // MatchingPodWithDeviceAllocationsWithVfAndMMultiplePod
    let mut a = answer(&["test-pod-1", "test-pod"]);
    let pods = [pod("test-pod-1", None), pod("test-pod", Some(ALLOCATED))];
    fill_pod_devices_allocated_by_koord(&mut a, pods.iter());
    assert!(devices(&a, 0).is_empty());
    assert_eq!(devices(&a, 1), gpu_and_vf());
    // MatchingPodWithDeviceAllocations
    let mut a = answer(&["test-pod"]);
    let pods = [pod("test-pod", Some(r#"{"gpu":[{"id":"0"}]}"#))];
    fill_pod_devices_allocated_by_koord(&mut a, pods.iter());
    assert_eq!(
        devices(&a, 0),
        vec![("nvidia.com/gpu".to_string(), vec!["0".to_string()])]
    );
}

/// The kubelet's side: one pod, no devices.
struct Kubelet;

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<pb::ListPodResourcesRequest>,
    ) -> Result<Response<pb::ListPodResourcesResponse>, Status> {
        Ok(Response::new(answer(&["test-pod"])))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<pb::AllocatableResourcesRequest>,
    ) -> Result<Response<pb::AllocatableResourcesResponse>, Status> {
        Ok(Response::new(pb::AllocatableResourcesResponse {
            cpu_ids: vec![0, 1],
            ..Default::default()
        }))
    }

    async fn get(
        &self,
        _: Request<pb::GetPodResourcesRequest>,
    ) -> Result<Response<pb::GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("Get is off in this kubelet"))
    }
}

#[tokio::test]
async fn the_proxy_forwards_and_adds_koords_devices() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = Shutdown::new();
    let kubelet_dir = dir.path().join("kubelet");
    std::fs::create_dir_all(&kubelet_dir).unwrap();
    let kubelet_sock = kubelet_dir.join("kubelet.sock");
    let listener = crate::kernel::listen::bind_unix(&kubelet_sock, 0o600).unwrap();
    let incoming = crate::kernel::listen::Acceptor::new(listener, 4, "kubelet").into_stream();
    let sd = shutdown.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(PodResourcesListerServer::new(Kubelet))
            .serve_with_incoming_shutdown(incoming, async move { sd.draining().await })
            .await
    });
    let cgroups = crate::os::Cgroups::new(
        "/sys/fs/cgroup",
        crate::os::Version::V1,
        crate::os::Driver::Cgroupfs,
        "",
    );
    let states = States {
        pods: std::sync::Arc::new(vec![
            PodMeta::new(pod("test-pod", Some(ALLOCATED)), &cgroups).unwrap(),
        ]),
        ..States::default()
    };
    let proxy = Proxy::new(kubelet_sock, Informer::fixed(states));
    let proxy_dir = dir.path().join("proxy");
    let server = tokio::spawn({
        let (d, sd) = (proxy_dir.clone(), shutdown.clone());
        async move { serve(&d, proxy, sd).await }
    });
    let sock = proxy_dir.join("kubelet.sock");
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut client = PodResourcesListerClient::new(crate::kernel::cri::unix_channel(sock.clone()));
    let listed = client
        .list(pb::ListPodResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(devices(&listed, 0), gpu_and_vf());
    let alloc = client
        .get_allocatable_resources(pb::AllocatableResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        alloc.cpu_ids,
        vec![0, 1],
        "forwarded as the kubelet answered"
    );
    let err = client
        .get(pb::GetPodResourcesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::Unimplemented,
        "the kubelet's error, passed on"
    );
    shutdown.begin_drain();
    server.await.unwrap().unwrap();
    assert!(!sock.exists(), "the socket is removed at the end");
}
