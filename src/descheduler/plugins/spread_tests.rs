//! sigs.k8s.io/descheduler's `TestTopologySpreadConstraint`, case for case with its names
//! (`createTestPods`: pods `pod-N` in `ns1`, 100m each, owned by a ReplicaSet).

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::descheduler::testkit::*;

/// One `testPodList` entry.
struct L {
    count: usize,
    node: &'static str,
    labels: Value,
    constraints: Value,
    extra: Value,
    no_owners: bool,
}

fn l(count: usize, node: &'static str, constraints: Value) -> L {
    L {
        count,
        node,
        labels: json!({"foo": "bar"}),
        constraints,
        extra: json!({}),
        no_owners: false,
    }
}

impl L {
    fn labels(mut self, v: Value) -> L {
        self.labels = v;
        self
    }
    fn extra(mut self, v: Value) -> L {
        self.extra = v;
        self
    }
    fn selector(self, v: Value) -> L {
        self.extra(json!({"spec": {"nodeSelector": v}}))
    }
    fn no_owners(mut self) -> L {
        self.no_owners = true;
        self
    }
}

fn create(lists: Vec<L>) -> Vec<Pod> {
    let mut out = Vec::new();
    for t in lists {
        for _ in 0..t.count {
            let owner = if t.no_owners { json!({}) } else { rs_owner() };
            let base = json!({"metadata": {"namespace": "ns1", "labels": t.labels},
                "spec": {"topologySpreadConstraints": t.constraints}});
            out.push(pod(
                &format!("pod-{}", out.len()),
                100,
                0,
                t.node,
                with(&[owner, base, t.extra.clone()]),
            ));
        }
    }
    out
}

/// `getDefaultTopologyConstraints(maxSkew)` with `edit` merged into the constraint.
fn tsc(max_skew: i32, edit: Value) -> Value {
    let mut c = json!({"maxSkew": max_skew, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"foo": "bar"}}});
    json_patch::merge(&mut c, &edit);
    json!([c])
}

fn none() -> Value {
    Value::Null
}

fn zoned(name: &str, zone: &str) -> Node {
    node(
        name,
        2000,
        3000,
        10,
        json!({"metadata": {"labels": {"zone": zone}}}),
    )
}

fn sized(name: &str, cpu: i64, zone: &str) -> Node {
    node(
        name,
        cpu,
        2000,
        9,
        json!({"metadata": {"labels": {"zone": zone}}}),
    )
}

fn ab() -> Vec<Node> {
    vec![zoned("n1", "zoneA"), zoned("n2", "zoneB")]
}

fn abc() -> Vec<Node> {
    vec![
        zoned("n1", "zoneA"),
        zoned("n2", "zoneB"),
        zoned("n3", "zoneC"),
    ]
}

fn os_nodes(n: usize) -> Vec<Node> {
    let names = [
        "linNodeA", "linNodeB", "linNodeC", "winNodeA", "winNodeB", "winNodeC", "winNodeD",
    ];
    (0..n)
        .map(|i| {
            let os = if i < 3 { "linux" } else { "windows" };
            node(
                &format!("n{}", i + 1),
                2000,
                3000,
                10,
                json!({"metadata": {"labels": {"node": names[i], "os": os}}}),
            )
        })
        .collect()
}

fn tainted(name: &str, zone: &str, effect: &str) -> Node {
    node(
        name,
        2000,
        3000,
        10,
        json!({"metadata": {"labels": {"zone": zone}},
        "spec": {"taints": [{"key": "taint-test", "value": "test", "effect": effect}]}}),
    )
}

struct Case {
    name: &'static str,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    args: Value,
    node_fit: bool,
    want: usize,
    want_pods: &'static [&'static str],
}

fn case(name: &'static str, nodes: Vec<Node>, pods: Vec<L>, want: usize) -> Case {
    Case {
        name,
        nodes,
        pods: create(pods),
        args: json!({}),
        node_fit: false,
        want,
        want_pods: &[],
    }
}

impl Case {
    fn args(mut self, a: Value) -> Case {
        self.args = a;
        self
    }
    fn fit(mut self) -> Case {
        self.node_fit = true;
        self
    }
    fn pods(mut self, p: &'static [&'static str]) -> Case {
        self.want_pods = p;
        self
    }
}

