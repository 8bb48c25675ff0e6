//! A cycle's per-node verdicts: why each examined node was or was not chosen, in node-name
//! order. A pod that fits nowhere is rejected by every node of the cluster in every cycle,
//! so the verdicts are gathered by node index and put in name order once, by the cluster's
//! cached name rank — no string is copied or compared per node.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ClusterState, Code, Reason, Status};

/// A node rejected by a plugin: (node index, plugin, status).
pub type Rejection = (usize, &'static str, Status);

/// Why a node was or was not chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeVerdict {
    pub feasible: bool,
    pub plugin: Option<&'static str>,
    pub code: Code,
    pub reason: Reason,
    pub scores: BTreeMap<&'static str, i64>,
    pub total: i64,
}

impl NodeVerdict {
    pub fn rejected(plugin: &'static str, s: &Status) -> NodeVerdict {
        let reason = match s.reasons.as_slice() {
            [one] => one.clone(),
            _ => s.message().into(),
        };
        Self::refusal(plugin, s.code, reason)
    }

    /// As [`NodeVerdict::rejected`], taking the status (one reason moves, not copied).
    pub fn rejected_by(plugin: &'static str, mut s: Status) -> NodeVerdict {
        let reason = match s.reasons.len() {
            1 => s.reasons.pop().unwrap_or_default(),
            _ => s.message().into(),
        };
        Self::refusal(plugin, s.code, reason)
    }

    /// Stands in for a verdict moved out (allocates nothing).
    fn placeholder() -> NodeVerdict {
        Self::refusal("", Code::Success, Reason::Borrowed(""))
    }

    fn refusal(plugin: &'static str, code: Code, reason: Reason) -> NodeVerdict {
        NodeVerdict {
            feasible: false,
            plugin: Some(plugin),
            code,
            reason,
            scores: BTreeMap::new(),
            total: 0,
        }
    }
}

/// Every examined node's verdict by node name, in name order (a sorted list: built once
/// per cycle, read by name a few times).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdicts {
    sorted: Vec<(Arc<str>, NodeVerdict)>,
}

