use super::*;

fn share(name: &str, weight: i64, request: i64, min: i64) -> Share {
    Share {
        name: name.into(),
        min,
        request,
        weight,
        lends: true,
    }
}

fn amounts(cpu: i64) -> Amounts {
    Amounts::from([("cpu".to_string(), cpu)])
}

fn quota(name: &str, parent: Option<&str>, min: i64, max: i64, request: i64) -> Quota {
    Quota {
        name: name.into(),
        parent: parent.map(Into::into),
        min: amounts(min),
        max: amounts(max),
        weight: None,
        pods_request: amounts(request),
        lends: true,
    }
}

#[test]
fn koordinators_iteration_example() {
    // TestRuntimeQuotaCalculator_IterationAdjustQuota, case 1.
    let kids = [
        share("A", 40, 5, 10),
        share("B", 60, 20, 15),
        share("C", 50, 40, 20),
        share("D", 80, 70, 15),
    ];
    assert_eq!(distribute(100, &kids), [5, 20, 35, 40]);
}

#[test]
fn table() {
    struct Case {
        what: &'static str,
        total: i64,
        kids: Vec<Share>,
        want: Vec<i64>,
    }
    let not_lending = Share {
        lends: false,
        ..share("idle", 10, 0, 30)
    };
    let cases = [
        Case {
            what: "leftover units go to the largest remainders, ties by name",
            total: 10,
            kids: vec![
                share("b", 1, 100, 0),
                share("a", 1, 100, 0),
                share("c", 1, 100, 0),
            ],
            want: vec![3, 4, 3],
        },
        Case {
            what: "a quota that does not lend keeps its min while idle",
            total: 100,
            kids: vec![not_lending, share("busy", 10, 100, 0)],
            want: vec![30, 70],
        },
        Case {
            what: "weight 0 never gets more than its min",
            total: 100,
            kids: vec![share("zero", 0, 100, 10), share("one", 1, 50, 10)],
            want: vec![10, 50],
        },
        Case {
            what: "everyone satisfied: the rest stays with the parent",
            total: 100,
            kids: vec![share("a", 1, 20, 10), share("b", 1, 30, 10)],
            want: vec![20, 30],
        },
        Case {
            what: "nothing to share",
            total: 0,
            kids: vec![share("a", 1, 20, 10)],
            want: vec![10],
        },
    ];
    for c in cases {
        assert_eq!(distribute(c.total, &c.kids), c.want, "{}", c.what);
    }
}

#[test]
fn mins_over_the_total_are_scaled_down() {
    assert_eq!(scale_mins(100, &[60, 60]), [50, 50]);
    assert_eq!(scale_mins(100, &[30, 90]), [25, 75]);
    assert_eq!(
        scale_mins(100, &[30, 40]),
        [30, 40],
        "within the total: kept"
    );
    assert_eq!(scale_mins(0, &[10]), [0]);
    let shares: Vec<Share> = scale_mins(100, &[60, 60])
        .into_iter()
        .zip(["x", "y"])
        .map(|(min, n)| share(n, 1, 100, min))
        .collect();
    assert_eq!(distribute(100, &shares), [50, 50], "min overcommit");
}

#[test]
fn a_tree_gives_each_parent_its_runtime_to_share() {
    let quotas = [
        quota("p", None, 40, 100, 0),
        quota("p1", Some("p"), 10, 100, 50),
        quota("p2", Some("p"), 10, 100, 10),
        quota("q", None, 20, 100, 80),
    ];
    let rt = runtime_tree(&quotas, &amounts(100), true);
    let cpu = |n: &str| rt[n]["cpu"];
    // Root: p asks 60 (its children's), q 80; mins 40 and 20, the 40 left split 20/20.
    assert_eq!((cpu("p"), cpu("q")), (60, 40));
    assert_eq!((cpu("p1"), cpu("p2")), (50, 10));
}

#[test]
fn requests_are_capped_at_max_and_masked_to_its_resources() {
    let mut small = quota("small", None, 0, 30, 80);
    small.max.insert("memory".into(), 1 << 30);
    small.weight = Some(amounts(100));
    let mut other = quota("other", None, 0, 100, 100);
    other.max = Amounts::from([("cpu".to_string(), 100)]);
    let rt = runtime_tree(
        &[small, other],
        &Amounts::from([("cpu".into(), 100), ("memory".into(), 1 << 31)]),
        true,
    );
    assert_eq!(
        rt["small"]["cpu"], 30,
        "asks 80, max 30: half of 100 is more than it asks"
    );
    assert_eq!(rt["other"]["cpu"], 70, "the rest");
    assert!(!rt["other"].contains_key("memory"), "not in its max");
    assert_eq!(rt["small"]["memory"], 0, "no pods ask for memory");
}

#[test]
fn separate_trees_are_computed_separately() {
    let a = runtime_tree(&[quota("a", None, 10, 100, 100)], &amounts(40), true);
    let b = runtime_tree(&[quota("b", None, 10, 100, 100)], &amounts(60), true);
    assert_eq!((a["a"]["cpu"], b["b"]["cpu"]), (40, 60));
}