fn label_filter(op: &str, values: &[&str]) -> Value {
    json!({"labelSelector": {"matchExpressions": [{"key": "foo", "operator": op, "values": values}]}})
}

fn both() -> Value {
    json!({"constraints": ["DoNotSchedule", "ScheduleAnyway"]})
}

fn cases_a() -> Vec<Case> {
    let soft = tsc(1, json!({"whenUnsatisfiable": "ScheduleAnyway"}));
    let node_key = |s| tsc(s, json!({"topologyKey": "node"}));
    let win = json!({"os": "windows"});
    let affinity = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}}}}});
    let boston = |n: &str, z: &str| {
        node(
            n,
            2000,
            3000,
            10,
            json!({"metadata": {"labels": {"zone": z, "region": "boston"}}}),
        )
    };
    vec![
        case("2 domains, sizes [2,1], maxSkew=1, move 0 pods", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none()), l(1, "n2", none())], 0),
        case("2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2]", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(2, "n1", none()), l(1, "n2", none())], 1),
        case("2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2] (both constraints)", ab(),
            vec![l(1, "n1", soft.clone()), l(2, "n1", none()), l(1, "n2", none())], 1).args(both()),
        case("2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2] (soft constraints)", ab(),
            vec![l(1, "n1", soft), l(2, "n1", none()), l(1, "n2", none())], 1).args(both()),
        case("2 domains, sizes [3,1], maxSkew=1, no pods eligible, move 0 pods", ab(),
            vec![l(1, "n1", tsc(1, json!({}))).no_owners(), l(2, "n1", none()).no_owners(), l(1, "n2", none()).no_owners()], 0),
        case("2 domains, sizes [3,1], maxSkew=1, move 1 pod to achieve [2,2], exclude kube-system namespace", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(2, "n1", none()), l(1, "n2", none())], 1)
            .args(json!({"namespaces": {"exclude": ["kube-system"]}})).fit(),
        case("2 domains, sizes [5,2], maxSkew=1, move 1 pod to achieve [4,3]", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(4, "n1", none()), l(2, "n2", none())], 1),
        case("2 domains, sizes [4,0], maxSkew=1, move 2 pods to achieve [2,2]", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(3, "n1", none())], 2),
        case("2 domains, sizes [4,0], maxSkew=1, only move 1 pod since pods with nodeSelector and nodeAffinity aren't evicted", ab(),
            vec![l(1, "n1", tsc(1, json!({}))).selector(json!({"zone": "zoneA"})),
                l(1, "n1", tsc(1, json!({}))).selector(json!({"zone": "zoneA"})),
                l(1, "n1", tsc(1, json!({}))).extra(affinity), l(1, "n1", tsc(1, json!({})))], 1).fit(),
        case("6 domains, sizes [0,0,0,3,3,2], maxSkew=1, No pod is evicted since topology is balanced", os_nodes(6),
            vec![l(3, "n4", node_key(1)).selector(win.clone()), l(3, "n5", node_key(1)).selector(win.clone()),
                l(2, "n6", node_key(1)).selector(win.clone())], 0),
        case("7 domains, sizes [0,0,0,3,3,2], maxSkew=1, two pods are evicted and moved to new node added", os_nodes(7),
            vec![l(3, "n4", node_key(1)).selector(win.clone()), l(3, "n5", node_key(1)).selector(win.clone()),
                l(2, "n6", node_key(1)).selector(win.clone())], 2),
        case("6 domains, sizes [0,0,0,4,3,1], maxSkew=1, 1 pod is evicted from node 4", os_nodes(6),
            vec![l(4, "n4", node_key(1)).selector(win.clone()), l(3, "n5", node_key(1)).selector(win.clone()),
                l(1, "n6", node_key(1)).selector(win.clone())], 1),
        case("6 domains, sizes [0,0,0,4,3,1], maxSkew=1, 0 pod is evicted as pods of node:winNodeA can only be scheduled on this node and nodeFit is true ",
            os_nodes(6),
            vec![l(4, "n4", node_key(1)).selector(json!({"node": "winNodeA"})), l(3, "n5", node_key(1)).selector(win.clone()),
                l(1, "n6", node_key(1)).selector(win)], 0).fit(),
        case("2 domains, sizes [4,0], maxSkew=1, move 2 pods since selector matches multiple nodes",
            vec![boston("n1", "zoneA"), boston("n2", "zoneB")],
            vec![l(1, "n1", tsc(1, json!({}))).selector(json!({"region": "boston"})),
                l(3, "n1", none()).selector(json!({"region": "boston"}))], 2),
        case("3 domains, sizes [0, 1, 100], maxSkew=1, move 66 pods to get [34, 33, 34]", abc(),
            vec![l(1, "n2", tsc(1, json!({}))), l(100, "n3", none())], 66),
        case("4 domains, sizes [0, 1, 3, 5], should move 3 to get [2, 2, 3, 2]",
            vec![zoned("n1", "zoneA"), zoned("n2", "zoneB"), zoned("n3", "zoneC"), zoned("n4", "zoneD")],
            vec![l(1, "n2", tsc(1, json!({}))), l(3, "n3", none()), l(5, "n4", none())], 3),
        case("2 domains size [2 6], maxSkew=2, should move 1 to get [3 5]", ab(),
            vec![l(1, "n1", tsc(2, json!({}))), l(1, "n1", none()), l(6, "n2", none())], 1),
        case("2 domains size [2 6], maxSkew=2, can't move any because of node taints",
            vec![node("n1", 2000, 3000, 10, json!({"metadata": {"labels": {"zone": "zoneA"}},
                "spec": {"taints": [{"key": "hardware", "value": "gpu", "effect": "NoSchedule"}]}})), zoned("n2", "zoneB")],
            vec![l(1, "n1", tsc(2, json!({}))), l(1, "n1", none()), l(6, "n2", none())], 0).fit(),
        case("2 domains size [2 6], maxSkew=2, can't move any because node1 does not have enough CPU",
            vec![node("n1", 200, 3000, 10, json!({"metadata": {"labels": {"zone": "zoneA"}}})), zoned("n2", "zoneB")],
            vec![l(1, "n1", tsc(2, json!({}))), l(1, "n1", none()), l(6, "n2", none())], 0).fit(),
    ]
}

