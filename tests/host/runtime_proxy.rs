//! `koord --role=runtime-proxy` in front of a real containerd + runc, with a hook server
//! of the test's own registered in hookserver.d: the hook's cgroup values and env are in
//! place at the container's first instruction; a hook server that is down is passed over
//! (`Ignore`) or fails the call (`Fail`); and after a proxy restart the stop hooks still
//! get their pod's context from the checkpoint.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::containerd::{Containerd, IMAGE};
use common::{Koord, free_port, http_get, wait_until};
use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use koord::runtime_proxy::proto;
use koord::runtime_proxy::proto::runtime_hook_service_server::{
    RuntimeHookService, RuntimeHookServiceServer,
};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// A hook server that gives every container BE-like values and records what it saw.
#[derive(Clone, Default)]
pub(crate) struct TestHooks {
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
}

impl TestHooks {
    fn record(&self, hook: &str, pod: Option<&proto::PodSandboxMetadata>) {
        let name = pod.map(|p| p.name.clone()).unwrap_or_default();
        self.calls.lock().unwrap().push(format!("{hook}:{name}"));
    }
}

type R<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl RuntimeHookService for TestHooks {
    async fn pre_run_pod_sandbox_hook(
        &self,
        r: Request<proto::PodSandboxHookRequest>,
    ) -> R<proto::PodSandboxHookResponse> {
        self.record("PreRunPodSandbox", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(proto::PodSandboxHookResponse {
            annotations: [("hooked".to_string(), "yes".to_string())].into(),
            ..Default::default()
        }))
    }
    async fn post_stop_pod_sandbox_hook(
        &self,
        r: Request<proto::PodSandboxHookRequest>,
    ) -> R<proto::PodSandboxHookResponse> {
        self.record("PostStopPodSandbox", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(Default::default()))
    }
    async fn pre_create_container_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        let req = r.into_inner();
        self.record("PreCreateContainer", req.pod_meta.as_ref());
        let mut envs = req.container_envs.clone();
        envs.insert("HOOKED".into(), "yes".into());
        let devices = spare_device()
            .map(|p| proto::LinuxDevice {
                path: p.into(),
                r#type: "c".into(),
                ..Default::default()
            })
            .into_iter()
            .collect();
        let mut res = req.container_resources.unwrap_or_default();
        res.cpu_shares = 2;
        res.cpu_period = 100_000;
        res.cpu_quota = 50_000;
        res.cpuset_cpus = "0".into();
        res.memory_limit_in_bytes = 64 << 20;
        Ok(Response::new(proto::ContainerResourceHookResponse {
            container_resources: Some(res),
            container_envs: envs,
            container_devices: devices,
            ..Default::default()
        }))
    }
    async fn pre_start_container_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        self.record("PreStartContainer", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(Default::default()))
    }
    async fn post_start_container_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        self.record("PostStartContainer", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(Default::default()))
    }
    async fn post_stop_container_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        self.record("PostStopContainer", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(Default::default()))
    }
    async fn pre_update_container_resources_hook(
        &self,
        r: Request<proto::ContainerResourceHookRequest>,
    ) -> R<proto::ContainerResourceHookResponse> {
        self.record("PreUpdateContainerResources", r.get_ref().pod_meta.as_ref());
        Ok(Response::new(Default::default()))
    }
}

pub(crate) fn serve_hooks(socket: &Path, hooks: TestHooks) -> tokio::task::JoinHandle<()> {
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    tokio::spawn(async move {
        let incoming = async_stream::stream! {
            loop {
                if let Ok((s, _)) = listener.accept().await {
                    yield Ok::<_, std::io::Error>(s);
                }
            }
        };
        let _ = tonic::transport::Server::builder()
            .add_service(RuntimeHookServiceServer::new(hooks))
            .serve_with_incoming(incoming)
            .await;
    })
}

pub(crate) fn register(dir: &Path, socket: &Path, policy: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let file = serde_json::json!({
        "remote-endpoint": format!("unix://{}", socket.display()),
        "failure-policy": policy,
        "runtime-hooks": ["PreRunPodSandbox", "PostStopPodSandbox", "PreCreateContainer",
                          "PreStartContainer", "PostStartContainer", "PostStopContainer"],
    });
    std::fs::write(dir.join("test.json"), file.to_string()).unwrap();
}

