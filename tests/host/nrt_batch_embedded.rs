//! NUMA-level batch resources end to end with `koord --role=all --embedded` (root only; CI
//! is root): with colocation on, the manager writes each NUMA zone's `kubernetes.io/
//! batch-cpu` and `batch-memory` into the NodeResourceTopology the koordlet reports, and
//! when the koordlet rewrites its own part of that object (here: after someone changed a
//! zone's cpu) the manager's batch resources survive every write, as Koordinator's
//! `MergeZoneList`.

use crate::common;

use std::time::Duration;

use common::burner::can_run;
use common::{Koord, eventually, free_port};
use futures::{StreamExt, TryStreamExt};
use koord::api::topology::NodeResourceTopology;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use serde_json::json;

const NODE: &str = "koord-node";
const BATCH_CPU: &str = "kubernetes.io/batch-cpu";

fn has(nrt: &NodeResourceTopology, resource: &str) -> bool {
    !nrt.spec.zones.is_empty()
        && nrt
            .spec
            .zones
            .iter()
            .all(|z| z.resources.iter().flatten().any(|r| r.name == resource))
}

fn zone0_cpu(nrt: &NodeResourceTopology) -> Option<String> {
    let zone = nrt.spec.zones.first()?;
    let cpu = zone.resources.iter().flatten().find(|r| r.name == "cpu")?;
    Some(cpu.allocatable.0.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_managers_numa_batch_resources_survive_the_koordlets_reports() {
    if !can_run() {
        eprintln!("skipping: needs root and a cgroup hierarchy at /sys/fs/cgroup");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let parent = format!("koord-test-{}-nrt", std::process::id());
    let pods_addr = format!("127.0.0.1:{}", free_port());
    let koord = Koord::embedded(
        dir.path(),
        &["--node-name", NODE],
        &[
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__CGROUP_PARENT",
                parent.as_str(),
            ),
            (
                "KOORD_EMBEDDED__NODE_RUNTIME__PODS_ADDR",
                pods_addr.as_str(),
            ),
        ],
    );
    let client = common::embedded_client(&koord, &dir.path().join("data/kubeconfig")).await;
    let data = json!({"colocation-config": "{\"enable\": true}"});
    common::create_slo_config(&client, &koord, data).await;
    let pp = PostParams::default();

    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let zoned = eventually(Duration::from_secs(90), || async {
        nrts.get(NODE).await.is_ok_and(|n| has(&n, BATCH_CPU))
    })
    .await;
    assert!(
        zoned,
        "NRT: {:?}\n{}",
        nrts.get(NODE).await.ok().map(|n| n.spec.zones),
        koord.logs()
    );

    // Someone changes a zone's cpu: the koordlet's check of the stored object (once a
    // minute) puts it back.
    let mut nrt = nrts.get(NODE).await.unwrap();
    let reported = zone0_cpu(&nrt).expect("zone 0 reports cpu");
    for r in nrt.spec.zones[0].resources.iter_mut().flatten() {
        if r.name == "cpu" {
            r.allocatable.0 = "1m".into();
        }
    }
    let changed = nrts.replace(NODE, &pp, &nrt).await.unwrap();
    let rv = changed.metadata.resource_version.clone().unwrap();

    // Every version from then on keeps the batch resources, until the koordlet's own
    // rewrite has restored the cpu.
    let wp = WatchParams::default().fields(&format!("metadata.name={NODE}"));
    let mut events = nrts.watch(&wp, &rv).await.unwrap().boxed();
    let mut restored = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !restored && tokio::time::Instant::now() < deadline {
        let n = match tokio::time::timeout_at(deadline, events.try_next()).await {
            Ok(Ok(Some(WatchEvent::Modified(n)))) => n,
            Ok(Ok(Some(_))) => continue,
            _ => break,
        };
        assert!(
            has(&n, BATCH_CPU),
            "a write dropped the manager's batch resources: {:?}",
            n.spec.zones
        );
        restored = zone0_cpu(&n).as_deref() == Some(reported.as_str());
    }
    assert!(
        restored,
        "the koordlet did not restore zone 0's cpu\n{}",
        koord.logs()
    );
    drop(koord);
}
