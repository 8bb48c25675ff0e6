//! `koord explain noderesource` as a black box: JSON contract, `--now`, degradation,
//! malformed input.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn explain(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::koord_bin())
        .arg("explain")
        .arg("noderesource")
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

const SNAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/noderesource-snapshot.yaml"
);

#[test]
fn json_contract_and_degradation_window() {
    let (code, out, err) = explain(&["-f", SNAP, "--now", "2026-11-22T10:15:00Z"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let n = &v["nodes"][0];
    assert_eq!(n["node"], "node-1");
    assert_eq!(
        n["degraded"], false,
        "exactly degradeTimeMinutes old is not degraded"
    );
    // 16000 - 40% - max(500, 1000) - 0
    assert_eq!(n["allocatable"]["kubernetes.io/batch-cpu"], 8600);
    assert_eq!(
        n["allocatable"]["kubernetes.io/mid-cpu"], 0,
        "computed 0 is present"
    );

    let (_, out, _) = explain(&["-f", SNAP, "--now", "2026-11-22T10:15:01Z"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"][0]["degraded"], true);
    assert_eq!(
        v["nodes"][0]["allocatable"],
        serde_json::json!({}),
        "removed resources are absent"
    );

    let (code, text, _) = explain(&["-f", SNAP, "--now", "2026-11-22T10:05:00Z", "-o", "text"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("safety margin") && text.contains("8600"),
        "{text}"
    );
}

#[test]
fn malformed_input_names_file_document_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\nstatus: {capacity: [1]}\n").unwrap();
    let (code, _, err) = explain(&["-f", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.yaml: document 2 (Node b)"), "{err}");
    let (code, _, err) = explain(&["-f", SNAP, "--now", "yesterday"]);
    assert_eq!(code, 1);
    assert!(err.contains("--now"), "{err}");
}

/// An unparsable usage is an error naming file, object and field; an overflowing one is
/// capped as Kubernetes caps it, so the node reads as full, never as idle.
#[test]
fn invalid_and_overflowing_quantities() {
    let dir = tempfile::tempdir().unwrap();
    let snap = std::fs::read_to_string(SNAP).unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        snap.replace("cpu: \"6\", memory: 20Gi", "cpu: abc, memory: 20Gi"),
    )
    .unwrap();
    let (code, _, err) = explain(&["-f", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.yaml: document")
            && err.contains("nodeUsage.resources[cpu]: invalid quantity \"abc\""),
        "{err}"
    );
    let huge = dir.path().join("huge.yaml");
    std::fs::write(
        &huge,
        snap.replace("cpu: 500m, memory: 1Gi", "cpu: 1e400, memory: 1Gi"),
    )
    .unwrap();
    let (code, out, err) = explain(&[
        "-f",
        huge.to_str().unwrap(),
        "--now",
        "2026-11-22T10:15:00Z",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let batch = &v["nodes"][0]["allocatable"]["kubernetes.io/batch-cpu"];
    assert_eq!(
        batch, 0,
        "a node using 2^63-1 cores has no batch capacity: {out}"
    );
    let deep = dir.path().join("deep.yaml");
    std::fs::write(
        &deep,
        format!(
            "kind: Node\nmetadata: {{name: d}}\nx: {}1{}\n",
            "[".repeat(500),
            "]".repeat(500)
        ),
    )
    .unwrap();
    let (code, _, err) = explain(&["-f", deep.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("deep.yaml") && err.contains("nested deeper"),
        "{err}"
    );
}
