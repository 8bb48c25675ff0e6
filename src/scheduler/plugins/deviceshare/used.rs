//! What is held on a node's devices, summed from the pods (and reserve pods) on it.

use std::collections::BTreeMap;

use crate::scheduler::framework::NodeInfo;
use crate::scheduler::model::devices::{Allocations, Used};

fn add_into(used: &mut Used, a: &Allocations, sign: i64) {
    for (kind, granted) in a {
        for g in granted {
            let e = used.entry((kind.clone(), g.minor)).or_default();
            for (k, v) in &g.resources {
                *e.entry(k.clone()).or_default() += sign * v;
            }
        }
    }
}

/// What is held on `node`, and the devices of the reservations in `usable` (which this
/// pod may take from: they count as free, and are preferred). A reservation holds its
/// allocation less what its owners took, so nothing is counted twice.
pub fn used_on(node: &NodeInfo, usable: &[String]) -> (Used, Used) {
    let mut used = Used::new();
    let mut owners: BTreeMap<String, Allocations> = BTreeMap::new();
    let mut reserved: Vec<(String, String, &Allocations)> = Vec::new();
    for p in &node.pods {
        let Some(a) = p.devices.as_deref() else {
            continue;
        };
        if let Some(name) = &p.reserve_of {
            reserved.push((name.clone(), p.uid.clone(), a));
            continue;
        }
        add_into(&mut used, a, 1);
        if let Some(uid) = &p.reservation_allocated {
            let o = owners.entry(uid.clone()).or_default();
            for (kind, g) in a {
                o.entry(kind.clone()).or_default().extend(g.iter().cloned());
            }
        }
    }
    let mut preferred = Used::new();
    for (name, uid, a) in reserved {
        let mut held = Used::new();
        add_into(&mut held, a, 1);
        if let Some(o) = owners.get(&uid) {
            add_into(&mut held, o, -1);
        }
        let into = if usable.contains(&name) {
            &mut preferred
        } else {
            &mut used
        };
        for (key, res) in held {
            let e = into.entry(key).or_default();
            for (k, v) in res {
                *e.entry(k).or_default() += v.max(0);
            }
        }
    }
    (used, preferred)
}

/// The virtual functions the pods (and reservations) on `node` hold: (type, minor, bus).
pub fn vfs_on(node: &NodeInfo) -> std::collections::BTreeSet<(String, i32, String)> {
    node.pods
        .iter()
        .filter_map(|p| p.devices.as_deref())
        .flat_map(|a| a.iter())
        .flat_map(|(kind, granted)| {
            granted.iter().flat_map(move |g| {
                g.vfs
                    .iter()
                    .map(move |(bus, _)| (kind.clone(), g.minor, bus.clone()))
            })
        })
        .collect()
}