fn cases_b() -> Vec<Case> {
    let whoami = json!([
        {"labelSelector": {"matchLabels": {"app": "whoami"}}, "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
        {"labelSelector": {"matchLabels": {"app": "whoami"}}, "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]);
    let host = |n: &str, z: &str| {
        node(
            n,
            2000,
            3000,
            10,
            json!({"metadata": {"labels": {"topology.kubernetes.io/zone": z, "kubernetes.io/hostname": n}}}),
        )
    };
    let app = json!({"app": "whoami"});
    let hash = |s: i32| tsc(s, json!({"matchLabelKeys": ["pod-template-hash"]}));
    let rs = |h: &str| json!({"foo": "bar", "pod-template-hash": h});
    let tolerating = json!({"spec": {"tolerations": [{"key": "taint-test", "value": "test", "operator": "Equal", "effect": "NoSchedule"}]}});
    let terminating = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
    let zone_a = json!({"zone": "zoneA"});
    vec![
        case("Multiple constraints (6 nodes/2 zones, 4 pods)",
            vec![host("n1", "zoneA"), host("n2", "zoneA"), host("n3", "zoneA"), host("n4", "zoneB"), host("n5", "zoneB"), host("n6", "zoneB")],
            ["n1", "n2", "n3", "n4"].map(|n| l(1, n, whoami.clone()).labels(app.clone())).into(), 1).args(both()),
        case("3 domains size [8 7 0], maxSkew=1, should move 5 to get [5 5 5]", abc(),
            vec![l(8, "n1", tsc(1, json!({}))), l(7, "n2", tsc(1, json!({})))], 5)
            .pods(&["pod-5", "pod-6", "pod-7", "pod-8", "pod-9"]),
        case("3 domains size [5 5 5], maxSkew=1, should move 0 to retain [5 5 5]", abc(),
            vec![l(5, "n1", tsc(1, json!({}))), l(5, "n2", tsc(1, json!({}))), l(5, "n3", tsc(1, json!({})))], 0),
        case("2 domains, sizes [2,0], maxSkew=1, move 1 pod since pod tolerates the node with taint",
            vec![zoned("n1", "zoneA"), tainted("n2", "zoneB", "NoSchedule")],
            vec![l(1, "n1", tsc(1, json!({}))).extra(tolerating), l(1, "n1", none()).selector(zone_a.clone())], 1)
            .pods(&["pod-0"]),
        case("2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the tainted node",
            vec![zoned("n1", "zoneA"), tainted("n2", "zoneB", "NoSchedule")],
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none()).selector(zone_a.clone())], 0),
        case("2 domains, sizes [2,0], maxSkew=1, move 0 pods since pod does not tolerate the tainted node, and NodeFit is enabled",
            vec![zoned("n1", "zoneA"), tainted("n2", "zoneB", "NoSchedule")],
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none()).selector(zone_a.clone())], 0).fit(),
        case("2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with PreferNoSchedule Taint",
            vec![zoned("n1", "zoneA"), tainted("n2", "zoneB", "PreferNoSchedule")],
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none()).selector(zone_a)], 1).pods(&["pod-0"]),
        case("2 domains, sizes [2,0], maxSkew=1, move 0 pod for node with unmatched label filtering", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none())], 0).args(label_filter("In", &["baz"])),
        case("2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label filtering", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none())], 1).args(label_filter("In", &["bar"])).pods(&["pod-1"]),
        case("2 domains, sizes [2,0], maxSkew=1, move 1 pod for node with matched label filtering (NotIn op)", ab(),
            vec![l(1, "n1", tsc(1, json!({}))), l(1, "n1", none())], 1).args(label_filter("NotIn", &["baz"])).pods(&["pod-1"]),
        case("2 domains, sizes [2,0], maxSkew=1, move 1 pods given matchLabelKeys on same replicaset", ab(),
            vec![l(1, "n1", hash(1)).labels(rs("foo")), l(1, "n1", hash(1)).labels(rs("foo"))], 1)
            .args(label_filter("NotIn", &["baz"])).pods(&["pod-1"]),
        case("2 domains, sizes [2,0], maxSkew=1, move 0 pods given matchLabelKeys on two different replicasets", ab(),
            vec![l(1, "n1", hash(1)).labels(rs("foo")), l(1, "n1", hash(1)).labels(rs("bar"))], 0)
            .args(label_filter("NotIn", &["baz"])),
        case("2 domains, sizes [4,2], maxSkew=1, 2 pods in termination; nothing should be moved", ab(),
            vec![l(2, "n1", tsc(1, json!({}))), l(2, "n1", tsc(1, json!({}))).extra(terminating), l(2, "n2", tsc(1, json!({})))], 0)
            .args(label_filter("In", &["bar"])),
    ]
}

