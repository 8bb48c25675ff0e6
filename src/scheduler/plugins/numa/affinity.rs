//! The topology manager's store (`frameworkext/topologymanager/store.go`): the NUMA nodes
//! chosen for the pod on each node, written when NodeNUMAResource admits it there and read
//! by the other hint providers (DeviceShare) so that their allocation follows the same
//! NUMA nodes. Filter runs on many nodes at once, hence the lock.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::scheduler::framework::CycleState;

const KEY: &str = "NodeNUMAResource/affinity";

#[derive(Default)]
pub struct Store(Mutex<HashMap<String, u64>>);

/// A fresh store for this cycle (DeviceShare's PreFilter: it is the one reader).
pub fn init(state: &mut CycleState) {
    state.write(KEY, Store::default());
}

/// Records the NUMA nodes chosen on `node` (nothing when no reader made a store).
pub fn set(state: &CycleState, node: &str, mask: u64) {
    let Some(store) = state.read::<Store>(KEY) else {
        return;
    };
    let mut map = store.0.lock().unwrap_or_else(|e| e.into_inner());
    map.insert(node.to_string(), mask);
}

/// The NUMA nodes chosen for the pod on `node`, if NodeNUMAResource aligned it there.
pub fn get(state: &CycleState, node: &str) -> Option<u64> {
    let store = state.read::<Store>(KEY)?;
    let map = store.0.lock().unwrap_or_else(|e| e.into_inner());
    map.get(node).copied()
}
