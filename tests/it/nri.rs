//! The koordlet as an NRI plugin against a stand-in runtime: the runtime's half of NRI's
//! protocol written here from the wire format (multiplexer frames of `[conn id, length]`,
//! ttrpc messages of `[length, stream id, type, flags]`, protobuf bodies), not with the
//! koordlet's own framing code, so a mistake on one side cannot hide in the other.

use std::sync::Arc;
use std::time::Duration;

use koord::koordlet::informer::{Informer, States};
use koord::koordlet::runtimehooks::nri::{self, api, plugin::Plugin};
use koord::koordlet::runtimehooks::{rules::Rules, server::Hooks};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// ttrpc's `Request` and `Response`, as the runtime side reads and writes them.
#[derive(Clone, PartialEq, prost::Message)]
struct TtrpcRequest {
    #[prost(string, tag = "1")]
    service: String,
    #[prost(string, tag = "2")]
    method: String,
    #[prost(bytes = "vec", tag = "3")]
    payload: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TtrpcResponse {
    #[prost(message, optional, tag = "1")]
    status: Option<RpcStatus>,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
}

struct Runtime {
    conn: UnixStream,
    next_stream: u32,
}

impl Runtime {
    async fn send(&mut self, conn: u32, stream: u32, kind: u8, body: &[u8]) {
        let mut msg = Vec::new();
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
        msg.extend_from_slice(&stream.to_be_bytes());
        msg.extend_from_slice(&[kind, 0]);
        msg.extend_from_slice(body);
        let mut frame = Vec::new();
        frame.extend_from_slice(&conn.to_be_bytes());
        frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        frame.extend_from_slice(&msg);
        self.conn.write_all(&frame).await.unwrap();
    }

    /// One whole message (the plugin sends each in one frame).
    async fn recv(&mut self) -> (u32, u32, u8, Vec<u8>) {
        let mut hdr = [0u8; 8];
        self.conn.read_exact(&mut hdr).await.unwrap();
        let conn = u32::from_be_bytes(hdr[..4].try_into().unwrap());
        let len = u32::from_be_bytes(hdr[4..].try_into().unwrap()) as usize;
        let mut msg = vec![0u8; len];
        self.conn.read_exact(&mut msg).await.unwrap();
        let body_len = u32::from_be_bytes(msg[..4].try_into().unwrap()) as usize;
        assert_eq!(body_len + 10, len, "one ttrpc message per frame");
        let stream = u32::from_be_bytes(msg[4..8].try_into().unwrap());
        (conn, stream, msg[8], msg[10..].to_vec())
    }

    /// Calls the plugin's service (connection 1) and returns the answer's payload.
    async fn call(&mut self, method: &str, req: impl Message) -> Result<Vec<u8>, RpcStatus> {
        let stream = self.next_stream;
        self.next_stream += 2;
        let body = TtrpcRequest {
            service: "nri.pkg.api.v1alpha1.Plugin".into(),
            method: method.into(),
            payload: req.encode_to_vec(),
        };
        self.send(1, stream, 1, &body.encode_to_vec()).await;
        let (conn, got, kind, body) = self.recv().await;
        assert_eq!((conn, got, kind), (1, stream, 2), "the answer to {method}");
        let resp = TtrpcResponse::decode(&body[..]).unwrap();
        match resp.status {
            Some(s) if s.code != 0 => Err(s),
            _ => Ok(resp.payload),
        }
    }

