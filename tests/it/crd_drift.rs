//! `manifests/crds/` must match what the Rust types generate. Regenerate with
//! `cargo run -- crds --out-dir manifests/crds` (or `just crds`).

use std::path::Path;

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds");
    let mut expected: Vec<String> = Vec::new();
    for crd in koord::api::crds::all() {
        let name = koord::api::crds::file_name(&crd);
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `just crds`", path.display()));
        assert_eq!(
            committed,
            koord::api::crds::to_yaml(&crd),
            "{name} drifted from the Rust types; run `just crds`"
        );
        expected.push(name);
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    present.sort();
    expected.sort();
    assert_eq!(
        present, expected,
        "manifests/crds holds files that no type generates"
    );
}

#[test]
fn kustomization_lists_every_manifest() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let v: serde_yaml::Value = serde_yaml::from_str(&kustomization).unwrap();
    let listed: Vec<String> = v["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    for crd in koord::api::crds::all() {
        let name = format!("crds/{}", koord::api::crds::file_name(&crd));
        assert!(listed.contains(&name), "kustomization.yaml misses {name}");
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(listed.contains(&name), "kustomization.yaml misses {name}");
        }
    }
}
