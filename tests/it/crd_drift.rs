//! `manifests/` must be exactly what `koord manifests` generates from the code (CRDs from
//! the Rust types, RBAC, workloads, overlays, dashboards). Regenerate with
//! `cargo run -- manifests --out-dir manifests` (or `just manifests`).

use std::path::{Path, PathBuf};

fn files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p: PathBuf = e.path();
        if p.is_dir() {
            files(&p, root, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

#[test]
fn committed_manifests_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let mut expected = Vec::new();
    for m in koord::manifests::all() {
        let path = dir.join(&m.path);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `just manifests`", path.display()));
        assert!(
            committed == m.text,
            "manifests/{} drifted from the code; run `just manifests`",
            m.path
        );
        expected.push(m.path);
    }
    let mut present = Vec::new();
    files(&dir, &dir, &mut present);
    present.sort();
    expected.sort();
    assert_eq!(
        present, expected,
        "manifests/ holds files that koord does not generate"
    );
}

#[test]
fn base_kustomization_lists_every_crd() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/kustomization.yaml"),
    )
    .unwrap();
    for crd in koord::api::crds::all() {
        let name = format!("crds/{}", koord::api::crds::file_name(&crd));
        assert!(text.contains(&name), "kustomization.yaml misses {name}");
    }
}
