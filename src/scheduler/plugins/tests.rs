//! Table tests of the upstream plugins.

use serde_json::json;

use super::affinity::NodeAffinity;
use super::basic::{NodeName, NodePorts, NodeUnschedulable, PrioritySort};
use super::resources::{BalancedAllocation, FitArgs, NodeResourcesFit};
use super::taint::{TaintToleration, default_normalize};
use crate::scheduler::framework::{CycleState, Plugin};
use crate::scheduler::test_util::{cluster, node_json, pod, simple_pod};

fn filter_msg(
    p: &dyn Plugin,
    pd: &crate::scheduler::framework::PodInfo,
    node: serde_json::Value,
) -> String {
    let c = cluster(vec![node]);
    p.filter(&CycleState::default(), pd, &c.nodes[0], &c)
        .message()
}

#[test]
fn node_resources_fit_filter() {
    let fit = NodeResourcesFit::new(FitArgs::default()).unwrap();
    let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
    c.upsert_pod(std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "d"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}})).unwrap()));
    let n = c.node("n1").unwrap().clone();
    // (cpu, memory, extra request, reasons)
    for (cpu, mem, extra, want) in [
        ("1", "1Gi", json!({}), ""),
        ("1500m", "1Gi", json!({}), "Insufficient cpu"),
        ("1", "8Gi", json!({}), "Insufficient memory"),
        (
            "2",
            "8Gi",
            json!({}),
            "Insufficient cpu, Insufficient memory",
        ),
        (
            "1",
            "1Gi",
            json!({"kubernetes.io/batch-cpu": "500"}),
            "Insufficient kubernetes.io/batch-cpu",
        ),
    ] {
        let mut req = json!({"cpu": cpu, "memory": mem});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}}),
        );
        assert_eq!(
            fit.filter(&CycleState::default(), &p, &n, &c).message(),
            want,
            "{cpu} {mem} {extra}"
        );
    }
    // kube's Unresolvable: a request over the node's allocatable itself (no eviction
    // makes room, so preemption skips the node); over what is free only: Unschedulable.
    use crate::scheduler::framework::Code;
    for (cpu, extra, want) in [
        ("1500m", json!({}), Code::Unschedulable),
        ("5", json!({}), Code::UnschedulableAndUnresolvable),
        (
            "1",
            json!({"kubernetes.io/batch-cpu": "500"}),
            Code::UnschedulableAndUnresolvable,
        ),
    ] {
        let mut req = json!({"cpu": cpu, "memory": "1Gi"});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}}),
        );
        assert_eq!(
            fit.filter(&CycleState::default(), &p, &n, &c).code,
            want,
            "{cpu} {extra}"
        );
    }
    let mut full = node_json("n2", "4", "8Gi");
    full["status"]["allocatable"]["pods"] = "0".into();
    assert_eq!(
        filter_msg(&fit, &simple_pod("p", "1", "1Gi"), full),
        "Too many pods"
    );
    let ignoring = NodeResourcesFit::new(
        serde_json::from_value(json!({"ignoredResourceGroups": ["kubernetes.io"]})).unwrap(),
    )
    .unwrap();
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "500"}}}]}}),
    );
    assert_eq!(
        ignoring
            .filter(&CycleState::default(), &p, &n, &c)
            .message(),
        ""
    );
}

