//! CoreSched on the real host: `cpu.idle` on the besteffort cgroup where the kernel has the
//! file, and core-scheduling cookies shared by a group where the kernel does core
//! scheduling (else the test says why it skipped that part).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::burner;
use koord::api::extension::qos::KubeQoS;
use koord::koordlet::informer::{PodMeta, States};
use koord::koordlet::qos::coresched::CoreSched;
use koord::koordlet::qos::executor::Executor;
use koord::os::coresched::{CookieOps, Prctl};
use koord::os::process::{SIGKILL, Spawn, signal, spawn_in_cgroups};
use koord::os::{CgroupDir, Cgroups, Resource};
use serde_json::json;

fn be_pod(uid: &str, labels: serde_json::Value, cg: &Cgroups) -> PodMeta {
    let mut l = labels.as_object().cloned().unwrap_or_default();
    l.insert("koordinator.sh/qosClass".into(), json!("BE"));
    let p = serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid, "labels": l,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"qosClass": "BestEffort"}}))
    .unwrap();
    PodMeta::new(p, cg).unwrap()
}

fn sleeper(cg: &Cgroups, dir: &CgroupDir) -> tokio::process::Child {
    cg.create(dir).unwrap();
    spawn_in_cgroups(Spawn {
        program: "sleep".into(),
        args: vec!["600".into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        stdin: std::process::Stdio::null(),
        stdout: std::process::Stdio::null(),
        stderr: std::process::Stdio::null(),
        cgroup_procs: cg.procs_files(dir),
        identity: None,
        keep_fd: None,
        mounts: Default::default(),
    })
    .unwrap()
}

fn states(pods: Vec<PodMeta>) -> States {
    let slo = serde_json::from_value(
        json!({"metadata": {"name": "n"}, "spec": {"resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched"},
        "beClass": {"cpuQOS": {"enable": true, "schedIdle": 1}}}}}),
    )
    .unwrap();
    States {
        pods: Arc::new(pods),
        node_slo: Some(Arc::new(slo)),
        ..Default::default()
    }
}

#[tokio::test]
async fn be_pods_share_their_groups_cookie_and_besteffort_is_cpu_idle() {
    if !burner::can_run() {
        eprintln!("skipping: needs root and /sys/fs/cgroup");
        return;
    }
    let cg = burner::cgroups("coresched");
    let g = json!({"koordinator.sh/core-sched-group-id": "tenant"});
    let pods = vec![
        be_pod("cs-a", g.clone(), &cg),
        be_pod("cs-b", g, &cg),
        be_pod(
            "cs-c",
            json!({"koordinator.sh/core-sched-policy": "exclusive"}),
            &cg,
        ),
    ];
    let mut children: Vec<tokio::process::Child> =
        pods.iter().map(|p| sleeper(&cg, &p.dir)).collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id().unwrap()).collect();

    let ex = Arc::new(Executor::new(cg.clone(), Duration::from_secs(60)));
    let mut cs = CoreSched::new(ex, "/proc".into(), Arc::new(Prctl));
    let (idle, _) = cs.round(&states(pods.clone()));
    let idle_file = cg.file(Resource::CpuIdle, &cg.qos_dir(KubeQoS::BestEffort));
    let idle_now = std::fs::read_to_string(&idle_file).ok();
    let cookies: Vec<u64> = pids.iter().map(|p| Prctl.get(*p).unwrap_or(0)).collect();
    let unsupported = cs.unsupported().map(str::to_string);

    for c in &mut children {
        signal(c.id().unwrap() as i32, SIGKILL).unwrap();
        let _ = c.wait().await;
    }
    for p in &pods {
        for _ in 0..50 {
            if cg.procs(&p.dir).unwrap_or_default().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cg.remove(&p.dir).unwrap();
    }
    let mut d = Some(cg.qos_dir(KubeQoS::BestEffort));
    while let Some(x) = d {
        cg.remove(&x).unwrap();
        d = x.parent();
    }

    match idle_now {
        Some(v) => {
            assert!(idle.iter().all(|r| r.is_ok()), "{idle:?}");
            assert_eq!(v.trim(), "1", "besteffort's cpu.idle under schedIdle: 1");
        }
        None => eprintln!(
            "skipping the cpu.idle check: {} does not exist on this kernel",
            idle_file.display()
        ),
    }
    match unsupported {
        Some(why) => eprintln!("skipping the cookie checks: {why}"),
        None => {
            assert_ne!(cookies[0], 0, "the group has a cookie");
            assert_eq!(cookies[0], cookies[1], "one cookie per group");
            assert!(
                cookies[2] != 0 && cookies[2] != cookies[0],
                "an exclusive pod has its own"
            );
        }
    }
}
