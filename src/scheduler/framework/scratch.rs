//! The per-cycle lists (node order, feasible nodes, one score per plugin and node), kept in
//! buffers on the thread between cycles: at 5,000 nodes each is kilobytes, and allocating
//! them afresh every cycle made glibc consolidate its free lists every cycle.

use std::cell::Cell;

/// The nodes in the order Filter visits them: every node from a rotating start (the
/// usual case: no list is built), or the ones a PreFilter result allows.
#[derive(Clone, Copy)]
pub(super) enum Order<'a> {
    Rotation { start: usize, total: usize },
    List(&'a [usize]),
}

impl Order<'_> {
    pub fn len(&self) -> usize {
        match self {
            Order::Rotation { total, .. } => *total,
            Order::List(l) => l.len(),
        }
    }

    /// The node index at position `k` (< len).
    #[inline]
    pub fn at(&self, k: usize) -> usize {
        match self {
            Order::Rotation { start, total } => {
                let i = start + k;
                if i >= *total { i - total } else { i }
            }
            Order::List(l) => l[k],
        }
    }
}

/// One cycle's lists, reused by the next cycle on the same thread.
#[derive(Default)]
pub(super) struct Scratch {
    /// The nodes a PreFilter result allows, in the order Filter visits them.
    pub order: Vec<usize>,
    /// Indices of the feasible nodes.
    pub feasible: Vec<usize>,
    /// Score plugin `p`'s score of feasible node `k` at `p * feasible.len() + k`.
    pub scores: Vec<i64>,
    /// The nodes Filter rejected (every node, for a pod that fits nowhere).
    pub rejected: Vec<super::verdicts::Rejection>,
    /// Node-name rank → position, for putting the verdicts in name order.
    pub at_rank: Vec<u32>,
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

impl Scratch {
    /// This thread's buffers (empty ones if a cycle on this thread holds them already).
    pub fn take() -> Scratch {
        SCRATCH.with(Cell::take)
    }

    pub fn give_back(self) {
        SCRATCH.with(|c| c.set(self));
    }
}