#[test]
fn node_resources_fit_scores() {
    let least = NodeResourcesFit::new(FitArgs::default()).unwrap();
    let most = NodeResourcesFit::new(
        serde_json::from_value(json!({"scoringStrategy": {"type": "MostAllocated"}})).unwrap(),
    )
    .unwrap();
    let c = cluster(vec![node_json("n1", "4", "8Gi")]);
    let p = simple_pod("p", "1", "2Gi");
    // cpu (4000-1000)*100/4000 = 75, memory (8-2)/8 = 75.
    assert_eq!(
        least.score(&CycleState::default(), &p, &c.nodes[0], &c),
        Ok(75)
    );
    assert_eq!(
        most.score(&CycleState::default(), &p, &c.nodes[0], &c),
        Ok(25)
    );
    // A pod without requests counts as 100m / 200Mi.
    let empty = pod(
        json!({"metadata": {"name": "e", "namespace": "d"}, "spec": {"containers": [{"name": "c"}]}}),
    );
    let cpu = (4000 - 100) * 100 / 4000;
    let mem = (8192 - 200) * 100 / 8192;
    assert_eq!(
        least.score(&CycleState::default(), &empty, &c.nodes[0], &c),
        Ok((cpu + mem) / 2)
    );
    // A weighted batch resource counts only when the pod requests it.
    let batch = NodeResourcesFit::new(serde_json::from_value(json!({"scoringStrategy": {"type": "LeastAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "kubernetes.io/batch-cpu", "weight": 3}]}})).unwrap()).unwrap();
    let mut n = node_json("n1", "4", "8Gi");
    n["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "10000".into();
    let c = cluster(vec![n]);
    assert_eq!(
        batch.score(&CycleState::default(), &p, &c.nodes[0], &c),
        Ok(75)
    );
    let bp = pod(
        json!({"metadata": {"name": "b", "namespace": "d"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "5000"}}}]}}),
    );
    assert_eq!(
        batch.score(&CycleState::default(), &bp, &c.nodes[0], &c),
        Ok(((4000 - 100) * 100 / 4000 + 50 * 3) / 4)
    );
}

#[test]
fn balanced_allocation() {
    let b = BalancedAllocation::new(Default::default());
    let c = cluster(vec![node_json("n1", "4", "8Gi")]);
    assert_eq!(
        b.score(
            &CycleState::default(),
            &simple_pod("p", "2", "4Gi"),
            &c.nodes[0],
            &c
        ),
        Ok(100)
    );
    // cpu 0.5, memory 0.125 → std 0.1875 → 81.
    assert_eq!(
        b.score(
            &CycleState::default(),
            &simple_pod("p", "2", "1Gi"),
            &c.nodes[0],
            &c
        ),
        Ok(81)
    );
}

#[test]
fn taints_and_unschedulable() {
    let mut n = node_json("n1", "4", "8Gi");
    n["spec"] = json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, {"key": "soft", "effect": "PreferNoSchedule"}]});
    let plain = simple_pod("p", "1", "1Gi");
    assert_eq!(
        filter_msg(&TaintToleration, &plain, n.clone()),
        "node(s) had untolerated taint {dedicated: gpu}"
    );
    for tol in [
        json!({"key": "dedicated", "operator": "Equal", "value": "gpu"}),
        json!({"key": "dedicated", "operator": "Exists"}),
        json!({"operator": "Exists"}),
    ] {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"tolerations": [tol.clone()], "containers": [{"name": "c"}]}}),
        );
        assert_eq!(filter_msg(&TaintToleration, &p, n.clone()), "", "{tol}");
    }
    let wrong = pod(
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"tolerations": [{"key": "dedicated", "value": "cpu"}], "containers": [{"name": "c"}]}}),
    );
    assert_ne!(filter_msg(&TaintToleration, &wrong, n.clone()), "");
    let mut scores = vec![1, 0, 2];
    default_normalize(&mut scores, true);
    assert_eq!(scores, vec![50, 100, 0]);
    let mut cordoned = node_json("n2", "4", "8Gi");
    cordoned["spec"] = json!({"unschedulable": true});
    assert_eq!(
        filter_msg(&NodeUnschedulable, &plain, cordoned.clone()),
        "node(s) were unschedulable"
    );
    let tolerant = pod(
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}], "containers": [{"name": "c"}]}}),
    );
    assert_eq!(filter_msg(&NodeUnschedulable, &tolerant, cordoned), "");
}

#[test]
fn node_affinity_and_name() {
    let mut n = node_json("n1", "4", "8Gi");
    n["metadata"]["labels"] = json!({"zone": "a", "cores": "32", "kubernetes.io/hostname": "n1"});
    let with = |spec: serde_json::Value| {
        let mut s = spec;
        s["containers"] = json!([{"name": "c"}]);
        pod(json!({"metadata": {"name": "p", "namespace": "d"}, "spec": s}))
    };
    let req = |exprs: serde_json::Value| {
        with(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}}}),
        )
    };
    let ok = "";
    let no = "node(s) didn't match Pod's node affinity/selector";
    for (p, want) in [
        (with(json!({"nodeSelector": {"zone": "a"}})), ok),
        (with(json!({"nodeSelector": {"zone": "b"}})), no),
        (
            req(json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}])),
            ok,
        ),
        (
            req(json!([{"key": "zone", "operator": "NotIn", "values": ["a"]}])),
            no,
        ),
        (
            req(json!([{"key": "cores", "operator": "Gt", "values": ["16"]}])),
            ok,
        ),
        (
            req(json!([{"key": "cores", "operator": "Lt", "values": ["16"]}])),
            no,
        ),
        (req(json!([{"key": "gpu", "operator": "DoesNotExist"}])), ok),
        (req(json!([{"key": "gpu", "operator": "Exists"}])), no),
        (
            with(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}),
            ),
            ok,
        ),
    ] {
        assert_eq!(filter_msg(&NodeAffinity::default(), &p, n.clone()), want);
    }
    let preferred = with(
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}}),
    );
    let c = cluster(vec![n.clone()]);
    assert_eq!(
        NodeAffinity::default().score(&CycleState::default(), &preferred, &c.nodes[0], &c),
        Ok(10)
    );
    let named = with(json!({"nodeName": "other"}));
    assert_eq!(
        filter_msg(&NodeName, &named, n),
        "node(s) didn't match the requested node name"
    );
}