pub(crate) fn start_proxy(dir: &Path, backend: &Path, hook_dir: &Path) -> (Koord, PathBuf) {
    let socket = dir.join("proxy.sock");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // Under umask 000: the sockets and files koord makes must not depend on it.
    let limits = common::ChildLimits {
        umask: Some(0),
        ..Default::default()
    };
    let koord = Koord::start_limited(
        &[
            "--role=runtime-proxy",
            "--admin-addr",
            &admin.to_string(),
            "--data-dir",
            dir.to_str().unwrap(),
            "--koord-runtimeproxy-endpoint",
            socket.to_str().unwrap(),
            "--remote-runtime-service-endpoint",
            backend.to_str().unwrap(),
        ],
        &[(
            "KOORD_RUNTIME_PROXY__HOOK_SERVER_DIR",
            hook_dir.to_str().unwrap(),
        )],
        dir,
        limits,
    );
    let ready = wait_until(Duration::from_secs(20), || {
        http_get(admin, "/readyz").is_some_and(|(s, _)| s == 200)
    });
    assert!(ready, "proxy not ready:\n{}", koord.logs());
    let serving = wait_until(Duration::from_secs(20), || socket.exists());
    assert!(serving, "proxy not serving:\n{}", koord.logs());
    let mode = std::os::unix::fs::MetadataExt::mode(&std::fs::metadata(&socket).unwrap());
    assert_eq!(
        mode & 0o777,
        0o600,
        "only root drives the runtime through the proxy"
    );
    (koord, socket)
}

pub(crate) fn sandbox_config(
    c: &Containerd,
    name: &str,
    uid: &str,
    logs: &Path,
) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: logs.display().to_string(),
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
    }
}

/// A host character device that runc does not give containers by default, for the hook's
/// `container_devices` (koord's RDMADeviceInject path) to add.
fn spare_device() -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    ["/dev/loop-control", "/dev/cpu_dma_latency", "/dev/kmsg"]
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device()))
}

/// What the container prints at its first instruction: its cpu.shares, cpuset, $HOOKED and
/// whether the hook's device is there.
fn probe() -> String {
    let dev = spare_device().unwrap_or("/dev/none");
    format!(
        "cat /sys/fs/cgroup/cpu,cpuacct/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu.weight; \
         cat /sys/fs/cgroup/cpuset/cpuset.cpus 2>/dev/null || cat /sys/fs/cgroup/cpuset.cpus; echo env=$HOOKED; \
         test -c {dev} && echo dev=yes || echo dev=no; sleep 3600"
    )
}

async fn create(
    rt: &mut RuntimeServiceClient<Channel>,
    sandbox: &str,
    config: &cri::PodSandboxConfig,
    attempt: u32,
) -> Result<String, Status> {
    rt.create_container(cri::CreateContainerRequest {
        pod_sandbox_id: sandbox.into(),
        config: Some(cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: "work".into(),
                attempt,
            }),
            image: Some(cri::ImageSpec {
                image: IMAGE.into(),
                ..Default::default()
            }),
            command: vec!["/bin/sh".into(), "-c".into(), probe()],
            log_path: "work.log".into(),
            ..Default::default()
        }),
        sandbox_config: Some(config.clone()),
    })
    .await
    .map(|r| r.into_inner().container_id)
}

