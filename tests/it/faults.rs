//! Fault tests (Sieve-style): a role killed with SIGKILL at the moment that matters —
//! right after a Bind, between a Reservation's allocation patch and the Bind, right after
//! a migration job created its Reservation — then restarted; nothing is bound twice or
//! counted twice, and the work converges. The points are `koord::kernel::fault`'s.

use crate::common;
use crate::quota::node_of;
use crate::reservation::{CONFIG, phase, pod, reservation, start_with};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::{TestApi, eventually, free_port};
use k8s_openapi::api::core::v1::Pod;
use koord::api::scheduling::reservation::Reservation;
use kube::Api;
use kube::api::PostParams;

const FAULTS: &str = koord::kernel::fault::ENV;

async fn api_with_nodes(count: u32, cpu: &str) -> (TestApi, u16) {
    let port = free_port();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.addr = SocketAddr::from(([127, 0, 0, 1], port));
    opts.sim = Some(koord::apiserver::sim::SimNodes {
        count,
        cpu: cpu.into(),
        memory: "16Gi".into(),
        pods: 110,
    });
    (TestApi::start_with(opts).await, port)
}

/// The scheduler configuration file and a scheduler that dies at `fault`.
fn scheduler_armed(
    dir: &std::path::Path,
    port: u16,
    fault: &str,
) -> (std::path::PathBuf, common::Koord) {
    let cfg = dir.join("sched.yaml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let first = start_with(dir, port, &cfg, &[(FAULTS, fault)]);
    (cfg, first)
}

/// Requested CPU (cores) bound to each node.
async fn cpu_by_node(pods: &Api<Pod>) -> BTreeMap<String, f64> {
    let mut by = BTreeMap::new();
    for p in pods.list(&Default::default()).await.unwrap().items {
        let spec = p.spec.unwrap_or_default();
        let Some(node) = spec.node_name else { continue };
        let cpu: f64 = spec
            .containers
            .iter()
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu").cloned())
            .map(|q| q.0.parse::<f64>().unwrap_or(0.0))
            .sum();
        *by.entry(node).or_default() += cpu;
    }
    by
}

/// Killed right after its third Bind (before PostBind and the Scheduled event), the
/// scheduler restarts and fills two 4-CPU nodes with eight 1-CPU pods exactly: the pods
/// bound before the crash are counted, none is bound twice, no node is overcommitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_after_a_bind_overcommits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(2, "4").await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let (cfg, mut first) = scheduler_armed(dir.path(), port, "scheduler.after-bind@3");
    for i in 0..8 {
        let p = pod(&format!("p{i}"), "1", "fill");
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let bound_at_crash = cpu_by_node(&pods).await.values().sum::<f64>();
    assert!(bound_at_crash >= 3.0, "three binds before the crash");
    let second = start_with(dir.path(), port, &cfg, &[]);
    let all = eventually(Duration::from_secs(30), || async {
        cpu_by_node(&pods).await.values().sum::<f64>() == 8.0
    });
    assert!(
        all.await,
        "{:?}\n{}",
        cpu_by_node(&pods).await,
        second.logs()
    );
    for (node, cpu) in cpu_by_node(&pods).await {
        assert_eq!(cpu, 4.0, "{node} holds exactly its 4 CPUs");
    }
    drop(second);
    api.stop().await;
}

fn allocated_to(p: &Pod) -> Option<String> {
    let a = p.metadata.annotations.as_ref()?;
    let v: serde_json::Value =
        serde_json::from_str(a.get("scheduling.koordinator.sh/reservation-allocated")?).ok()?;
    v["name"].as_str().map(str::to_string)
}

/// Killed between the PreBind patch that allocates a pod into a Reservation and the Bind,
/// the scheduler restarts: the pod (annotated but unbound) is placed into the Reservation
/// once — a second owner still fits the 4 reserved CPUs beside it, and the 4 free CPUs go
/// to a non-owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_between_allocation_and_bind_counts_the_pod_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut api, port) = api_with_nodes(1, "8").await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let rs: Api<Reservation> = Api::all(c.clone());
    let (cfg, mut first) = scheduler_armed(dir.path(), port, "scheduler.after-prebind");
    let mut web = reservation("web", "4", "web", "1h");
    web.spec.allocate_once = Some(false);
    rs.create(&pp, &web).await.unwrap();
    let available = eventually(Duration::from_secs(20), || async {
        phase(&rs, "web").await.0 == "Available"
    });
    assert!(available.await, "{}", first.logs());
    pods.create(&pp, &pod("web-1", "2", "web")).await.unwrap();
    assert!(
        first.wait_exit(Duration::from_secs(30)).is_some(),
        "the fault point was not reached\n{}",
        first.logs()
    );
    let p = pods.get("web-1").await.unwrap();
    assert_eq!(
        allocated_to(&p).as_deref(),
        Some("web"),
        "allocated before the crash"
    );
    assert_eq!(
        node_of(&pods, "web-1").await,
        None,
        "not bound before the crash"
    );

    let second = start_with(dir.path(), port, &cfg, &[]);
    pods.create(&pp, &pod("web-2", "2", "web")).await.unwrap();
    let placed = eventually(Duration::from_secs(30), || async {
        node_of(&pods, "web-1").await.is_some() && node_of(&pods, "web-2").await.is_some()
    });
    assert!(placed.await, "{}", second.logs());
    for name in ["web-1", "web-2"] {
        let p = pods.get(name).await.unwrap();
        assert_eq!(
            allocated_to(&p).as_deref(),
            Some("web"),
            "{name} in the reservation"
        );
    }
    pods.create(&pp, &pod("batch", "4", "batch")).await.unwrap();
    let fits = eventually(Duration::from_secs(20), || async {
        node_of(&pods, "batch").await.is_some()
    });
    assert!(
        fits.await,
        "the 4 unreserved CPUs are free\n{}",
        second.logs()
    );
    drop(second);
    api.stop().await;
}
