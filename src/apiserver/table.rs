//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which is
//! what `kubectl get` shows: pod and node columns like kube-apiserver's printers, CRD
//! `additionalPrinterColumns`, and Name/Age for everything else. Columns with priority > 0
//! appear with `-o wide`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::registry::ResourceInfo;
use super::store::Stored;

/// Whether the request asked for a Table.
pub fn wants_table(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',')
            .next()
            .is_some_and(|first| first.contains("as=Table"))
    })
}

fn col(name: &str, ty: &str, priority: u32, description: &str) -> Value {
    let mut c = json!({"name": name, "type": ty, "format": "", "description": description, "priority": priority});
    if name == "Name" {
        c["format"] = "name".into();
    }
    c
}

pub use super::humanize::{human_age, human_seconds};

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn none_if_empty(x: &str) -> String {
    if x.is_empty() {
        "<none>".into()
    } else {
        x.to_string()
    }
}

fn pod_row(p: &Value) -> Vec<Value> {
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let mut status = s(p, "/status/phase").to_string();
    for c in &statuses {
        if let Some(r) = c
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|r| *r != "ContainerCreating" || status == "Pending")
        {
            status = r.to_string();
        } else if let Some(r) = c
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
            .filter(|_| status != "Running")
        {
            status = r.to_string();
        }
    }
    if p.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".into();
    }
    vec![
        s(p, "/metadata/name").into(),
        format!("{ready}/{total}").into(),
        none_if_empty(&status).into(),
        restarts.into(),
        human_age(
            p.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str),
        )
        .into(),
        none_if_empty(s(p, "/status/podIP")).into(),
        none_if_empty(s(p, "/spec/nodeName")).into(),
        none_if_empty(s(p, "/status/nominatedNodeName")).into(),
        "<none>".into(),
    ]
}

fn node_row(n: &Value) -> Vec<Value> {
    let ready = n
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| {
            if c["status"] == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if n.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let addr = |t: &str| {
        n.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == t))
            .and_then(|x| x["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    vec![
        s(n, "/metadata/name").into(),
        status.into(),
        "<none>".into(),
        human_age(
            n.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str),
        )
        .into(),
        s(n, "/status/nodeInfo/kubeletVersion").into(),
        addr("InternalIP").into(),
        addr("ExternalIP").into(),
        none_if_empty(s(n, "/status/nodeInfo/osImage")).into(),
        none_if_empty(s(n, "/status/nodeInfo/kernelVersion")).into(),
        none_if_empty(s(n, "/status/nodeInfo/containerRuntimeVersion")).into(),
    ]
}

/// A simple JSONPath (`.status.phase`, `.spec.ttl`) as printer columns use it.
fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path
        .trim_start_matches('.')
        .split('.')
        .filter(|p| !p.is_empty())
    {
        cur = cur.get(part)?;
    }
    Some(cur)
}

fn crd_cell(v: Option<&Value>, ty: &str) -> Value {
    match (v, ty) {
        (None, _) => Value::Null,
        (Some(Value::String(ts)), "date") => human_age(Some(ts)).into(),
        (Some(x), _) => x.clone(),
    }
}

