//! Why DeviceShare refuses a pod (its request or annotations) or a node, worded as
//! Koordinator's reasons.

pub const ERR_JOINT: &str = "node(s) Device Joint-Allocate rules violation";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// `ValidateDeviceRequest`: a combination of device resources Koordinator refuses
    /// (the names sorted).
    #[error("invalid resource device requests: [{}]", .0.join(" "))]
    InvalidRequests(Vec<String>),
    /// A percentage resource's amount that is neither ≤ 100 nor whole devices.
    #[error("invalid resource unit {name}: {value}")]
    InvalidUnit { name: String, value: i64 },
    /// An annotation that does not parse.
    #[error("{key}: {reason}")]
    Annotation { key: &'static str, reason: String },
    #[error("invalid {what} of DeviceHint, deviceType: {kind}, err: {reason}")]
    Hint {
        what: &'static str,
        kind: String,
        reason: String,
    },
    /// Not enough free devices (`what`: `devices` or `VirtualFunctions`) of a type.
    #[error("Insufficient {kind} {what}")]
    Insufficient { kind: String, what: &'static str },
    #[error("{}", ERR_JOINT)]
    Joint,
}
