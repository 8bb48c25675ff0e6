//! The embedded node runtime on real cgroups (root only; CI is root): pods run as host
//! processes in kubelet-style cgroups with the kubelet's limits, restart with backoff,
//! report OOM kills, terminate within their grace period, and are re-adopted after a
//! restart. Every test removes what it created.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{TestApi, is_root, marker};
use k8s_openapi::api::core::v1::Pod;
use koord::apiserver::Options;
use koord::apiserver::node::LocalNode;
use koord::noderuntime::{self, NodeRuntime};
use koord::os::{CgroupDir, Resource};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const NODE: &str = "rt-node";

pub(crate) struct Rt {
    pub(crate) api: TestApi,
    pub(crate) rt: Option<NodeRuntime>,
    pub(crate) cfg: noderuntime::Config,
    pub(crate) data: tempfile::TempDir,
    pub(crate) pods: Api<Pod>,
}

pub(crate) fn config(name: &str, keep: bool) -> noderuntime::Config {
    noderuntime::Config {
        cgroup_parent: format!("koord-test-{}-{name}", std::process::id()),
        pods_addr: "127.0.0.1:0".parse().unwrap(),
        restart_backoff_seconds: 1,
        max_restart_backoff_seconds: 4,
        keep_pods_on_exit: keep,
        exit_grace_seconds: 2,
        ..Default::default()
    }
}

async fn setup(name: &str, keep: bool) -> Option<Rt> {
    setup_with(config(name, keep)).await
}

/// A runtime with this configuration (the data dir is the test's own).
pub(crate) async fn setup_with(cfg: noderuntime::Config) -> Option<Rt> {
    if !is_root()
        || !std::path::Path::new("/sys/fs/cgroup/cpu").exists()
            && !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        eprintln!(
            "skipping: the node runtime test needs root and a cgroup hierarchy at /sys/fs/cgroup"
        );
        return None;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = Options::for_tests();
    opts.pod_logs = Some(data.path().join("noderuntime").join("logs"));
    opts.local_node = Some(LocalNode {
        name: NODE.into(),
        cpus: 2,
        memory_bytes: 4 << 30,
        kubelet_port: None,
    });
    let api = TestApi::start_with(opts).await;
    let auth = api.server().auth();
    let rt = NodeRuntime::start(
        cfg.clone(),
        api.client.clone(),
        NODE,
        data.path(),
        true,
        auth,
    )
    .await
    .expect("node runtime");
    let pods = Api::namespaced(api.client.clone(), "default");
    Some(Rt {
        api,
        rt: Some(rt),
        cfg,
        data,
        pods,
    })
}

impl Rt {
    fn rt(&self) -> &NodeRuntime {
        self.rt.as_ref().unwrap()
    }

    async fn restart(&mut self) {
        self.rt.take().unwrap().shutdown().await;
        let rt = NodeRuntime::start(
            self.cfg.clone(),
            self.api.client.clone(),
            NODE,
            self.data.path(),
            true,
            self.api.server().auth(),
        )
        .await
        .unwrap();
        self.rt = Some(rt);
    }

    pub(crate) async fn create(&self, pod: Value) -> Pod {
        self.pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
            .unwrap()
    }

    pub(crate) async fn wait(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Pod) -> bool,
    ) -> Pod {
        let deadline = Instant::now() + timeout;
        loop {
            let p = self.pods.get_opt(name).await.unwrap();
            if let Some(p) = &p
                && pred(p)
            {
                return p.clone();
            }
            assert!(
                Instant::now() < deadline,
                "pod {name}: timed out waiting for {what}; last: {:?}",
                p.map(|p| p.status)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn delete_and_wait_gone(&self, name: &str) -> Duration {
        let start = Instant::now();
        self.pods
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        let deadline = start + Duration::from_secs(40);
        while self.pods.get_opt(name).await.unwrap().is_some() {
            assert!(Instant::now() < deadline, "pod {name} was never removed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        start.elapsed()
    }

    /// Stops the runtime and removes the test's kubepods tree, asserting no pod is left.
    pub(crate) async fn finish(mut self) {
        if let Some(rt) = self.rt.take() {
            let cg = rt.cgroups().clone();
            rt.shutdown().await;
            let root = cg.kubepods();
            let qos = [root.join("besteffort"), root.join("burstable")];
            for d in qos.iter().chain(std::iter::once(&root)) {
                let leftovers: Vec<String> = cg
                    .children(d)
                    .into_iter()
                    .filter(|c| c.starts_with("pod"))
                    .collect();
                assert!(
                    leftovers.is_empty(),
                    "pod cgroups left under {}: {leftovers:?}",
                    d.as_str()
                );
            }
            let parent = root.parent().unwrap();
            assert!(
                !cg.exists(&parent),
                "the runtime removed its cgroup tree {}",
                parent.as_str()
            );
        }
        self.api.stop().await;
    }
}

pub(crate) fn status(p: &Pod) -> k8s_openapi::api::core::v1::PodStatus {
    p.status.clone().unwrap_or_default()
}

pub(crate) fn phase(p: &Pod) -> String {
    status(p).phase.unwrap_or_default()
}

fn container_id(p: &Pod) -> String {
    let s = status(p).container_statuses.unwrap_or_default();
    s.first()
        .and_then(|c| c.container_id.clone())
        .unwrap_or_default()
}

pub(crate) fn pod(name: &str, policy: &str, script: &str, resources: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeName": NODE, "restartPolicy": policy, "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", format!("{script} # {}", marker())],
                        "resources": resources}]}})
}