/// The Table for `items`.
pub fn table(
    info: &ResourceInfo,
    version: &str,
    printer_columns: &[Value],
    items: &[Arc<Stored>],
    rev: u64,
) -> Value {
    let values: Vec<Value> = items.iter().map(|i| i.value()).collect();
    let (g, r) = (info.group.as_str(), info.resource.as_str());
    let listed = super::table_storage::rows(g, r, &values)
        .or_else(|| super::table_core::rows(g, r, &values));
    let (columns, rows): (Vec<Value>, Vec<Vec<Value>>) =
        match (info.group.as_str(), info.resource.as_str()) {
            ("", "pods") => (
                vec![
                    col("Name", "string", 0, "Name of the pod"),
                    col("Ready", "string", 0, "Ready containers"),
                    col("Status", "string", 0, "Pod status"),
                    col("Restarts", "integer", 0, "Container restarts"),
                    col("Age", "string", 0, "Time since creation"),
                    col("IP", "string", 1, "Pod IP"),
                    col("Node", "string", 1, "Node the pod runs on"),
                    col(
                        "Nominated Node",
                        "string",
                        1,
                        "Node nominated by preemption",
                    ),
                    col("Readiness Gates", "string", 1, "Readiness gates"),
                ],
                values.iter().map(pod_row).collect(),
            ),
            _ if listed.is_some() => {
                let (cols, rows) = listed.unwrap_or_default();
                let columns = cols.iter().map(|(n, t, p, d)| col(n, t, *p, d)).collect();
                (columns, rows)
            }
            (g, r) if super::table_workloads::rows(g, r, &[]).is_some() => {
                let (cols, rows) = super::table_workloads::rows(g, r, &values).unwrap_or_default();
                let columns = cols.iter().map(|(n, t, d)| col(n, t, 0, d)).collect();
                (columns, rows)
            }
            ("", "nodes") => (
                vec![
                    col("Name", "string", 0, "Name of the node"),
                    col("Status", "string", 0, "Node readiness"),
                    col("Roles", "string", 0, "Node roles"),
                    col("Age", "string", 0, "Time since creation"),
                    col("Version", "string", 0, "Kubelet version"),
                    col("Internal-IP", "string", 1, "Internal IP"),
                    col("External-IP", "string", 1, "External IP"),
                    col("OS-Image", "string", 1, "OS image"),
                    col("Kernel-Version", "string", 1, "Kernel version"),
                    col("Container-Runtime", "string", 1, "Container runtime"),
                ],
                values.iter().map(node_row).collect(),
            ),
            _ => {
                let mut columns = vec![col("Name", "string", 0, "Name of the object")];
                for c in printer_columns {
                    columns.push(col(
                        c["name"].as_str().unwrap_or(""),
                        c["type"].as_str().unwrap_or("string"),
                        c["priority"].as_u64().unwrap_or(0) as u32,
                        c["description"].as_str().unwrap_or(""),
                    ));
                }
                let has_age = printer_columns.iter().any(|c| c["name"] == "Age");
                if !has_age {
                    columns.push(col("Age", "date", 0, "Time since creation"));
                }
                let rows = values
                    .iter()
                    .map(|v| {
                        let mut row = vec![Value::from(s(v, "/metadata/name"))];
                        for c in printer_columns {
                            row.push(crd_cell(
                                json_path(v, c["jsonPath"].as_str().unwrap_or("")),
                                c["type"].as_str().unwrap_or(""),
                            ));
                        }
                        if !has_age {
                            row.push(
                                human_age(
                                    v.pointer("/metadata/creationTimestamp")
                                        .and_then(Value::as_str),
                                )
                                .into(),
                            );
                        }
                        row
                    })
                    .collect();
                (columns, rows)
            }
        };
    let rows: Vec<Value> = rows
        .into_iter()
        .zip(&values)
        .map(|(cells, v)| {
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": v.get("metadata").cloned().unwrap_or_default()}})
        })
        .collect();
    let _ = version;
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rev.to_string()},
           "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_kubectl() {
        assert_eq!(human_seconds(45), "45s");
        assert_eq!(human_seconds(182), "3m2s");
        assert_eq!(human_seconds(1800), "30m");
        assert_eq!(human_seconds(5 * 3600 + 60), "5h1m");
        assert_eq!(human_seconds(30 * 3600), "30h");
        assert_eq!(human_seconds(3 * 86400), "3d0h");
        assert_eq!(human_seconds(20 * 86400), "20d");
    }

    #[test]
    fn pod_rows() {
        let p = json!({"metadata": {"name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"ready": true, "restartCount": 1, "state": {"running": {}}},
                {"ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let row = pod_row(&p);
        assert_eq!(row[1], "1/2");
        assert_eq!(row[2], "CrashLoopBackOff");
        assert_eq!(row[3], 3);
        assert_eq!(row[6], "n1");
        assert!(wants_table(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
        assert!(!wants_table(Some("application/json")));
    }
}
