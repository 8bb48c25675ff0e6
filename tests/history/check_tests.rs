//! The checker finds each kind of violation in a small made-up history, and accepts the
//! same history done right.

use super::harness::check::*;
use std::time::{Duration, Instant};

struct Clock(Instant);

impl Clock {
    /// An operation of `client` that ran from `start` to `end` (milliseconds).
    fn op(&self, client: usize, start: u64, end: u64, call: Call, outcome: Outcome) -> Op {
        let at = |ms| self.0 + Duration::from_millis(ms);
        Op {
            client,
            call,
            outcome,
            invoked: at(start),
            returned: at(end),
        }
    }
}

fn create(key: &str, value: &str) -> Call {
    Call::Create {
        key: key.into(),
        value: value.into(),
    }
}

fn update(key: &str, value: &str, from: u64) -> Call {
    Call::Update {
        key: key.into(),
        value: value.into(),
        from,
    }
}

fn get(key: &str) -> Call {
    Call::Get { key: key.into() }
}

fn got(value: &str, rv: u64) -> Outcome {
    Outcome::Got(Some((value.into(), rv)))
}

fn listed(rv: u64, items: &[(&str, &str, u64)]) -> Outcome {
    let items = items
        .iter()
        .map(|(k, v, r)| (k.to_string(), (v.to_string(), *r)))
        .collect();
    Outcome::Listed { rv, items }
}

/// a=1 at 10, a=2 at 11 (from 10), read back, listed at 11.
fn good(c: &Clock) -> History {
    History {
        ops: vec![
            c.op(0, 0, 1, create("a", "1"), Outcome::Wrote(10)),
            c.op(0, 2, 3, update("a", "2", 10), Outcome::Wrote(11)),
            c.op(1, 4, 5, get("a"), got("2", 11)),
            c.op(1, 6, 7, Call::List, listed(11, &[("a", "2", 11)])),
        ],
        segments: vec![Segment {
            watcher: 0,
            from: 9,
            events: vec![
                Event {
                    key: "a".into(),
                    change: Change::Put("1".into()),
                    rv: 10,
                },
                Event {
                    key: "a".into(),
                    change: Change::Put("2".into()),
                    rv: 11,
                },
            ],
        }],
    }
}

fn violations(h: &History, want: &str) {
    let v = check(h);
    assert!(
        v.iter().any(|v| v.contains(want)),
        "want {want:?} in {v:#?}"
    );
}

#[test]
fn a_correct_history_has_no_violation() {
    let c = Clock(Instant::now());
    assert_eq!(check(&good(&c)), Vec::<String>::new());
}

#[test]
fn a_stale_get_after_an_acknowledged_update() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops[2] = c.op(1, 4, 5, get("a"), got("1", 10));
    violations(&h, "had changed at 11");
}

#[test]
fn a_lost_update() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops
        .push(c.op(2, 2, 3, update("a", "3", 10), Outcome::Wrote(12)));
    violations(&h, "both acknowledged from version 10");
    violations(&h, "changed between them at 11");
}

#[test]
fn a_revision_not_above_one_acknowledged_before() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops
        .push(c.op(2, 8, 9, create("b", "x"), Outcome::Wrote(5)));
    violations(&h, "not above revision 11");
}

#[test]
fn one_revision_for_two_writes() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops
        .push(c.op(2, 0, 1, create("b", "x"), Outcome::Wrote(10)));
    violations(&h, "revision 10 names two changes");
}

#[test]
fn a_value_nobody_wrote() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops[2] = c.op(1, 4, 5, get("a"), got("ghost", 11));
    violations(&h, "was never written");
}

#[test]
fn a_list_missing_an_acknowledged_write() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops[3] = c.op(1, 6, 7, Call::List, listed(11, &[]));
    violations(&h, "a shown at None, the history has it at Some(11)");
}

#[test]
fn a_get_not_found_after_an_acknowledged_create() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops[2] = c.op(1, 4, 5, get("a"), Outcome::Got(None));
    violations(&h, "not found, but a was at version 11");
}

#[test]
fn an_exact_list_that_differs() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    let call = Call::ListExact { at: 11 };
    h.ops
        .push(c.op(2, 8, 9, call, listed(11, &[("a", "1", 10)])));
    violations(&h, "lists at 11 differ");
}

#[test]
fn a_watch_that_skips_a_change() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    h.ops
        .push(c.op(2, 8, 9, update("a", "3", 11), Outcome::Wrote(12)));
    h.segments[0].events.remove(1);
    let e = Event {
        key: "a".into(),
        change: Change::Put("3".into()),
        rv: 12,
    };
    h.segments[0].events.push(e);
    violations(&h, "missed a Put(\"2\") at 11");
}

#[test]
fn a_watch_that_repeats_an_event() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    let again = h.segments[0].events[1].clone();
    h.segments[0].events.push(again);
    violations(&h, "not above the previous revision 11");
}

#[test]
fn an_unanswered_delete_may_explain_a_missing_object() {
    let c = Clock(Instant::now());
    let mut h = good(&c);
    let del = Call::Delete {
        key: "a".into(),
        from: 11,
    };
    h.ops.insert(2, c.op(2, 3, 4, del, Outcome::Unknown));
    h.ops[3] = c.op(1, 4, 5, get("a"), Outcome::Got(None));
    h.ops[4] = c.op(1, 6, 7, Call::List, listed(12, &[]));
    assert_eq!(check(&h), Vec::<String>::new());
}
