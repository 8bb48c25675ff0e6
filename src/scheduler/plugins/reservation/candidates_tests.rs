//! `reservationSelectorIndex` through Reservation's PreFilter: the same matches with the
//! index on as off, the query recorded as a hit (with its candidate nodes) or a miss.

use std::sync::Arc;

use serde_json::{Value, json};

use super::INDEX_QUERY;
use crate::scheduler::framework::runtime::Framework;
use crate::scheduler::framework::{ClusterState, CycleState};
use crate::scheduler::test_util::{cluster, node_json, pod};

fn framework(index: Value) -> Framework {
    let mut p = crate::scheduler::config::default_config()
        .unwrap()
        .profiles
        .remove(0);
    p.args.insert(
        "Reservation".into(),
        json!({"reservationSelectorIndex": index}),
    );
    crate::scheduler::config::framework(&p).unwrap()
}

fn setup(fw: &Framework) -> ClusterState {
    let nodes = (1..=4).map(|i| node_json(&format!("n{i}"), "8", "32Gi"));
    let mut c = cluster(nodes.collect());
    fw.setup(&mut c);
    for (name, node, labels) in [
        (
            "r1",
            "n1",
            json!({"team.example.com/pool": "a", "tenant": "t1"}),
        ),
        ("r2", "n2", json!({"team.example.com/pool": "b"})),
        ("r3", "n3", json!({"tenant": "t2"})),
        ("r4", "n4", json!({})),
    ] {
        let v = json!({"metadata": {"name": name, "uid": name, "labels": labels},
            "spec": {"owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}},
            "status": {"phase": "Available", "nodeName": node, "allocatable": {"cpu": "4"}}});
        c.upsert_reservation(Arc::new(serde_json::from_value(v).unwrap()));
    }
    c
}

/// The nodes Reservation's PreFilter allows the pod with `selector`, and its index query.
fn allowed(
    fw: &Framework,
    c: &ClusterState,
    selector: Value,
) -> (Vec<String>, Option<Option<usize>>) {
    let aff = json!({"reservationSelector": selector}).to_string();
    let p = pod(
        json!({"metadata": {"name": "web", "namespace": "d", "uid": "web",
            "labels": {"app": "web"},
            "annotations": {"scheduling.koordinator.sh/reservation-affinity": aff}},
        "spec": {"schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    let plugin = &fw.by_name["Reservation"];
    let mut state = CycleState::default();
    let (_, nodes) = plugin.pre_filter(&mut state, &p, c);
    let mut nodes: Vec<String> = nodes.unwrap_or_default().into_iter().collect();
    nodes.sort();
    (nodes, state.read::<Option<usize>>(INDEX_QUERY).copied())
}

#[test]
fn the_index_narrows_candidates_without_changing_matches() {
    let on = framework(
        json!({"enabled": true, "keyPrefixes": ["team.example.com/"], "keys": ["tenant"]}),
    );
    let off = framework(json!({"enabled": false, "keyPrefixes": ["team.example.com/"]}));
    let (c_on, c_off) = (setup(&on), setup(&off));
    for (selector, query) in [
        (json!({"team.example.com/pool": "a"}), Some(Some(2))),
        (json!({"tenant": "t2"}), Some(Some(1))),
        (
            json!({"team.example.com/pool": "b", "tenant": "t1"}),
            Some(Some(1)),
        ),
        (json!({"tenant": "nobody"}), Some(Some(0))),
        (json!({"other": "x"}), Some(None)),
    ] {
        let (with, q) = allowed(&on, &c_on, selector.clone());
        let (without, q_off) = allowed(&off, &c_off, selector.clone());
        assert_eq!(with, without, "{selector}: the index only narrows");
        assert_eq!(q, query, "{selector}");
        assert_eq!(q_off, None, "no index, no query");
    }
    let (nodes, _) = allowed(&on, &c_on, json!({"team.example.com/pool": "a"}));
    assert_eq!(nodes, ["n1"]);
}

#[test]
fn a_reservation_leaving_leaves_the_index() {
    let fw = framework(json!({"enabled": true, "keys": ["tenant"]}));
    let mut c = setup(&fw);
    c.remove_reservation("r3");
    assert_eq!(
        allowed(&fw, &c, json!({"tenant": "t2"})),
        (vec![], Some(Some(0)))
    );
}
