//! `koord explain schedule` with NodeNUMAResource and Reservation: cpusets from
//! NodeResourceTopology and the CPUs running pods hold, filter reasons in Koordinator's
//! words, PreFilter rejections, pending Reservations scheduled, owners placed into them.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const SNAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/numa-snapshot.yaml"
);

fn cpus(s: &str) -> BTreeSet<u32> {
    koord::api::cpuset::parse(s).unwrap().into_iter().collect()
}

#[test]
fn pinned_pods_get_disjoint_cpusets_on_nodes_with_a_topology() {
    let v = common::explain_schedule(SNAP);
    let pods = v["pods"].as_array().unwrap();
    let by = |name: &str| {
        pods.iter()
            .find(|p| p["pod"] == format!("default/{name}"))
            .unwrap()
            .clone()
    };

    let a = by("lsr-a");
    assert_eq!(a["node"], "pinned-node", "{a}");
    let plain = &a["nodes"]["plain-node"];
    assert_eq!(plain["plugin"], "NodeNUMAResource");
    assert_eq!(plain["reason"], "node(s) invalid CPU Topology");
    assert!(a["nodes"]["pinned-node"]["scores"]["NodeNUMAResource"].is_i64());
    let a_cpus = cpus(a["cpuset"].as_str().unwrap());
    assert_eq!(
        a_cpus,
        cpus("2-5"),
        "whole cores after the running pod's 0-1"
    );

    let b = by("lsr-b");
    assert_eq!(b["node"], "pinned-node");
    let b_cpus = cpus(b["cpuset"].as_str().unwrap());
    assert_eq!(b_cpus, cpus("6-7"));

    let f = by("lsr-fraction");
    assert!(f["node"].is_null());
    for (_, n) in f["nodes"].as_object().unwrap() {
        assert_eq!(n["plugin"], "NodeNUMAResource");
        assert_eq!(n["reason"], "the requested CPUs must be integer");
    }

    let text = Command::new(common::koord_bin())
        .args(["explain", "schedule", "-f", SNAP, "-o", "text"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("default/lsr-a → pinned-node (cpuset 2-5)"),
        "{text}"
    );
}

const RESERVATIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reservation-snapshot.yaml"
);

#[test]
fn pending_reservations_are_scheduled_and_owners_use_them() {
    let v = common::explain_schedule(RESERVATIONS);
    let pods = v["pods"].as_array().unwrap();
    let by = |name: &str| pods.iter().find(|p| p["pod"] == name).unwrap().clone();
    let pending = by("reservation/r-pending");
    assert_eq!(pending["node"], "node-b", "{pending}");
    // Koordinator rejects the other nodes at Reservation's Filter, not by a PreFilter result.
    assert_eq!(
        pending["nodes"]["node-a"]["reason"],
        "node(s) didn't match the nodeName specified by reservation"
    );
    let web = by("default/web-1");
    assert_eq!(
        (web["node"].as_str(), web["reservation"].as_str()),
        (Some("node-a"), Some("r-avail")),
        "{web}"
    );
    assert_eq!(web["nodes"]["node-a"]["scores"]["Reservation"], 100);
    // node-a: 8 CPUs − 3 (web-1) − 1 still reserved = 4 < 5.
    let batch = by("default/batch");
    assert!(batch["node"].is_null(), "{batch}");
    assert_eq!(batch["nodes"]["node-a"]["reason"], "Insufficient cpu");
}

#[test]
fn quota_and_gang_reasons_in_koordinators_words() {
    let snap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/quota-gang-snapshot.yaml"
    );
    let v = common::explain_schedule(snap);
    let by = |name: &str| {
        v["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pod"] == format!("default/{name}"))
            .unwrap()
            .clone()
    };
    let q = by("a-pending");
    assert!(q["node"].is_null());
    assert_eq!(q["nodes"]["node-1"]["plugin"], "ElasticQuota");
    assert_eq!(
        q["nodes"]["node-1"]["reason"],
        "Insufficient quotas, quotaName: team-a, runtime: cpu:2,memory:0, used: cpu:2, pod's request: cpu:1, exceedDimensions: [cpu]"
    );
    // g-0 fitted, g-1 did not: the Strict gang places neither.
    let g0 = by("g-0");
    assert!(g0["node"].is_null(), "{g0}");
    assert_eq!(g0["nodes"]["node-1"]["plugin"], "Coscheduling");
    assert!(
        g0["nodes"]["node-1"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("GangGroup \"default/g\" gets rejected due to member Pod \"default/g-1\"")
    );
    assert_eq!(by("g-1")["nodes"]["node-1"]["reason"], "Insufficient cpu");
    let lonely = by("lonely-0");
    assert!(
        lonely["nodes"]["node-1"]["reason"]
            .as_str()
            .unwrap()
            .contains("child pod not collect enough")
    );
}

