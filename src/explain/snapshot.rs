//! Snapshot files for `koord explain`: YAML or JSON, `---`-separated documents or a
//! `kind: List`, exactly what `kubectl get ... -o yaml` prints.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::slo::{NodeMetric, NodeSLO};
use crate::api::sloconfig::{DEFAULT_NAME, DEFAULT_NAMESPACE};

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: document {doc}: not YAML or JSON: {message}")]
    Syntax {
        file: String,
        doc: usize,
        message: String,
    },
    #[error("{file}: document {doc} ({kind} {name}): {message}")]
    Object {
        file: String,
        doc: usize,
        kind: String,
        name: String,
        message: String,
    },
}

/// The storage kinds of a snapshot.
#[derive(Debug, Default, Clone)]
pub struct Storage {
    pub pvs: Vec<k8s_openapi::api::core::v1::PersistentVolume>,
    pub pvcs: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    pub classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    pub csi_nodes: Vec<k8s_openapi::api::storage::v1::CSINode>,
    pub csi_drivers: Vec<k8s_openapi::api::storage::v1::CSIDriver>,
    pub capacities: Vec<k8s_openapi::api::storage::v1::CSIStorageCapacity>,
}

/// The objects `koord explain` reads; other kinds are kept as raw JSON for later readers.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Nodes, pods and NodeMetrics are shared: a replay's frozen copies hold handles.
    pub nodes: Vec<std::sync::Arc<Node>>,
    pub pods: Vec<std::sync::Arc<Pod>>,
    pub node_metrics: Vec<std::sync::Arc<NodeMetric>>,
    pub node_slos: Vec<NodeSLO>,
    pub slo_config: Option<ConfigMap>,
    pub devices: Vec<crate::api::scheduling::device::Device>,
    /// PersistentVolumes, claims, StorageClasses and CSINodes (the volume plugins').
    pub storage: Storage,
    /// PodDisruptionBudgets (DefaultPreemption's victims respect them).
    pub pdbs: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    pub other: Vec<Value>,
    pub warnings: Vec<String>,
}

impl Snapshot {
    /// Loads every file in order; `-` is standard input.
    pub fn load(files: &[String]) -> Result<Snapshot, SnapshotError> {
        let mut snap = Snapshot::default();
        for file in files {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(Path::new(file))
            }
            .map_err(|source| SnapshotError::Read {
                file: file.clone(),
                source,
            })?;
            snap.add_text(file, &text)?;
        }
        Ok(snap)
    }

    /// Adds the documents of one file.
    pub fn add_text(&mut self, file: &str, text: &str) -> Result<(), SnapshotError> {
        crate::api::input::prescan_yaml(text.as_bytes()).map_err(|message| {
            SnapshotError::Syntax {
                file: file.into(),
                doc: 0,
                message,
            }
        })?;
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let syntax = |message: String| SnapshotError::Syntax {
                file: file.into(),
                doc: i + 1,
                message,
            };
            let yaml = <serde_yaml::Value as serde::Deserialize>::deserialize(doc)
                .map_err(|e| syntax(e.to_string()))?;
            if yaml.is_null() {
                continue;
            }
            let json: Value = serde_json::to_value(&yaml).map_err(|e| syntax(e.to_string()))?;
            self.add_value(file, i + 1, json)?;
        }
        Ok(())
    }

    /// Adds one object (or list) as if it were document `doc` of `file`.
    pub fn add_value(&mut self, file: &str, doc: usize, v: Value) -> Result<(), SnapshotError> {
        let kind = v
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind == "List" || kind.ends_with("List") && v.get("items").is_some() {
            let items = v
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for item in items {
                self.add_value(file, doc, item)?;
            }
            return Ok(());
        }
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
            .to_string();
        let err = |message: String| SnapshotError::Object {
            file: file.into(),
            doc,
            kind: kind.clone(),
            name: name.clone(),
            message,
        };
        if crate::api::input::depth(&v) > crate::api::input::MAX_DEPTH {
            return Err(err(format!(
                "nested deeper than {} levels",
                crate::api::input::MAX_DEPTH
            )));
        }
        if let Some((field, raw, why)) = crate::api::input::invalid_quantities(&v).pop() {
            return Err(err(format!("{field}: invalid quantity {raw:?}: {why}")));
        }
        match kind.as_str() {
            "Node" => self
                .nodes
                .push(std::sync::Arc::new(decode(v).map_err(err)?)),
            "Pod" => self.pods.push(std::sync::Arc::new(decode(v).map_err(err)?)),
            "NodeMetric" => self
                .node_metrics
                .push(std::sync::Arc::new(decode(v).map_err(err)?)),
            "NodeSLO" => self.node_slos.push(decode(v).map_err(err)?),
            "Device" => self.devices.push(decode(v).map_err(err)?),
            "PersistentVolume" => self.storage.pvs.push(decode(v).map_err(err)?),
            "PersistentVolumeClaim" => self.storage.pvcs.push(decode(v).map_err(err)?),
            "StorageClass" => self.storage.classes.push(decode(v).map_err(err)?),
            "CSINode" => self.storage.csi_nodes.push(decode(v).map_err(err)?),
            "CSIDriver" => self.storage.csi_drivers.push(decode(v).map_err(err)?),
            "CSIStorageCapacity" => self.storage.capacities.push(decode(v).map_err(err)?),
            "PodDisruptionBudget" => self.pdbs.push(decode(v).map_err(err)?),
            "ConfigMap" => {
                let cm: ConfigMap = decode(v.clone()).map_err(err)?;
                let ns = cm.metadata.namespace.as_deref().unwrap_or("default");
                if ns == DEFAULT_NAMESPACE && cm.metadata.name.as_deref() == Some(DEFAULT_NAME) {
                    self.slo_config = Some(cm);
                } else {
                    // Others a plugin may read (DeviceShare's GPU shared-resource templates).
                    self.other.push(v);
                }
            }
            "ElasticQuota"
            | "PodGroup"
            | "ClusterNetworkTopology"
            | "Reservation"
            | "NodeResourceTopology"
            | "PriorityClass"
            | "PodMigrationJob"
            | "ReplicaSet"
            | "StatefulSet"
            | "Deployment"
            | "ReplicationController"
            | "Service"
            | "Job" => self.other.push(v),
            "" => return Err(err("no kind".into())),
            other => self.warnings.push(format!(
                "{file}: document {doc}: ignoring kind {other} ({name})"
            )),
        }
        Ok(())
    }
}

fn decode<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    crate::api::decode::from_value(v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lists_and_errors() {
        let mut s = Snapshot::default();
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\n---\nkind: Widget\nmetadata: {name: w}\n";
        s.add_text("snap.yaml", text).unwrap();
        assert_eq!((s.nodes.len(), s.pods.len(), s.warnings.len()), (1, 1, 1));
        let bad = "kind: Node\nmetadata: {name: b}\nstatus: {capacity: 7}\n";
        let e = s.add_text("bad.yaml", bad).unwrap_err().to_string();
        assert!(
            e.contains("bad.yaml: document 1 (Node b)") && e.contains("invalid type"),
            "{e}"
        );
        let e = s
            .add_text("syntax.yaml", "kind: [\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("syntax.yaml: document 1"), "{e}");
    }
}
