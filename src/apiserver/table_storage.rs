//! kubectl's columns for claims and volumes (kube's `printers/internalversion`:
//! `printPersistentVolumeClaim`, `printPersistentVolume`), so `kubectl get pvc` shows a
//! claim's volume and capacity, and `Terminating` while protection holds it.

use serde_json::Value;

/// (name, type, priority, description): priority 1 columns show with `-o wide`.
pub type Columns = Vec<(&'static str, &'static str, u32, &'static str)>;

pub(super) fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn age(v: &Value) -> Value {
    super::humanize::human_age(
        v.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    )
    .into()
}

/// `GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, comma-joined.
fn access_modes(modes: Option<&Value>) -> String {
    let listed: Vec<&str> = modes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| listed.contains(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The phase, or `Terminating` once deletion began.
fn phase(v: &Value) -> Value {
    if v.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    s(v, "/status/phase").into()
}

fn or_unset(v: &str) -> Value {
    if v.is_empty() { "<unset>" } else { v }.into()
}

/// The class: the beta annotation first, as kube's helper reads it.
fn class(v: &Value) -> Value {
    let beta = v
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .and_then(Value::as_str);
    beta.unwrap_or_else(|| s(v, "/spec/storageClassName"))
        .into()
}

fn claim_row(v: &Value) -> Vec<Value> {
    let bound = !s(v, "/spec/volumeName").is_empty();
    let (capacity, modes) = if bound {
        (
            s(v, "/status/capacity/storage").to_string(),
            access_modes(v.pointer("/status/accessModes")),
        )
    } else {
        (String::new(), String::new())
    };
    vec![
        s(v, "/metadata/name").into(),
        phase(v),
        s(v, "/spec/volumeName").into(),
        capacity.into(),
        modes.into(),
        class(v),
        or_unset(s(v, "/spec/volumeAttributesClassName")),
        age(v),
        or_unset(s(v, "/spec/volumeMode")),
    ]
}

fn volume_row(v: &Value) -> Vec<Value> {
    let claim = match v.pointer("/spec/claimRef") {
        Some(c) if c.is_object() => format!("{}/{}", s(c, "/namespace"), s(c, "/name")),
        _ => String::new(),
    };
    vec![
        s(v, "/metadata/name").into(),
        s(v, "/spec/capacity/storage").into(),
        access_modes(v.pointer("/spec/accessModes")).into(),
        s(v, "/spec/persistentVolumeReclaimPolicy").into(),
        phase(v),
        claim.into(),
        class(v),
        or_unset(s(v, "/spec/volumeAttributesClassName")),
        s(v, "/status/reason").into(),
        age(v),
        or_unset(s(v, "/spec/volumeMode")),
    ]
}

/// (columns, rows) for claims and volumes; `None` for other resources.
pub fn rows(group: &str, resource: &str, values: &[Value]) -> Option<(Columns, Vec<Vec<Value>>)> {
    let (columns, row): (Columns, fn(&Value) -> Vec<Value>) = match (group, resource) {
        ("", "persistentvolumeclaims") => (
            vec![
                ("Name", "string", 0, "Name of the claim"),
                ("Status", "string", 0, "The claim's phase"),
                ("Volume", "string", 0, "The volume bound to it"),
                ("Capacity", "string", 0, "The bound volume's size"),
                (
                    "Access Modes",
                    "string",
                    0,
                    "The bound volume's access modes",
                ),
                ("StorageClass", "string", 0, "The class asked for"),
                (
                    "VolumeAttributesClass",
                    "string",
                    0,
                    "The volume attributes class",
                ),
                ("Age", "string", 0, "Time since creation"),
                ("VolumeMode", "string", 1, "Filesystem or Block"),
            ],
            claim_row,
        ),
        ("", "persistentvolumes") => (
            vec![
                ("Name", "string", 0, "Name of the volume"),
                ("Capacity", "string", 0, "Its size"),
                ("Access Modes", "string", 0, "Its access modes"),
                (
                    "Reclaim Policy",
                    "string",
                    0,
                    "What happens when its claim goes",
                ),
                ("Status", "string", 0, "The volume's phase"),
                ("Claim", "string", 0, "The claim it is bound to"),
                ("StorageClass", "string", 0, "Its class"),
                (
                    "VolumeAttributesClass",
                    "string",
                    0,
                    "The volume attributes class",
                ),
                ("Reason", "string", 0, "Why it is in its phase"),
                ("Age", "string", 0, "Time since creation"),
                ("VolumeMode", "string", 1, "Filesystem or Block"),
            ],
            volume_row,
        ),
        _ => return None,
    };
    Some((columns, values.iter().map(row).collect()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn claims_show_their_volume_and_terminating_while_held() {
        let c = json!({"metadata": {"name": "data", "deletionTimestamp": "2026-11-28T00:00:00Z"},
            "spec": {"volumeName": "pv1", "storageClassName": "local", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        let (cols, rows) = super::rows("", "persistentvolumeclaims", &[c]).unwrap();
        assert_eq!(cols.len(), rows[0].len());
        assert_eq!(
            rows[0][..7],
            [
                json!("data"),
                json!("Terminating"),
                json!("pv1"),
                json!("5Gi"),
                json!("RWO,RWX"),
                json!("local"),
                json!("<unset>")
            ]
        );
        assert_eq!(rows[0][8], json!("Filesystem"));
        let pending =
            json!({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}});
        let (_, rows) = super::rows("", "persistentvolumeclaims", &[pending]).unwrap();
        assert_eq!(
            rows[0][1..5],
            [json!("Pending"), json!(""), json!(""), json!("")]
        );
    }

    #[test]
    fn volumes_show_their_claim_and_policy() {
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "d", "name": "data"}}, "status": {"phase": "Bound"}});
        let (cols, rows) = super::rows("", "persistentvolumes", &[pv]).unwrap();
        assert_eq!(cols.len(), rows[0].len());
        assert_eq!(
            rows[0][..7],
            [
                json!("pv1"),
                json!("5Gi"),
                json!("RWO"),
                json!("Retain"),
                json!("Bound"),
                json!("d/data"),
                json!("")
            ]
        );
        assert!(super::rows("apps", "deployments", &[]).is_none());
    }
}