#[test]
fn node_ports_and_priority_sort() {
    let mut c = cluster(vec![node_json("n1", "4", "8Gi")]);
    let with_port = |name: &str, port: i64, ip: &str| {
        serde_json::json!({"metadata": {"name": name, "namespace": "d"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port, "hostIP": ip}]}]}})
    };
    c.upsert_pod(std::sync::Arc::new(
        serde_json::from_value(with_port("a", 8080, "10.0.0.1")).unwrap(),
    ));
    let n = c.node("n1").unwrap();
    for (port, ip, ok) in [
        (8080, "10.0.0.1", false),
        (8080, "0.0.0.0", false),
        (8080, "10.0.0.2", true),
        (9090, "10.0.0.1", true),
    ] {
        let mut v = with_port("b", port, ip);
        v["spec"]["nodeName"] = serde_json::Value::Null;
        let p = pod(v);
        assert_eq!(
            NodePorts
                .filter(&CycleState::default(), &p, n, &c)
                .is_success(),
            ok,
            "{port} {ip}"
        );
    }
    let hi = pod(
        json!({"metadata": {"name": "z", "namespace": "d"}, "spec": {"priority": 10, "containers": [{"name": "c"}]}}),
    );
    let lo = pod(
        json!({"metadata": {"name": "a", "namespace": "d"}, "spec": {"priority": 1, "containers": [{"name": "c"}]}}),
    );
    assert!(PrioritySort.less(&hi, &lo) && !PrioritySort.less(&lo, &hi));
}

mod spread {
    use serde_json::json;

    use crate::scheduler::framework::{CycleState, Plugin};
    use crate::scheduler::plugins::spread::{Args, PodTopologySpread};
    use crate::scheduler::test_util::{cluster, node_json, pod};

