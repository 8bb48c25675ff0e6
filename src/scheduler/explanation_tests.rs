use super::*;

fn detail(plugin: &str, reason: &str, help: bool, nodes: &[&str]) -> NodeFailedDetail {
    NodeFailedDetail {
        failed_plugin: Some(plugin.into()),
        reason: Some(reason.into()),
        preempt_might_help: Some(help),
        failed_nodes: Some(nodes.iter().map(|n| n.to_string()).collect()),
    }
}

/// Koordinator's `TestSortNodeFailedDetails` (apis/extension/schedule_explanation_test.go).
#[test]
fn test_sort_node_failed_details() {
    let d = detail;
    let cases: Vec<(&str, Vec<NodeFailedDetail>, Vec<NodeFailedDetail>)> = vec![
        ("empty slice", vec![], vec![]),
        (
            "single element",
            vec![d("pluginA", "reason1", true, &["node1", "node3", "node2"])],
            vec![d("pluginA", "reason1", true, &["node1", "node2", "node3"])],
        ),
        (
            "multiple elements with different plugins",
            vec![
                d("pluginC", "reason2", false, &["node3", "node1"]),
                d("pluginA", "reason1", true, &["node2", "node1"]),
                d("pluginB", "reason3", false, &["node1", "node2"]),
            ],
            vec![
                d("pluginA", "reason1", true, &["node1", "node2"]),
                d("pluginB", "reason3", false, &["node1", "node2"]),
                d("pluginC", "reason2", false, &["node1", "node3"]),
            ],
        ),
        (
            "same plugin, different reasons",
            vec![
                d("pluginA", "reasonZ", true, &["node2", "node1"]),
                d("pluginA", "reasonA", false, &["node1", "node2"]),
            ],
            vec![
                d("pluginA", "reasonA", false, &["node1", "node2"]),
                d("pluginA", "reasonZ", true, &["node1", "node2"]),
            ],
        ),
        (
            "same plugin and reason, different preempt help",
            vec![
                d("pluginA", "reason1", false, &["node1", "node2"]),
                d("pluginA", "reason1", true, &["node3", "node1", "node2"]),
            ],
            vec![
                d("pluginA", "reason1", true, &["node1", "node2", "node3"]),
                d("pluginA", "reason1", false, &["node1", "node2"]),
            ],
        ),
    ];
    for (name, mut input, expected) in cases {
        sort_node_failed_details(&mut input);
        assert_eq!(input, expected, "{name}");
    }
}

#[test]
fn no_pod_answers_to_an_unknown_key() {
    let s = not_found("default/nope");
    assert_eq!(s.schedulable, Some(false));
    assert!(s.failed_message.unwrap().contains("default/nope"));
}

#[test]
fn a_bound_pod_is_answered_with_its_node() {
    let s = bound("default/web", "n3");
    let r = &s.detailed_explanation.unwrap()[0];
    let f = &r
        .schedule_explanation
        .as_ref()
        .unwrap()
        .feasible_scheduling_result;
    assert_eq!(f.as_ref().unwrap()[0].node_name.as_deref(), Some("n3"));
    assert_eq!(f.as_ref().unwrap()[0].name.as_deref(), Some("web"));
}
