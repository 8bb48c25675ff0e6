//! Preemption as kube-scheduler's DefaultPreemption: `koord explain schedule` nominates the
//! node whose victims no PodDisruptionBudget protects and shows the nomination.

use crate::common;

use serde_json::json;

#[test]
fn explain_nominates_the_node_whose_victims_no_pdb_protects() {
    let snap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/preemption-pdb-snapshot.yaml"
    );
    let v = common::explain_schedule(snap);
    let urgent = &v["pods"][0];
    assert!(urgent["node"].is_null(), "{urgent}");
    assert_eq!(
        urgent["preemption"],
        json!({"node": "node-b", "victims": ["default/batch-0"]}),
        "node-a's pod is protected by its PDB; without it node-a would win (its victim started later)"
    );
}