fn cases_c() -> Vec<Case> {
    let three = || {
        vec![
            sized("n1", 250, "zoneA"),
            sized("n2", 1000, "zoneB"),
            sized("n3", 1000, "zoneC"),
        ]
    };
    let t = || tsc(1, json!({}));
    let hostname = |h: &str| {
        json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "service"}}}]).to_string().replace("HOST", h)
    };
    let app_service = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "app_service", "operator": "Exists"}]}]}}}}});
    let svc = json!({"app.kubernetes.io/name": "service"});
    let labelled = |n: &str, extra: Value| node(n, 2000, 3000, 10, extra);
    let arm = |n: &str, z: &str| {
        node(
            n,
            1000,
            2000,
            9,
            json!({"metadata": {"labels": {"zone": z, "kubernetes.io/arch": "arm64"}}}),
        )
    };
    let ignore = || tsc(1, json!({"nodeAffinityPolicy": "Ignore"}));
    vec![
        case("3 domains, sizes [2,3,4], maxSkew=1, NodeFit is enabled, and not enough cpu on zoneA; nothing should be moved", three(),
            vec![l(2, "n1", t()), l(3, "n2", t()), l(4, "n3", t())], 0).fit(),
        case("3 domains, sizes [2,3,4], maxSkew=1, args.NodeFit is false, and not enough cpu on zoneA; 1 should be moved to force scale-up", three(),
            vec![l(2, "n1", t()), l(3, "n2", t()), l(4, "n3", t())], 1).args(json!({"topologyBalanceNodeFit": false})).fit(),
        case("3 domains, sizes [[1,0], [1,1], [2,1]], maxSkew=1, NodeFit is enabled, and not enough cpu on ZoneA; nothing should be moved",
            vec![sized("A1", 150, "zoneA"), sized("B1", 1000, "zoneB"), sized("C1", 1000, "zoneC"),
                sized("A2", 50, "zoneA"), sized("B2", 1000, "zoneB"), sized("C2", 1000, "zoneC")],
            vec![l(1, "A1", t()), l(1, "B1", t()), l(1, "B2", t()), l(2, "C1", t()), l(1, "C2", t())], 0).fit(),
        case("2 domains, sizes [[1,4], [2,1]], maxSkew=1, NodeFit is enabled; should move 1",
            vec![sized("A1", 1000, "zoneA"), sized("A2", 1000, "zoneA"), sized("B1", 1000, "zoneB"), sized("B2", 1000, "zoneB")],
            vec![l(1, "A1", t()), l(4, "A2", t()), l(2, "B1", t()), l(1, "B2", t())], 1).fit().pods(&["pod-4"]),
        case("2 domains, sizes [3, 1], maxSkew=1, Tainted nodes; nothing should be moved",
            vec![
                labelled("controlplane1", json!({"metadata": {"labels": {"zone": "zoneA", "kubernetes.io/hostname": "cp-1"}},
                    "spec": {"taints": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/controlplane", "value": "true"},
                        {"effect": "NoSchedule", "key": "node-role.kubernetes.io/etcd", "value": "true"}]}})),
                labelled("infraservices1", json!({"metadata": {"labels": {"zone": "zoneA", "infra_service": "true", "kubernetes.io/hostname": "infra-1"}},
                    "spec": {"taints": [{"effect": "NoSchedule", "key": "infra_service"}]}})),
                labelled("app1", json!({"metadata": {"labels": {"zone": "zoneA", "app_service": "true", "kubernetes.io/hostname": "app-1"}}})),
                labelled("app2", json!({"metadata": {"labels": {"zone": "zoneB", "app_service": "true", "kubernetes.io/hostname": "app-2"}}})),
            ],
            vec![
                l(2, "app1", serde_json::from_str(&hostname("")).unwrap()).labels(svc.clone()).extra(app_service.clone()),
                l(2, "app2", serde_json::from_str(&hostname("")).unwrap()).labels(svc).extra(app_service),
            ], 0).fit(),
        case("3 domains, sizes [2, 1, 0] with selectors, maxSkew=1, nodeTaintsPolicy=Ignore, should move 1 for [1, 1, 1]",
            vec![arm("A1", "zoneA"), arm("B1", "zoneB"), arm("C1", "zoneC")],
            vec![l(1, "A1", ignore()).selector(json!({"kubernetes.io/arch": "arm64"})),
                l(1, "A1", ignore()).selector(json!({"zone": "zoneA", "kubernetes.io/arch": "arm64"})),
                l(1, "B1", ignore()).selector(json!({"kubernetes.io/arch": "arm64"}))], 1).pods(&["pod-0"]),
    ]
}

#[test]
fn topology_spread_constraint() {
    for c in [cases_a(), cases_b(), cases_c()].into_iter().flatten() {
        let r = pass(
            "RemovePodsViolatingTopologySpreadConstraint",
            "balance",
            c.args,
            json!({"nodeFit": c.node_fit}),
            c.nodes,
            c.pods,
        );
        assert_eq!(r.evictions.len(), c.want, "{}: {:?}", c.name, evicted(&r));
        let got = evicted(&r);
        for p in c.want_pods {
            assert!(
                got.iter().any(|g| g == p),
                "{}: {p} not evicted ({got:?})",
                c.name
            );
        }
    }
}

#[test]
fn constraints_outside_the_two_kinds_are_refused() {
    let e = super::super::Upstream::new(
        "RemovePodsViolatingTopologySpreadConstraint",
        &json!({"constraints": ["Sometimes"]}),
    )
    .err()
    .expect("refused");
    assert!(
        e.to_string().contains("constraint Sometimes is not one of"),
        "{e}"
    );
}
