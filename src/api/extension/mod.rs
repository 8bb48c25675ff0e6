//! Koordinator's well-known names (`apis/extension` upstream): labels, annotations,
//! extended resources, priority classes and QoS classes, and how a pod's class is derived.

pub mod keys;
pub mod nodereservation;
pub mod numa_res;
pub mod priority;
pub mod qos;
pub mod resources;
pub mod resourcestatus;

pub use priority::PriorityClass;
pub use qos::QoSClass;

/// A Koordinator annotation on an object that does not parse as its JSON type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {reason}")]
pub struct AnnotationError {
    pub key: String,
    pub reason: String,
}

/// The JSON value of annotation `key` in `annotations`; `None` when absent or empty.
pub fn json_annotation<T: serde::de::DeserializeOwned>(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    key: &str,
) -> Result<Option<T>, AnnotationError> {
    let Some(raw) = annotations.and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    serde_json::from_str(raw)
        .map(Some)
        .map_err(|e| AnnotationError {
            key: key.to_string(),
            reason: e.to_string(),
        })
}