    /// Waits for the plugin's RegisterPlugin on connection 2 and accepts it.
    async fn accept_registration(listener: &UnixListener) -> (Runtime, api::RegisterPluginRequest) {
        let (conn, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("the plugin dials the runtime")
            .unwrap();
        let mut rt = Runtime {
            conn,
            next_stream: 1,
        };
        let (conn, stream, kind, body) = rt.recv().await;
        assert_eq!(
            (conn, kind),
            (2, 1),
            "a request on the runtime's connection"
        );
        assert_eq!(stream % 2, 1, "client streams are odd");
        let req = TtrpcRequest::decode(&body[..]).unwrap();
        assert_eq!(
            (req.service.as_str(), req.method.as_str()),
            ("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin")
        );
        let reg = api::RegisterPluginRequest::decode(&req.payload[..]).unwrap();
        let ok = TtrpcResponse {
            status: None,
            payload: Vec::new(),
        };
        rt.send(2, stream, 2, &ok.encode_to_vec()).await;
        (rt, reg)
    }
}

fn be_pod() -> (api::PodSandbox, api::Container) {
    let batch = r#"{"containers":{"main":{"requests":{"kubernetes.io/batch-cpu":"500","kubernetes.io/batch-memory":"64Mi"},"limits":{"kubernetes.io/batch-cpu":"1000","kubernetes.io/batch-memory":"128Mi"}}}}"#;
    let pod = api::PodSandbox {
        id: "sandbox-1".into(),
        name: "be".into(),
        uid: "uid-be".into(),
        namespace: "default".into(),
        labels: [("koordinator.sh/qosClass".into(), "BE".into())].into(),
        annotations: [(
            "node.koordinator.sh/extended-resource-spec".into(),
            batch.into(),
        )]
        .into(),
        linux: Some(api::LinuxPodSandbox {
            cgroup_parent: "/kubepods/besteffort/poduid-be".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let container = api::Container {
        id: "ctr-1".into(),
        pod_sandbox_id: "sandbox-1".into(),
        name: "main".into(),
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu {
                    shares: Some(api::OptionalUInt64 { value: 2 }),
                    quota: Some(api::OptionalInt64 { value: -1 }),
                    period: Some(api::OptionalUInt64 { value: 100_000 }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    (pod, container)
}

fn start_plugin(
    socket: std::path::PathBuf,
    backoff_ms: u64,
) -> (koord::kernel::Shutdown, tokio::task::JoinHandle<()>) {
    let rules = Rules {
        batch_resource: true,
        ..Rules::OFF
    };
    let cgroups = koord::os::Cgroups::new(
        "/nonexistent",
        koord::os::Version::V1,
        koord::os::Driver::Cgroupfs,
        "",
    );
    // The informer knows no pod: everything comes from the runtime's request.
    let hooks = Hooks::new(
        Informer::fixed(States::default()),
        rules,
        cgroups,
        Vec::new(),
    );
    let cfg = nri::Config {
        socket_path: socket.clone(),
        connect_timeout_millis: 1_000,
        backoff: nri::Backoff {
            duration_millis: backoff_ms,
            ..Default::default()
        },
        ..Default::default()
    };
    let plugin = Plugin {
        hooks: Arc::new(hooks),
        fail: false,
    };
    let shutdown = koord::kernel::Shutdown::new();
    let task = tokio::spawn(nri::run(cfg, socket, plugin, shutdown.clone()));
    (shutdown, task)
}

#[tokio::test]
async fn the_koordlet_registers_over_nri_and_limits_a_be_container_through_its_adjustment() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (shutdown, task) = start_plugin(socket.clone(), 50);

    let (mut rt, reg) = Runtime::accept_registration(&listener).await;
    assert_eq!(
        (reg.plugin_name.as_str(), reg.plugin_idx.as_str()),
        ("koordlet_nri", "00")
    );
    let configure = api::ConfigureRequest {
        runtime_name: "stand-in".into(),
        runtime_version: "2.0".into(),
        ..Default::default()
    };
    let events =
        api::ConfigureResponse::decode(&rt.call("Configure", configure).await.unwrap()[..])
            .unwrap()
            .events;
    // Koordinator's subscription: RunPodSandbox, RemovePodSandbox, CreateContainer,
    // UpdateContainer (bit n-1 for event n).
    assert_eq!(events, 1 | 1 << 2 | 1 << 3 | 1 << 7);
    let sync = rt
        .call("Synchronize", api::SynchronizeRequest::default())
        .await
        .unwrap();
    assert!(
        api::SynchronizeResponse::decode(&sync[..])
            .unwrap()
            .update
            .is_empty()
    );

    let (pod, container) = be_pod();
    rt.call(
        "RunPodSandbox",
        api::RunPodSandboxRequest {
            pod: Some(pod.clone()),
        },
    )
    .await
    .unwrap();
    let created = rt
        .call(
            "CreateContainer",
            api::CreateContainerRequest {
                pod: Some(pod.clone()),
                container: Some(container.clone()),
            },
        )
        .await
        .unwrap();
    let adjust = api::CreateContainerResponse::decode(&created[..])
        .unwrap()
        .adjust
        .expect("an adjustment");
    let resources = adjust.linux.unwrap().resources.unwrap();
    let cpu = resources.cpu.unwrap();
    assert_eq!(cpu.quota.unwrap().value, 100_000, "batch-cpu limit 1000");
    assert_eq!(cpu.shares.unwrap().value, 512, "batch-cpu request 500");
    assert_eq!(resources.memory.unwrap().limit.unwrap().value, 128 << 20);

    let updated = rt
        .call(
            "UpdateContainer",
            api::UpdateContainerRequest {
                pod: Some(pod),
                container: Some(container),
                linux_resources: None,
            },
        )
        .await
        .unwrap();
    let update = api::UpdateContainerResponse::decode(&updated[..])
        .unwrap()
        .update;
    assert_eq!(update.len(), 1);
    assert_eq!(update[0].container_id, "ctr-1");
    let unknown = rt.call("NoSuchMethod", api::Empty {}).await.unwrap_err();
    assert_eq!(unknown.code, 12, "Unimplemented: {}", unknown.message);

    // The runtime goes away (a restart): the plugin dials again and registers anew.
    drop(rt);
    let (mut again, _) = Runtime::accept_registration(&listener).await;
    let cfg = api::ConfigureRequest::default();
    assert!(again.call("Configure", cfg).await.is_ok());

    shutdown.begin_drain();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the plugin stops when the koordlet drains")
        .unwrap();
}

#[tokio::test]
async fn a_runtime_that_never_configures_the_plugin_is_dropped_and_dialled_again() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (shutdown, task) = start_plugin(socket, 50);
    // Accept the registration but never send Configure: after the connect timeout (1 s
    // here, 6 s by default) the plugin gives the connection up and dials again.
    let (_silent, _) = Runtime::accept_registration(&listener).await;
    let (mut second, _) = tokio::time::timeout(
        Duration::from_secs(15),
        Runtime::accept_registration(&listener),
    )
    .await
    .expect("a second dial after the connect timeout");
    assert!(
        second
            .call("Configure", api::ConfigureRequest::default())
            .await
            .is_ok()
    );
    shutdown.begin_drain();
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}

#[tokio::test]
async fn a_plugin_configuration_naming_an_unknown_event_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (shutdown, task) = start_plugin(socket, 50);
    let (mut rt, _) = Runtime::accept_registration(&listener).await;
    let cfg = api::ConfigureRequest {
        config: "events: [CreateContainer, Bogus]".into(),
        ..Default::default()
    };
    let err = rt.call("Configure", cfg).await.unwrap_err();
    assert!(err.message.contains("\"bogus\""), "{}", err.message);
    shutdown.begin_drain();
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}

#[tokio::test]
async fn a_runtime_socket_that_appears_later_is_dialled() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let (shutdown, task) = start_plugin(socket.clone(), 50);
    // The runtime comes up (or enables NRI) after the koordlet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listener = UnixListener::bind(&socket).unwrap();
    let (mut rt, _) = tokio::time::timeout(
        Duration::from_secs(20),
        Runtime::accept_registration(&listener),
    )
    .await
    .expect("dialled once the socket exists");
    assert!(
        rt.call("Configure", api::ConfigureRequest::default())
            .await
            .is_ok()
    );
    shutdown.begin_drain();
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}