/// The container's log lines (CRI format: `<time> <stream> <tag> <line>`).
pub(crate) fn log_lines(logs: &Path) -> Vec<String> {
    std::fs::read_to_string(logs.join("work.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.splitn(4, ' ').nth(3).map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_get_hook_values_before_they_run_and_policies_hold() {
    let _cpu = common::cpu_exclusive();
    let Some(ctrd) = Containerd::start("proxy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hook_dir = dir.path().join("hookserver.d");
    let hook_socket = dir.path().join("hooks.sock");
    let hooks = TestHooks::default();
    let server = serve_hooks(&hook_socket, hooks.clone());
    register(&hook_dir, &hook_socket, "Fail");
    let (mut proxy, socket) = start_proxy(dir.path(), &ctrd.socket, &hook_dir);
    let mut rt = RuntimeServiceClient::new(koord::kernel::cri::unix_channel(socket.clone()));

    // Through the proxy: the hook's values are there when the container's command starts.
    let logs = dir.path().join("logs-a");
    std::fs::create_dir_all(&logs).unwrap();
    let cfg = sandbox_config(&ctrd, "pod-a", "uid-a", &logs);
    let sandbox = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(cfg.clone()),
            runtime_handler: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}\n{}", proxy.logs(), ctrd.log()))
        .into_inner()
        .pod_sandbox_id;
    let ctr = create(&mut rt, &sandbox, &cfg, 0)
        .await
        .unwrap_or_else(|e| panic!("CreateContainer: {e}\n{}", proxy.logs()));
    rt.start_container(cri::StartContainerRequest {
        container_id: ctr.clone(),
    })
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || log_lines(&logs).len() >= 4),
        "{:?}",
        log_lines(&logs)
    );
    let seen = log_lines(&logs);
    assert_eq!(
        seen[0], "2",
        "cpu.shares from the hook, at the first instruction"
    );
    assert_eq!(seen[1], "0", "cpuset from the hook");
    assert_eq!(seen[2], "env=yes", "env from the hook");
    match spare_device() {
        Some(d) => assert_eq!(seen[3], "dev=yes", "{d} from the hook's container_devices"),
        None => eprintln!("skipping the device check: no spare character device on this host"),
    }
    let status = rt
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox.clone(),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status
            .status
            .unwrap()
            .annotations
            .get("hooked")
            .map(String::as_str),
        Some("yes")
    );

    // A proxy restart: the stop hooks still know the pod, from the checkpoint.
    drop(proxy);
    let (p2, socket) = start_proxy(dir.path(), &ctrd.socket, &hook_dir);
    proxy = p2;
    let mut rt = RuntimeServiceClient::new(koord::kernel::cri::unix_channel(socket));
    rt.stop_container(cri::StopContainerRequest {
        container_id: ctr.clone(),
        timeout: 0,
    })
    .await
    .unwrap();
    assert!(
        hooks
            .calls
            .lock()
            .unwrap()
            .contains(&"PostStopContainer:pod-a".to_string()),
        "{:?}",
        hooks.calls.lock().unwrap()
    );

    // Hook server down (nothing listens on its socket): Fail refuses the call with the
    // hook's error, Ignore passes it on. Registrations are re-read when their file changes
    // (checked every few seconds).
    server.abort();
    let down = dir.path().join("down.sock");
    register(&hook_dir, &down, "Fail");
    let mut attempt = 1;
    let refused = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            attempt += 1;
            match create(&mut rt, &sandbox, &cfg, attempt).await {
                Err(e) if e.message().contains("hook server err") => return e,
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    })
    .await
    .expect("Fail refuses the call");
    assert!(refused.message().contains("hook server err"), "{refused:?}");
    register(&hook_dir, &down, "Ignore");
    let passed = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            attempt += 1;
            match create(&mut rt, &sandbox, &cfg, attempt).await {
                Ok(id) => return id,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    })
    .await
    .expect("Ignore lets the call through");
    assert!(!passed.is_empty());
    let _ = rt
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: sandbox.clone(),
        })
        .await;
    let _ = rt
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: sandbox,
        })
        .await;
    drop(proxy);
}

/// Runs `probe` as container "work" in a new sandbox through `rt`; the sandbox id.
pub(crate) async fn run_probe(
    rt: &mut RuntimeServiceClient<Channel>,
    cfg: &cri::PodSandboxConfig,
    probe: &str,
) -> Result<String, Status> {
    let sandbox = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(cfg.clone()),
            runtime_handler: String::new(),
        })
        .await?
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
                command: vec!["/bin/sh".into(), "-c".into(), probe.into()],
                log_path: "work.log".into(),
                ..Default::default()
            }),
            sandbox_config: Some(cfg.clone()),
        })
        .await?
        .into_inner()
        .container_id;
    rt.start_container(cri::StartContainerRequest { container_id: ctr })
        .await?;
    Ok(sandbox)
}

/// Stops and removes a sandbox (best effort).
pub(crate) async fn remove_sandbox(rt: &mut RuntimeServiceClient<Channel>, id: &str) {
    let _ = rt
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: id.into(),
        })
        .await;
    let _ = rt
        .remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: id.into(),
        })
        .await;
}
