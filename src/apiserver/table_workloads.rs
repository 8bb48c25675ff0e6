//! kubectl's columns for the workload kinds the embedded controllers run (kube's
//! `printers/internalversion`): Deployment, ReplicaSet, DaemonSet, Job.

use serde_json::Value;

fn n(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn age(v: &Value) -> Value {
    super::humanize::human_age(
        v.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    )
    .into()
}

type Columns = Vec<(&'static str, &'static str, &'static str)>;

/// READY: ready replicas of the desired.
fn ready_of(v: &Value) -> Value {
    format!(
        "{}/{}",
        n(v, "/status/readyReplicas"),
        n(v, "/spec/replicas")
    )
    .into()
}

/// (columns as (name, type, description), rows) for a workload resource; `None` for others.
pub fn rows(group: &str, resource: &str, values: &[Value]) -> Option<(Columns, Vec<Vec<Value>>)> {
    let name = |v: &Value| {
        Value::from(
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    };
    let out = match (group, resource) {
        ("apps", "deployments") => (
            vec![
                ("Name", "string", "Name of the deployment"),
                ("Ready", "string", "Ready replicas of the desired"),
                ("Up-to-date", "integer", "Replicas of the current template"),
                ("Available", "integer", "Available replicas"),
                ("Age", "string", "Time since creation"),
            ],
            values
                .iter()
                .map(|v| {
                    vec![
                        name(v),
                        ready_of(v),
                        n(v, "/status/updatedReplicas").into(),
                        n(v, "/status/availableReplicas").into(),
                        age(v),
                    ]
                })
                .collect(),
        ),
        ("apps", "replicasets") => (
            vec![
                ("Name", "string", "Name of the replica set"),
                ("Desired", "integer", "Desired replicas"),
                ("Current", "integer", "Current replicas"),
                ("Ready", "integer", "Ready replicas"),
                ("Age", "string", "Time since creation"),
            ],
            values
                .iter()
                .map(|v| {
                    vec![
                        name(v),
                        n(v, "/spec/replicas").into(),
                        n(v, "/status/replicas").into(),
                        n(v, "/status/readyReplicas").into(),
                        age(v),
                    ]
                })
                .collect(),
        ),
        ("apps", "daemonsets") => (
            vec![
                ("Name", "string", "Name of the daemon set"),
                ("Desired", "integer", "Nodes that should run the pod"),
                ("Current", "integer", "Nodes running it"),
                ("Ready", "integer", "Ready pods"),
                ("Up-to-date", "integer", "Pods of the current template"),
                ("Available", "integer", "Available pods"),
                ("Node Selector", "string", "The template's node selector"),
                ("Age", "string", "Time since creation"),
            ],
            values
                .iter()
                .map(|v| {
                    let sel = v
                        .pointer("/spec/template/spec/nodeSelector")
                        .and_then(Value::as_object);
                    let sel = sel.map_or_else(Vec::new, |m| {
                        m.iter()
                            .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or("")))
                            .collect()
                    });
                    let sel = if sel.is_empty() {
                        "<none>".to_string()
                    } else {
                        sel.join(",")
                    };
                    vec![
                        name(v),
                        n(v, "/status/desiredNumberScheduled").into(),
                        n(v, "/status/currentNumberScheduled").into(),
                        n(v, "/status/numberReady").into(),
                        n(v, "/status/updatedNumberScheduled").into(),
                        n(v, "/status/numberAvailable").into(),
                        sel.into(),
                        age(v),
                    ]
                })
                .collect(),
        ),
        ("apps", "statefulsets") => (
            vec![
                ("Name", "string", "Name of the stateful set"),
                ("Ready", "string", "Ready replicas of the desired"),
                ("Age", "string", "Time since creation"),
            ],
            values
                .iter()
                .map(|v| vec![name(v), ready_of(v), age(v)])
                .collect(),
        ),
        ("batch", "jobs") => (
            vec![
                ("Name", "string", "Name of the job"),
                ("Status", "string", "Running, Complete, Failed or Suspended"),
                ("Completions", "string", "Succeeded pods of the completions"),
                ("Duration", "string", "Time the job ran"),
                ("Age", "string", "Time since creation"),
            ],
            values
                .iter()
                .map(|v| {
                    vec![
                        name(v),
                        job_status(v).into(),
                        completions(v).into(),
                        duration(v).into(),
                        age(v),
                    ]
                })
                .collect(),
        ),
        _ => return None,
    };
    Some(out)
}

fn job_status(v: &Value) -> &'static str {
    let conds = v.pointer("/status/conditions").and_then(Value::as_array);
    let has = |t: &str| {
        conds
            .into_iter()
            .flatten()
            .any(|c| c["type"] == t && c["status"] == "True")
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if v.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
        "Suspended"
    } else {
        "Running"
    }
}

fn completions(v: &Value) -> String {
    let done = n(v, "/status/succeeded");
    match v.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{done}/{c}"),
        None => format!("{done}/1 of {}", n(v, "/spec/parallelism").max(1)),
    }
}

fn duration(v: &Value) -> String {
    let t = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
    };
    let Some(start) = t("/status/startTime") else {
        return String::new();
    };
    let end = t("/status/completionTime").unwrap_or_else(k8s_openapi::jiff::Timestamp::now);
    super::humanize::human_seconds((end - start).get_seconds())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn kubectls_workload_columns() {
        let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let (cols, dep_rows) = super::rows("apps", "deployments", &[d]).unwrap();
        assert_eq!(cols[1].0, "Ready");
        assert_eq!(dep_rows[0][1], "2/3");
        let j = json!({"metadata": {"name": "pi"}, "spec": {"completions": 1},
            "status": {"succeeded": 1, "startTime": "2026-11-27T00:00:00Z", "completionTime": "2026-11-27T00:00:07Z",
                "conditions": [{"type": "Complete", "status": "True"}]}});
        let (_, job_rows) = super::rows("batch", "jobs", &[j]).unwrap();
        assert_eq!(
            job_rows[0][1..4],
            [json!("Complete"), json!("1/1"), json!("7s")]
        );
        assert!(super::rows("", "configmaps", &[]).is_none());
    }
}
