use super::*;

/// The pages in `docs/reference/` are what `koord docs` writes today.
#[test]
fn reference_pages_match_the_code() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference");
    let mut stale = Vec::new();
    for p in all() {
        let path = dir.join(p.path);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != p.text {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {stale:?}; run `cargo run -- docs --out-dir docs/reference`"
    );
}

#[test]
fn every_configuration_key_is_in_the_reference() {
    let page = configuration::page();
    for key in [
        "common.adminAddr",
        "common.nodeName",
        "common.dataDir",
        "embedded.watchHistory",
        "koordlet.kubelet.podsUrl",
    ] {
        assert!(page.contains(&format!("| `{key}` |")), "{key} missing");
    }
    // The meaning comes from the comment above the key in config/koord.yaml.
    assert!(page.contains("| `common.adminAddr` | `127.0.0.1:9316` | Admin endpoint"));
    assert!(page.contains("| `common.nodeName` | from the host | this node's name."));
}

#[test]
fn flags_gates_and_metrics_are_listed_with_their_details() {
    let flags = flags::page();
    assert!(flags.contains("| `--role ROLES` |"), "{flags}");
    assert!(flags.contains("| `-cgroup-root-dir` | sets `koordlet.cgroupRoot` (text) |"));
    assert!(flags.contains("## `--role=runtime-proxy`"));
    let gates = gates::page();
    assert!(
        gates.contains("| `BECPUSuppress` | true | yes |"),
        "{gates}"
    );
    let metrics = metrics::page();
    assert!(
        metrics.contains(
            "| `slo_controller_node_extended_resource_allocatable_internal` | gauge | `node`, `resource`, `unit` | koord / colocation: Batch CPU allocatable (cores) per node;"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("| `process_cpu_seconds_total` | counter |"));
    assert!(metrics.contains(
        "| `descheduler_pods_evicted` | counter | `result`, `strategy`, `namespace`, `node` |"
    ));
}

/// A key added to the configuration types gets a comment in config/koord.yaml, or the
/// reference would show it without a meaning.
#[test]
fn every_configuration_key_has_a_meaning() {
    let page = configuration::page();
    let bare: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("| `") && l.ends_with("|  |"))
        .collect();
    assert!(
        bare.is_empty(),
        "keys without a comment in config/koord.yaml: {bare:#?}"
    );
}
