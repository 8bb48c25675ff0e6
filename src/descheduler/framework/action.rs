//! What a plugin asks for besides evictions.

/// A change a plugin asks for besides evictions. Koordinator's plugins write these
/// themselves; koord's only decide, so explain shows them and the live role applies them.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Mark a node unschedulable (CustomPriority's `autoCordon`).
    Cordon { node: String },
    /// Set an annotation on a pod (ScaleDownBinPack's pod-deletion-cost).
    Annotate {
        namespace: String,
        pod: String,
        key: String,
        value: String,
    },
}

/// An action with the plugin that asked for it and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub plugin: String,
    pub action: Action,
    pub reason: String,
}
