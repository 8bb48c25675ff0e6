//! Per-object slots a plugin fills with what it derives from a node or pod (parsed
//! annotations, sums over the node's pods, the pod's usage estimate), so Filter and Score
//! read a field instead of parsing, hashing or locking once per node and pod.
//!
//! A slot is computed on first use and emptied whenever its object changes: a node's
//! memo is replaced on every change of the node, a pod's lives as long as its `PodInfo`.
//! Each plugin instance has an owner id; a slot holds one owner's value, so two
//! profiles' instances of one plugin (different args) never read each other's.

use std::any::Any;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How much of a kept value [`Memo::prefetch`] loads (a plugin's per-node view can be a
/// few hundred bytes, the field a Filter reads first anywhere in it).
const PREFETCH_MAX: usize = 512;

/// Slots per object: more plugins than this per object compute without keeping.
const SLOTS: usize = 4;

type Slot = OnceLock<(usize, Box<dyn Any + Send + Sync>)>;

#[derive(Default)]
pub struct Memo([Slot; SLOTS]);

/// A fresh memo: a copied node or pod derives its values again.
impl Clone for Memo {
    fn clone(&self) -> Memo {
        Memo::default()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.0.iter().filter(|s| s.get().is_some()).count();
        write!(f, "Memo({used} of {SLOTS} slots)")
    }
}

/// An id for one plugin instance's slots.
pub fn owner_id() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A kept value, or one computed now because every slot belongs to someone else.
pub enum Memoized<'a, T> {
    Kept(&'a T),
    Fresh(T),
}

impl<T> std::ops::Deref for Memoized<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Memoized::Kept(t) => t,
            Memoized::Fresh(t) => t,
        }
    }
}

impl Memo {
    /// Starts loading the kept values into cache (each is its own allocation, so the first
    /// read of each is otherwise a cache miss per node).
    #[inline]
    pub fn prefetch(&self) {
        for slot in &self.0 {
            match slot.get() {
                Some((_, v)) => crate::os::tuning::prefetch_all(&**v, PREFETCH_MAX),
                None => break,
            }
        }
    }

    /// `owner`'s value, computed by `init` the first time.
    pub fn get_or_init<T: Any + Send + Sync>(
        &self,
        owner: usize,
        init: impl FnOnce() -> T,
    ) -> Memoized<'_, T> {
        let mut init = Some(init);
        for slot in &self.0 {
            // An empty slot is taken for this owner; a taken one is read or skipped.
            let (o, v) = slot.get_or_init(|| match init.take() {
                Some(f) => (owner, Box::new(f())),
                None => unreachable!("init is only taken by the slot it fills"),
            });
            if *o != owner {
                continue;
            }
            if let Some(t) = v.downcast_ref::<T>() {
                return Memoized::Kept(t);
            }
            break;
        }
        match init {
            Some(f) => Memoized::Fresh(f()),
            None => unreachable!("a value this call stored has its type"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_per_owner_and_forgets_on_clone() {
        let m = Memo::default();
        let (a, b) = (owner_id(), owner_id());
        let mut runs = 0;
        assert_eq!(
            *m.get_or_init(a, || {
                runs += 1;
                1u32
            }),
            1
        );
        assert_eq!(
            *m.get_or_init(a, || {
                runs += 1;
                2u32
            }),
            1
        );
        assert_eq!(runs, 1, "a kept value is not computed again");
        assert_eq!(
            *m.get_or_init(b, || 7u32),
            7,
            "another owner has its own slot"
        );
        assert!(matches!(m.get_or_init(a, || 0u32), Memoized::Kept(_)));
        assert!(
            matches!(
                m.clone().get_or_init(a, || 3u32),
                Memoized::Fresh(_) | Memoized::Kept(3)
            ),
            "a copy starts empty"
        );
    }

    #[test]
    fn owners_beyond_the_slots_compute_every_time() {
        let m = Memo::default();
        for _ in 0..SLOTS {
            let _ = m.get_or_init(owner_id(), || 0u8);
        }
        let late = owner_id();
        assert!(matches!(m.get_or_init(late, || 5u8), Memoized::Fresh(5)));
        assert!(matches!(m.get_or_init(late, || 6u8), Memoized::Fresh(6)));
    }
}