impl Verdicts {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.sorted.binary_search_by(|(k, _)| (**k).cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&NodeVerdict> {
        self.find(name).ok().map(|i| &self.sorted[i].1)
    }

    /// Sets the verdict of node `name` (replacing one it had).
    pub fn insert(&mut self, name: Arc<str>, v: NodeVerdict) {
        match self.find(&name) {
            Ok(i) => self.sorted[i].1 = v,
            Err(i) => self.sorted.insert(i, (name, v)),
        }
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// (name, verdict) in name order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Arc<str>, &NodeVerdict)> {
        self.sorted.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Arc<str>> {
        self.sorted.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &NodeVerdict> {
        self.sorted.iter().map(|(_, v)| v)
    }
}

impl std::ops::Index<&str> for Verdicts {
    type Output = NodeVerdict;
    fn index(&self, name: &str) -> &NodeVerdict {
        match self.get(name) {
            Some(v) => v,
            None => panic!("no verdict for node {name}"),
        }
    }
}

impl<'a> IntoIterator for &'a Verdicts {
    type Item = (&'a Arc<str>, &'a NodeVerdict);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, NodeVerdict)>,
        fn(&'a (Arc<str>, NodeVerdict)) -> (&'a Arc<str>, &'a NodeVerdict),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.sorted.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(Arc<str>, NodeVerdict)> for Verdicts {
    /// In any order; a name given twice keeps its last verdict, as a map would.
    fn from_iter<I: IntoIterator<Item = (Arc<str>, NodeVerdict)>>(it: I) -> Verdicts {
        let mut all: Vec<_> = it.into_iter().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sorted: Vec<(Arc<str>, NodeVerdict)> = Vec::with_capacity(all.len());
        for e in all {
            match sorted.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => sorted.push(e),
            }
        }
        Verdicts { sorted }
    }
}

/// A cycle's verdicts as they come, by node index; [`Gathered::finish`] puts them in name
/// order by the cluster's name rank (integers compared, not names).
#[derive(Default)]
pub struct Gathered {
    by_index: Vec<(usize, NodeVerdict)>,
}

impl Gathered {
    pub fn push(&mut self, node: usize, v: NodeVerdict) {
        self.by_index.push((node, v));
    }

    /// These and Filter's `rejected` (emptied, its room kept for the next cycle) in name
    /// order; a node given twice keeps its last verdict (these count after `rejected`).
    /// `at_rank`: a buffer kept between cycles.
    pub fn finish(
        self,
        cluster: &ClusterState,
        rejected: &mut Vec<Rejection>,
        at_rank: &mut Vec<u32>,
    ) -> Verdicts {
        let rank = cluster.name_rank();
        let split = rejected.len();
        let node = |p: usize| match p < split {
            true => rejected[p].0,
            false => self.by_index[p - split].0,
        };
        let order = positions_in_name_order(split + self.by_index.len(), node, rank, at_rank);
        let mut others = self.by_index;
        let mut sorted: Vec<(Arc<str>, NodeVerdict)> = Vec::with_capacity(order.len());
        for p in order {
            let p = p as usize;
            let (i, v) = match p < split {
                true => {
                    // Taken out in place: the list stays for the next cycle.
                    let (i, plugin, s) = &mut rejected[p];
                    let s = std::mem::replace(s, Status::success());
                    (*i, NodeVerdict::rejected_by(plugin, s))
                }
                false => {
                    let (i, v) = &mut others[p - split];
                    (*i, std::mem::replace(v, NodeVerdict::placeholder()))
                }
            };
            sorted.push((cluster.nodes[i].key.clone(), v));
        }
        rejected.clear();
        Verdicts { sorted }
    }
}

/// Positions `0..n` in their nodes' name order (`node(p)`: the node at position `p`), the
/// last for a node given twice. Many (a pod rejected by every node): each placed at its
/// node's rank, one pass; a few: sorted.
fn positions_in_name_order(
    n: usize,
    node: impl Fn(usize) -> usize,
    rank: &[u32],
    at: &mut Vec<u32>,
) -> Vec<u32> {
    if n > 64 {
        at.clear();
        at.resize(rank.len(), u32::MAX);
        for p in 0..n {
            at[rank[node(p)] as usize] = p as u32;
        }
        return at.iter().copied().filter(|p| *p != u32::MAX).collect();
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|p| (rank[node(*p as usize)], *p));
    let mut out: Vec<u32> = Vec::with_capacity(order.len());
    for p in order {
        match out.last_mut() {
            Some(last) if node(*last as usize) == node(p as usize) => *last = p,
            _ => out.push(p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(reason: &'static str) -> NodeVerdict {
        NodeVerdict::rejected("P", &Status::unschedulable(reason))
    }

    #[test]
    fn from_any_order_keeps_name_order_and_the_last_verdict_of_a_name() {
        let got: Verdicts = [("b", "1"), ("a", "2"), ("b", "3")]
            .into_iter()
            .map(|(n, r)| (Arc::from(n), v(r)))
            .collect();
        let names: Vec<&str> = got.keys().map(|k| &**k).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(got["b"].reason, "3");
        assert!(got.get("c").is_none());
    }

    #[test]
    fn insert_replaces_or_places_in_order() {
        let mut got = Verdicts::default();
        got.insert("m".into(), v("1"));
        got.insert("a".into(), v("2"));
        got.insert("z".into(), v("3"));
        got.insert("m".into(), v("4"));
        let all: Vec<(&str, &str)> = got.iter().map(|(k, v)| (&**k, &*v.reason)).collect();
        assert_eq!(all, [("a", "2"), ("m", "4"), ("z", "3")]);
    }

    #[test]
    fn gathered_by_index_comes_out_in_name_order() {
        let mut c = ClusterState::default();
        for n in ["n3", "n1", "n2"] {
            let node = serde_json::json!({"metadata": {"name": n}});
            c.upsert_node(Arc::new(serde_json::from_value(node).unwrap()));
        }
        let at = |n: &str| c.nodes.iter().position(|x| x.name == n).unwrap();
        let mut g = Gathered::default();
        g.push(at("n3"), v("a"));
        g.push(at("n1"), v("b"));
        g.push(at("n2"), v("c"));
        g.push(at("n1"), v("d"));
        let got = g.finish(&c, &mut Vec::new(), &mut Vec::new());
        let all: Vec<(&str, &str)> = got.iter().map(|(k, v)| (&**k, &*v.reason)).collect();
        assert_eq!(all, [("n1", "d"), ("n2", "c"), ("n3", "a")]);
    }

    #[test]
    fn filter_rejections_and_the_rest_merge_in_name_order_the_rest_last() {
        for nodes in [3, 100] {
            let mut c = ClusterState::default();
            for i in 0..nodes {
                let node = serde_json::json!({"metadata": {"name": format!("node-{i}")}});
                c.upsert_node(Arc::new(serde_json::from_value(node).unwrap()));
            }
            let mut rejected: Vec<Rejection> = (0..nodes)
                .rev()
                .map(|i| (i, "Fit", Status::unschedulable("Insufficient cpu")))
                .collect();
            let mut g = Gathered::default();
            g.push(1, v("again"));
            let got = g.finish(&c, &mut rejected, &mut Vec::new());
            let mut names: Vec<String> = (0..nodes).map(|i| format!("node-{i}")).collect();
            names.sort();
            let keys: Vec<String> = got.keys().map(|k| k.to_string()).collect();
            assert_eq!(keys, names, "{nodes} nodes");
            assert_eq!(got["node-1"].reason, "again");
            assert_eq!(got["node-2"].reason, "Insufficient cpu");
            assert_eq!(got["node-2"].plugin, Some("Fit"));
            assert!(rejected.is_empty() && rejected.capacity() >= nodes);
        }
    }
}
