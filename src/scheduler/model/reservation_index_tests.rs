//! After Koordinator's `TestReservationCache_SelectorIndex*` cases: prefixes and exact keys,
//! exact wins, empty buckets short-circuit, removal, blank and duplicate config entries.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn index() -> SelectorIndex {
    let args = IndexArgs {
        enabled: true,
        key_prefixes: vec![
            " team.example.com/".into(),
            "team.example.com/".into(),
            "".into(),
        ],
        keys: vec!["tenant".into(), " ".into()],
    };
    let mut ix = SelectorIndex::new(&args).unwrap();
    ix.add(
        "r1",
        Some("n1"),
        &labels(&[("team.example.com/a", "x"), ("tenant", "t1")]),
    );
    ix.add("r2", Some("n2"), &labels(&[("team.example.com/b", "y")]));
    ix.add("r3", Some("n2"), &labels(&[("tenant", "t2")]));
    ix.add("pending", None, &labels(&[("tenant", "t1")]));
    ix
}

fn names(ix: &SelectorIndex, sel: &[(&str, &str)]) -> Option<(usize, Vec<String>)> {
    let c = ix.candidates(&labels(sel))?;
    let mut n: Vec<String> = c.names().cloned().collect();
    n.sort();
    Some((c.nodes(), n))
}

#[test]
fn disabled_or_empty_config_builds_no_index() {
    assert!(SelectorIndex::new(&IndexArgs::default()).is_none());
    let blank = IndexArgs {
        enabled: true,
        key_prefixes: vec![" ".into()],
        keys: vec![],
    };
    assert!(SelectorIndex::new(&blank).is_none());
}

#[test]
fn prefix_and_exact_buckets() {
    let ix = index();
    assert_eq!(
        names(&ix, &[("team.example.com/a", "x")]),
        Some((2, vec!["r1".into(), "r2".into()])),
        "a prefix bucket holds every reservation with a key under it"
    );
    assert_eq!(
        names(&ix, &[("tenant", "t1")]),
        Some((1, vec!["r1".into()]))
    );
    // The smallest bucket of several keys.
    assert_eq!(
        names(&ix, &[("team.example.com/a", "x"), ("tenant", "t2")]),
        Some((1, vec!["r3".into()]))
    );
    // No configured key in the selector: a miss, every reservation is a candidate.
    assert_eq!(names(&ix, &[("other", "v")]), None);
    // An indexed key with a value no reservation carries: a hit with no candidate.
    assert_eq!(names(&ix, &[("tenant", "t9")]), Some((0, vec![])));
}

#[test]
fn removal_and_relabel_leave_no_stale_entries() {
    let mut ix = index();
    ix.remove("r2");
    assert_eq!(
        names(&ix, &[("team.example.com/b", "y")]),
        Some((1, vec!["r1".into()]))
    );
    ix.add("r1", Some("n3"), &labels(&[("tenant", "t1")]));
    assert_eq!(
        names(&ix, &[("team.example.com/a", "x")]),
        Some((0, vec![]))
    );
    assert_eq!(
        names(&ix, &[("tenant", "t1")]),
        Some((1, vec!["r1".into()]))
    );
}
