//! Nominated pods, as kube-scheduler's nominator keeps them: a preemptor waits on the node
//! PostFilter chose while its victims go; until it is placed, a cycle for a pod of no
//! higher priority counts it on that node (`RunFilterPluginsWithNominatedPods`), so the
//! room preemption made is not taken by someone else.

use std::collections::HashMap;
use std::sync::Arc;

use super::types::PodInfo;

#[derive(Default)]
pub struct Nominated {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<String, String>,
}

impl Nominated {
    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }

    /// The node `key` is nominated to.
    pub fn node_of(&self, key: &str) -> Option<&str> {
        self.node_of.get(key).map(String::as_str)
    }

    /// Nominates `pod` to `node` (replacing an earlier nomination).
    pub fn set(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.clear(&pod.key);
        self.node_of.insert(pod.key.clone(), node.to_string());
        self.by_node.entry(node.to_string()).or_default().push(pod);
    }

    pub fn clear(&mut self, key: &str) {
        let Some(node) = self.node_of.remove(key) else {
            return;
        };
        if let Some(list) = self.by_node.get_mut(&node) {
            list.retain(|p| p.key != key);
            if list.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// The pods nominated to `node` a cycle for `pod` must count there: not `pod` itself,
    /// and of at least its priority.
    pub fn counted_for<'a>(
        &'a self,
        node: &str,
        pod: &'a PodInfo,
    ) -> impl Iterator<Item = &'a Arc<PodInfo>> + 'a {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter(move |p| p.key != pod.key && p.priority >= pod.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::simple_pod;

    fn with_priority(name: &str, priority: i32) -> Arc<PodInfo> {
        let mut p = simple_pod(name, "1", "1Gi");
        p.priority = priority;
        Arc::new(p)
    }

    #[test]
    fn counts_nominated_pods_of_no_lower_priority() {
        let mut n = Nominated::default();
        n.set(with_priority("high", 100), "n1");
        n.set(with_priority("low", 1), "n1");
        let me = with_priority("me", 50);
        let keys: Vec<&str> = n.counted_for("n1", &me).map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["default/high"]);
        assert_eq!(n.counted_for("n2", &me).count(), 0);
        n.set(with_priority("high", 100), "n2");
        assert_eq!(n.node_of("default/high"), Some("n2"), "moved, not doubled");
        assert_eq!(n.counted_for("n1", &me).count(), 0);
        n.clear("default/high");
        n.clear("default/low");
        assert!(n.is_empty());
    }
}