/// PostFilter runs in explain's cycle too: the nomination and victims the live scheduler
/// would act on are reported, nothing is evicted.
#[test]
fn an_unschedulable_pod_reports_its_preemption() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.yaml");
    std::fs::write(
        &snap,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"10\"}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: low, namespace: default}\nspec: {nodeName: n1, priority: 100, containers: [{name: c, resources: {requests: {cpu: \"3\"}}}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: high, namespace: default}\nspec: {schedulerName: koord-scheduler, priority: 1000, containers: [{name: c, resources: {requests: {cpu: \"2\"}}}]}\n",
    )
    .unwrap();
    let cfg = dir.path().join("cfg.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: koord-scheduler\n",
    )
    .unwrap();
    let args = ["explain", "schedule", "-f", snap.to_str().unwrap()];
    let out = Command::new(common::koord_bin())
        .args(args)
        .args(["--config", cfg.to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let high = &v["pods"][0];
    assert!(high["node"].is_null(), "{high}");
    assert_eq!(high["nodes"]["n1"]["reason"], "Insufficient cpu");
    assert_eq!(
        high["preemption"],
        serde_json::json!({"node": "n1", "victims": ["default/low"]})
    );
}

const NPU: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/npu-templates-snapshot.yaml"
);

/// DeviceShare's GPU shared-resource templates read from the snapshot's ConfigMap (as the
/// live scheduler watches it): the share equal to a 310P template lands there, named by it;
/// the 910 node has no such template; a share equal to no template is refused at PreFilter.
#[test]
fn npu_shares_follow_the_gpu_shared_resource_templates() {
    let v = common::explain_schedule(NPU);
    let pods = v["pods"].as_array().unwrap();
    let by = |name: &str| pods.iter().find(|p| p["pod"] == name).unwrap().clone();
    let vir02 = by("default/vir02");
    assert_eq!(vir02["node"], "node-310p", "{vir02}");
    assert_eq!(
        vir02["nodes"]["node-910"]["reason"],
        "no matched GPU shared resource template"
    );
    let text = vir02.to_string();
    assert!(
        text.contains("\"gpuSharedResourceTemplate\":\"vir02\""),
        "{text}"
    );
    let odd = by("default/odd");
    assert!(odd["node"].is_null(), "{odd}");
    assert!(
        odd.to_string()
            .contains("no matched GPU shared resource template"),
        "{odd}"
    );
}

/// `--feature-gates` as Koordinator's scheduler flag: with DevicePluginAdaption, a MetaX node
/// locked by a pod that still exists refuses the next share at Reserve, in Koordinator's
/// words; without the gate the share is placed; a malformed flag names itself.
#[test]
fn feature_gates_switch_device_plugin_adaption() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.yaml");
    std::fs::write(
        &snap,
        "apiVersion: v1\nkind: Node\nmetadata: {name: mx, annotations: {hami.io/mutex.lock: \"2026-12-06T00:00:00Z,default,first\"}}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"10\", koordinator.sh/gpu-core: \"100\", koordinator.sh/gpu-memory: 16Gi, koordinator.sh/gpu-memory-ratio: \"100\"}}\n---\n\
         apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Device\nmetadata: {name: mx, labels: {node.koordinator.sh/gpu-vendor: metax}}\nspec: {devices: [{type: gpu, minor: 0, id: GPU-0, health: true, resources: {koordinator.sh/gpu-core: \"100\", koordinator.sh/gpu-memory: 16Gi, koordinator.sh/gpu-memory-ratio: \"100\"}}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: first, namespace: default}\nspec: {nodeName: mx, containers: [{name: c}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: next, namespace: default}\nspec: {schedulerName: koord-scheduler, containers: [{name: c, resources: {requests: {cpu: \"1\", koordinator.sh/gpu-core: \"20\", koordinator.sh/gpu-memory: 2Gi}}}]}\n",
    )
    .unwrap();
    let run = |gates: &[&str]| {
        Command::new(common::koord_bin())
            .args(["explain", "schedule", "-f", snap.to_str().unwrap()])
            .args(["--now", "2026-12-06T00:01:00Z"])
            .args(gates)
            .output()
            .unwrap()
    };
    let next = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["pods"][0].clone()
    };
    let placed = next(&run(&[]));
    assert_eq!(placed["node"], "mx", "{placed}");
    let locked = next(&run(&["--feature-gates=DevicePluginAdaption=true"]));
    assert!(locked["node"].is_null(), "{locked}");
    assert_eq!(
        locked["nodes"]["mx"]["reason"],
        "failed to adapt for GPU device plugin of vendor \"metax\": failed to lock node: node \"mx\" has been locked"
    );
    let bad = run(&["--feature-gates=DevicePluginAdaption"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--feature-gates") && err.contains("Name=true|false"),
        "{err}"
    );
}