/// Gone or a zombie waiting for init to reap it.
fn dead(pid: i32) -> bool {
    !koord::os::process::alive(std::path::Path::new("/proc"), pid, None)
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_runs_in_kubelet_cgroups_with_limits() {
    let _cpu = common::cpu_exclusive();
    let Some(rt) = setup("limits", false).await else {
        return;
    };
    let resources = json!({"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}});
    let created = rt
        .create(pod(
            "loop",
            "Always",
            "while true; do sleep 1; done",
            resources,
        ))
        .await;
    let uid = created.metadata.uid.clone().unwrap();
    let running = rt
        .wait("loop", "Running", Duration::from_secs(20), |p| {
            phase(p) == "Running"
        })
        .await;
    let cid = container_id(&running);
    assert!(cid.starts_with("koord-process://"), "{cid}");
    let st = status(&running);
    assert_eq!(st.pod_ip.as_deref(), Some("127.0.0.1"));
    assert!(
        st.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    let cg = rt.rt().cgroups().clone();
    let pod_dir = cg.pod_dir(koord::api::extension::qos::KubeQoS::Burstable, &uid);
    assert!(
        pod_dir
            .as_str()
            .ends_with(&format!("kubepods/burstable/pod{uid}")),
        "{}",
        pod_dir.as_str()
    );
    let ctr_dir = cg.container_dir(&pod_dir, &cid).unwrap();
    for d in [&pod_dir, &ctr_dir] {
        assert_eq!(
            cg.read_i64(Resource::CpuShares, d).unwrap(),
            256,
            "{}",
            d.as_str()
        );
        assert_eq!(
            cg.read_i64(Resource::CfsQuota, d).unwrap(),
            50_000,
            "{}",
            d.as_str()
        );
        assert_eq!(
            cg.read_i64(Resource::MemoryLimit, d).unwrap(),
            64 << 20,
            "{}",
            d.as_str()
        );
    }
    let pids = cg.procs(&ctr_dir).unwrap();
    assert!(!pids.is_empty(), "the shell runs in its container cgroup");
    let proc_cgroups = read(PathBuf::from(format!("/proc/{}/cgroup", pids[0])));
    assert!(proc_cgroups.contains(ctr_dir.as_str()), "{proc_cgroups}");

    // The read-only kubelet API lists it with its live status.
    let addr = rt.rt().addr();
    let body = tokio::task::spawn_blocking(move || common::http_get(addr, "/pods").unwrap().1)
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&body).unwrap();
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["name"] == "loop")
        .expect("listed");
    assert_eq!(item["status"]["phase"], "Running");

    let took = rt.delete_and_wait_gone("loop").await;
    assert!(
        took < Duration::from_secs(5),
        "SIGTERM ends the loop quickly: {took:?}"
    );
    assert!(!cg.exists(&pod_dir), "pod cgroup removed");
    for pid in pids {
        assert!(dead(pid), "process {pid} still alive");
    }
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exits_succeed_or_restart_with_backoff() {
    let _cpu = common::cpu_exclusive();
    let Some(rt) = setup("restarts", false).await else {
        return;
    };
    rt.create(pod("ok", "Never", "true", json!({}))).await;
    let ok = rt
        .wait("ok", "Succeeded", Duration::from_secs(20), |p| {
            phase(p) == "Succeeded"
        })
        .await;
    let term = status(&ok).container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (0, Some("Completed"))
    );

    // pods/log from the runtime's files: the whole log, its tail, and (below) the previous
    // attempt of a restarting container.
    let logs = rt.pods.logs("ok", &Default::default()).await.unwrap();
    assert_eq!(logs, "", "`true` prints nothing");
    rt.create(pod(
        "talk",
        "Never",
        "printf 'one\\ntwo\\nthree\\n'",
        json!({}),
    ))
    .await;
    rt.wait("talk", "Succeeded", Duration::from_secs(20), |p| {
        phase(p) == "Succeeded"
    })
    .await;
    assert_eq!(
        rt.pods.logs("talk", &Default::default()).await.unwrap(),
        "one\ntwo\nthree\n"
    );
    let tail = kube::api::LogParams {
        tail_lines: Some(2),
        ..Default::default()
    };
    assert_eq!(rt.pods.logs("talk", &tail).await.unwrap(), "two\nthree\n");
    // Times from the runtime's growth notes: every line stamped, all within the last minute.
    let stamped = kube::api::LogParams {
        timestamps: true,
        since_seconds: Some(60),
        ..Default::default()
    };
    let text = rt.pods.logs("talk", &stamped).await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, want) in lines.iter().zip(["one", "two", "three"]) {
        let (ts, msg) = line.split_once(' ').unwrap();
        assert_eq!(msg, want);
        let t: k8s_openapi::jiff::Timestamp = ts.parse().unwrap();
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(t);
        assert!(age.as_secs() < 60, "{line}");
    }

    let started = Instant::now();
    rt.create(pod("crash", "Always", "echo attempt; exit 1", json!({})))
        .await;
    let crashing = rt
        .wait("crash", "two restarts", Duration::from_secs(30), |p| {
            status(p)
                .container_statuses
                .unwrap_or_default()
                .first()
                .is_some_and(|c| c.restart_count >= 2)
        })
        .await;
    // Backoff 1s then 2s: the second restart cannot come before ~3s.
    assert!(
        started.elapsed() >= Duration::from_millis(2800),
        "restarted too fast: {:?}",
        started.elapsed()
    );
    let previous = kube::api::LogParams {
        previous: true,
        ..Default::default()
    };
    assert_eq!(rt.pods.logs("crash", &previous).await.unwrap(), "attempt\n");
    let c = &status(&crashing).container_statuses.unwrap()[0];
    let last = c.last_state.clone().unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 1);
    assert_eq!(
        phase(&crashing),
        "Running",
        "a crash-looping pod is Running"
    );
    rt.wait("crash", "CrashLoopBackOff", Duration::from_secs(20), |p| {
        status(p).container_statuses.unwrap_or_default()[0]
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
    })
    .await;
    rt.delete_and_wait_gone("crash").await;
    rt.delete_and_wait_gone("ok").await;
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limit_overrun_is_oom_killed() {
    let _cpu = common::cpu_exclusive();
    let Some(rt) = setup("oom", false).await else {
        return;
    };
    let resources = json!({"limits": {"memory": "32Mi"}});
    rt.create(pod(
        "hog",
        "Never",
        "head -c 300000000 /dev/zero | tail",
        resources,
    ))
    .await;
    let done = rt
        .wait("hog", "Failed", Duration::from_secs(30), |p| {
            phase(p) == "Failed"
        })
        .await;
    let term = status(&done).container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(term.reason.as_deref(), Some("OOMKilled"), "{term:?}");
    rt.delete_and_wait_gone("hog").await;
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_waits_the_grace_period_then_kills() {
    let _cpu = common::cpu_exclusive();
    let Some(rt) = setup("grace", false).await else {
        return;
    };
    let mut p = pod(
        "stubborn",
        "Always",
        "trap '' TERM; while true; do sleep 0.2; done",
        json!({}),
    );
    p["spec"]["terminationGracePeriodSeconds"] = 2.into();
    let created = rt.create(p).await;
    let running = rt
        .wait("stubborn", "Running", Duration::from_secs(20), |p| {
            phase(p) == "Running"
        })
        .await;
    let cg = rt.rt().cgroups().clone();
    let uid = created.metadata.uid.unwrap();
    let dir = cg
        .container_dir(
            &cg.pod_dir(koord::api::extension::qos::KubeQoS::BestEffort, &uid),
            &container_id(&running),
        )
        .unwrap();
    let pid = cg.procs(&dir).unwrap()[0];
    let took = rt.delete_and_wait_gone("stubborn").await;
    assert!(
        took >= Duration::from_millis(1800),
        "killed before the grace period: {took:?}"
    );
    assert!(
        took < Duration::from_secs(8),
        "not killed after the grace period: {took:?}"
    );
    assert!(dead(pid));
    assert!(!cg.exists(&CgroupDir::new(dir.parent().unwrap().as_str())));
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_and_stop_api_kills_containers() {
    let _cpu = common::cpu_exclusive();
    let Some(rt) = setup("init", false).await else {
        return;
    };
    let mut p = pod(
        "staged",
        "Always",
        "while true; do sleep 1; done",
        json!({}),
    );
    p["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox", "command": ["sh", "-c", format!("sleep 0.3 # {}", marker())]}]);
    rt.create(p).await;
    let running = rt
        .wait("staged", "Running", Duration::from_secs(20), |p| {
            phase(p) == "Running"
        })
        .await;
    let init = status(&running).init_container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(init.reason.as_deref(), Some("Completed"));

    let addr = rt.rt().addr();
    let resp = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "POST /pods/default/staged/stop HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
    .await
    .unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.contains("\"stopped\":1"),
        "{resp}"
    );
    rt.wait(
        "staged",
        "a restart after the stop",
        Duration::from_secs(20),
        |p| {
            status(p)
                .container_statuses
                .unwrap_or_default()
                .first()
                .is_some_and(|c| c.restart_count >= 1)
        },
    )
    .await;
    rt.delete_and_wait_gone("staged").await;
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_readopts_running_pods_and_cleans_vanished_ones() {
    let _cpu = common::cpu_exclusive();
    let Some(mut rt) = setup("adopt", true).await else {
        return;
    };
    let kept = rt
        .create(pod(
            "kept",
            "Always",
            "while true; do sleep 1; done",
            json!({}),
        ))
        .await;
    let gone = rt
        .create(pod(
            "gone",
            "Always",
            "while true; do sleep 1; done",
            json!({}),
        ))
        .await;
    let k = rt
        .wait("kept", "Running", Duration::from_secs(20), |p| {
            phase(p) == "Running"
        })
        .await;
    let g = rt
        .wait("gone", "Running", Duration::from_secs(20), |p| {
            phase(p) == "Running"
        })
        .await;
    let cg = rt.rt().cgroups().clone();
    let qos = koord::api::extension::qos::KubeQoS::BestEffort;
    let kept_dir = cg
        .container_dir(
            &cg.pod_dir(qos, kept.metadata.uid.as_ref().unwrap()),
            &container_id(&k),
        )
        .unwrap();
    let gone_pod_dir = cg.pod_dir(qos, gone.metadata.uid.as_ref().unwrap());
    let kept_pids = cg.procs(&kept_dir).unwrap();
    let gone_pids = cg
        .procs(&cg.container_dir(&gone_pod_dir, &container_id(&g)).unwrap())
        .unwrap();

    // Stop the runtime (keeping processes) and remove one pod while it is down.
    rt.rt.take().unwrap().shutdown().await;
    assert!(
        kept_pids.iter().all(|p| !dead(*p)),
        "kept running while koord was down"
    );
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    rt.pods.delete("gone", &force).await.unwrap();
    rt.rt = Some(
        NodeRuntime::start(
            rt.cfg.clone(),
            rt.api.client.clone(),
            NODE,
            rt.data.path(),
            true,
            rt.api.server().auth(),
        )
        .await
        .unwrap(),
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rt.pods.get("kept").await.unwrap();
    assert_eq!(phase(&after), "Running");
    assert_eq!(
        container_id(&after),
        container_id(&k),
        "same container, re-adopted"
    );
    assert_eq!(
        status(&after).container_statuses.unwrap()[0].restart_count,
        0
    );
    assert!(
        cg.procs(&kept_dir)
            .unwrap()
            .iter()
            .any(|p| kept_pids.contains(p)),
        "same process"
    );
    assert!(
        !cg.exists(&gone_pod_dir),
        "the vanished pod's cgroup was cleaned up"
    );
    for pid in gone_pids {
        assert!(dead(pid), "vanished pod's process {pid} killed");
    }
    rt.cfg.keep_pods_on_exit = false;
    rt.restart().await;
    rt.delete_and_wait_gone("kept").await;
    rt.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_container_reports_its_real_exit_code() {
    let mut cfg = config("shim", true);
    cfg.shim = Some(common::koord_bin());
    let Some(mut rt) = setup_with(cfg).await else {
        return;
    };
    rt.create(pod("ends", "Never", "sleep 3; exit 7", json!({})))
        .await;
    rt.wait("ends", "Running", Duration::from_secs(20), |p| {
        phase(p) == "Running"
    })
    .await;
    // koord restarts while the container runs: the process is no longer its child.
    rt.restart().await;
    let done = rt
        .wait("ends", "Failed", Duration::from_secs(20), |p| {
            phase(p) == "Failed"
        })
        .await;
    let state = status(&done).container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (state.exit_code, state.reason.as_deref()),
        (7, Some("Error")),
        "not 137/ContainerStatusUnknown"
    );
    rt.cfg.keep_pods_on_exit = false;
    rt.restart().await;
    rt.delete_and_wait_gone("ends").await;
    rt.finish().await;
}
