//! What the Reservation plugin's PreFilter leaves in the cycle state for its other points,
//! for NodeResourcesFit, and for the helpers beside it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::scheduler::framework::res::ResVec;
use crate::scheduler::model::reservation::IgnoredResources;

pub const NAME: &str = "Reservation";
/// What the matched reservations give back to the pod on each node.
pub const RESTORED: &str = "Reservation/restored";

/// What is counted as free for this pod beside a node's free capacity.
pub enum Restored {
    /// A pre-allocating reserve pod: node → (resources, pod slots) of the pods it takes over.
    Taken(HashMap<String, (ResVec, i64)>),
    /// A pod matched to reservations: their holding, read from the node at Filter.
    Matched,
}

pub(super) struct PreState {
    /// Node → matched reservation names.
    pub(super) matched: HashMap<String, Vec<String>>,
    /// The pod must use a reservation.
    pub(super) required: bool,
    /// The pod uses reservations' capacity without being placed into one.
    pub(super) ignored: bool,
    /// The reservation the pod's affinity names (its reasons then carry amounts).
    pub(super) named: Option<String>,
    /// The extended resources the fit checks leave out (the plugin's args).
    pub(super) skip: Arc<IgnoredResources>,
}