    #[test]
    fn do_not_schedule_skew_and_schedule_anyway_score() {
        let spread = PodTopologySpread::new(Args::default()).unwrap();
        let mut nodes = Vec::new();
        for (n, z) in [("a1", "a"), ("b1", "b"), ("nolabel", "")] {
            let mut v = node_json(n, "4", "8Gi");
            if !z.is_empty() {
                v["metadata"]["labels"]["zone"] = z.into();
            }
            nodes.push(v);
        }
        let mut c = cluster(nodes);
        for (i, node) in ["a1", "a1"].iter().enumerate() {
            let p = json!({"metadata": {"name": format!("w{i}"), "namespace": "d", "labels": {"app": "web"}},
                "spec": {"nodeName": node, "containers": [{"name": "c"}]}});
            c.upsert_pod(std::sync::Arc::new(serde_json::from_value(p).unwrap()));
        }
        let with = |mode: &str| {
            pod(
                json!({"metadata": {"name": "in", "namespace": "d", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": mode, "labelSelector": {"matchLabels": {"app": "web"}}}]}}),
            )
        };
        let hard = with("DoNotSchedule");
        let mut state = CycleState::default();
        assert!(spread.pre_filter(&mut state, &hard, &c).0.is_success());
        let msgs: Vec<String> = c
            .nodes
            .iter()
            .map(|n| spread.filter(&state, &hard, n, &c).message())
            .collect();
        assert_eq!(
            msgs,
            [
                "node(s) didn't match pod topology spread constraints",
                "",
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ]
        );
        let soft = with("ScheduleAnyway");
        let mut state = CycleState::default();
        let refs: Vec<usize> = (0..c.nodes.len()).collect();
        assert!(spread.pre_score(&mut state, &soft, &refs, &c).is_success());
        let mut scores: Vec<i64> = c.nodes[..2]
            .iter()
            .map(|n| spread.score(&state, &soft, n, &c).unwrap())
            .collect();
        spread.normalize(&state, &soft, &mut scores);
        assert!(
            scores[1] > scores[0],
            "the emptier zone scores higher: {scores:?}"
        );
        let none = pod(
            json!({"metadata": {"name": "x", "namespace": "d"}, "spec": {"containers": [{"name": "c"}]}}),
        );
        assert_eq!(
            spread
                .pre_filter(&mut CycleState::default(), &none, &c)
                .0
                .code,
            crate::scheduler::framework::Code::Skip
        );
    }
}

mod preemption {
    use std::collections::BTreeMap;

    use serde_json::json;

    use crate::scheduler::config;
    use crate::scheduler::framework::runtime::Scope;
    use crate::scheduler::test_util::{cluster, node_json, pod};

    fn placed(
        c: &mut crate::scheduler::framework::ClusterState,
        name: &str,
        node: &str,
        cpu: &str,
        prio: i32,
    ) {
        let p = json!({"metadata": {"name": name, "namespace": "d"}, "spec": {"nodeName": node, "priority": prio,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}});
        c.upsert_pod(std::sync::Arc::new(serde_json::from_value(p).unwrap()));
    }

    #[test]
    fn fewest_least_important_victims_never_equal_or_higher() {
        let mut c = cluster(vec![
            node_json("n1", "4", "8Gi"),
            node_json("n2", "4", "8Gi"),
        ]);
        placed(&mut c, "batch-a", "n1", "2", 100);
        placed(&mut c, "batch-b", "n1", "2", 200);
        placed(&mut c, "prod", "n2", "4", 9000);
        let fw = config::framework(&config::default_config().unwrap().profiles[0]).unwrap();
        let p = pod(
            json!({"metadata": {"name": "in", "namespace": "d"}, "spec": {"priority": 5000,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
        );
        let r = fw.schedule(&p, &c, Scope::Live { start: 0 });
        assert!(r.node.is_none());
        let n = fw.post_filter(&r, &p, &c).expect("a nomination");
        assert_eq!(n.node, "n1", "n2's pod has a higher priority");
        let names: Vec<&str> = n.victims.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["batch-a"],
            "one victim suffices; the lower priority one goes"
        );
        let never = pod(
            json!({"metadata": {"name": "nv", "namespace": "d"}, "spec": {"priority": 5000, "preemptionPolicy": "Never",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
        );
        let r = fw.schedule(&never, &c, Scope::Live { start: 0 });
        assert!(fw.post_filter(&r, &never, &c).is_none());
        let low = pod(
            json!({"metadata": {"name": "lo", "namespace": "d"}, "spec": {"priority": 100,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}),
        );
        let r = fw.schedule(&low, &c, Scope::Live { start: 0 });
        assert!(
            fw.post_filter(&r, &low, &c).is_none(),
            "equal priority is never a victim"
        );
        let _ = BTreeMap::<(), ()>::new();
    }
}

/// kube-scheduler's TestNodeAffinity "added affinity" cases.
#[test]
fn node_affinity_added_affinity() {
    let args: super::affinity::Args = serde_json::from_value(json!({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["foo"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}))
    .unwrap();
    let na = NodeAffinity::new(args).unwrap();
    let plain = pod(
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "c"}]}}),
    );
    let mut state = CycleState::default();
    let c = cluster(vec![node_json("n", "4", "8Gi")]);
    assert!(
        na.pre_filter(&mut state, &plain, &c).0.is_success(),
        "no Skip: the enforced affinity applies to every pod"
    );
    let mut foo = node_json("foo", "4", "8Gi");
    foo["metadata"]["labels"]["zone"] = "foo".into();
    foo["metadata"]["labels"]["disk"] = "ssd".into();
    let mut bar = node_json("bar", "4", "8Gi");
    bar["metadata"]["labels"]["zone"] = "bar".into();
    assert_eq!(filter_msg(&na, &plain, foo.clone()), "");
    assert_eq!(
        filter_msg(&na, &plain, bar),
        "node(s) didn't match scheduler-enforced node affinity"
    );
    let c = cluster(vec![foo]);
    assert!(na.pre_score(&mut state, &plain, &[0], &c).is_success());
    assert_eq!(na.score(&state, &plain, &c.nodes[0], &c), Ok(5));
    let bad: super::affinity::Args = serde_json::from_value(json!({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}))
    .unwrap();
    assert!(NodeAffinity::new(bad).is_err());
}
