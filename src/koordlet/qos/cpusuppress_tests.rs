use super::*;

fn inputs(cap: i64, thr: i64, pods: i64, sys: i64) -> Inputs {
    Inputs {
        capacity_milli: cap,
        threshold_percent: thr,
        min_percent: None,
        non_be_pods_milli: pods,
        non_be_host_milli: 0,
        system_used_milli: sys,
    }
}

#[test]
fn suppress_formula() {
    // 16 cores × 65 % − 6 cores LS − 1 core system = 3.4 cores.
    assert_eq!(suppress_milli(&inputs(16_000, 65, 6_000, 1_000)), 3_400);
    assert_eq!(suppress_milli(&inputs(16_000, 65, 12_000, 1_000)), -2_600);
    let min = Inputs {
        min_percent: Some(10),
        ..inputs(16_000, 65, 12_000, 1_000)
    };
    assert_eq!(suppress_milli(&min), 1_600);
    assert_eq!(system_used(10_000, 6_000, 500, 1_000), 3_500);
    assert_eq!(
        system_used(5_000, 6_000, 0, 1_000),
        1_000,
        "reserved is the floor"
    );
}

#[test]
fn quota_steps() {
    let cap = 16_000; // 1.6 s per 100 ms period; 1 % = 16_000 µs, 10 % = 160_000 µs
    // (suppress, current quota, expected)
    for (s, cur, want) in [
        (3_400, -1, Some(340_000)),
        (3_400, 340_000, None),
        (3_500, 340_000, None),
        (3_600, 340_000, Some(360_000)),
        (10_000, 340_000, Some(500_000)),
        (-2_600, 340_000, Some(MIN_QUOTA)),
        (-2_600, MIN_QUOTA, None),
        (10, -1, Some(MIN_QUOTA)),
    ] {
        assert_eq!(cfs_quota(s, cur, cap), want, "S {s} current {cur}");
    }
}

#[test]
fn cpuset_sizes() {
    assert_eq!(cpuset_count(3_400, 8, 16), 4);
    assert_eq!(cpuset_count(-2_000, 8, 16), MIN_CPUS);
    assert_eq!(
        cpuset_count(15_000, 2, 16),
        4,
        "grows by 10 % of 16 → 2 per round"
    );
    assert_eq!(cpuset_count(40_000, 30, 32), 32);
}

fn topo() -> Vec<Cpu> {
    // 2 sockets × 2 cores × 2 threads: cpu i on core i/2 % 2, socket i/4.
    (0..8)
        .map(|i| Cpu {
            id: i,
            core: (i / 2) % 2 + 2 * (i / 4),
            socket: i / 4,
            numa: i / 4,
        })
        .collect()
}

#[test]
fn picks_whole_cores_round_robin() {
    assert_eq!(
        pick(&topo(), 4),
        vec![0, 1, 4, 5],
        "one whole core from each socket"
    );
    assert_eq!(
        pick(&topo(), 3),
        vec![0, 1, 4],
        "a core, then a single CPU elsewhere"
    );
    assert_eq!(pick(&topo(), 20).len(), 8);
    let excluded: BTreeSet<u32> = [0, 1].into();
    let lsr: BTreeSet<u32> = [2, 3, 4, 5].into();
    // 6 candidates, 4 in the LSR pool: 3 × 4/6 = 2 from LSR, 1 from LS.
    assert_eq!(be_cpuset(&topo(), 3, &excluded, &lsr), vec![2, 3, 6]);
    assert_eq!(
        be_cpuset(&topo(), 2, &(0..8).collect(), &lsr),
        Vec::<u32>::new()
    );
}
