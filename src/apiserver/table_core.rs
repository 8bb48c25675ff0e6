//! kubectl's columns for the core kinds an operator lists most in a small cluster (kube's
//! `printers/internalversion`): namespaces, ConfigMaps (koord's `slo-controller-config`),
//! Secrets, Services, ServiceAccounts, Events, PriorityClasses, StorageClasses and Leases.

use serde_json::Value;

use super::table_storage::{Columns, age, s};

fn age_of(v: &Value, ptr: &str) -> Value {
    super::humanize::human_age(v.pointer(ptr).and_then(Value::as_str)).into()
}

fn entries(v: &Value, ptr: &str) -> usize {
    v.pointer(ptr)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

fn or_none(v: String) -> Value {
    if v.is_empty() { "<none>".into() } else { v }.into()
}

/// `80/TCP`, `80:30080/TCP` with a node port, comma-joined.
fn ports(v: &Value) -> String {
    let ports = v.pointer("/spec/ports").and_then(Value::as_array);
    let each = ports.into_iter().flatten().map(|p| {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        match p.get("nodePort").and_then(Value::as_i64) {
            Some(np) => format!("{port}:{np}/{proto}"),
            None => format!("{port}/{proto}"),
        }
    });
    each.collect::<Vec<_>>().join(",")
}

/// kube's `getServiceExternalIP`.
fn external_ip(v: &Value) -> Value {
    let listed = |ptr: &str| -> Vec<String> {
        let list = v.pointer(ptr).and_then(Value::as_array);
        list.into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let external = listed("/spec/externalIPs");
    match s(v, "/spec/type") {
        "LoadBalancer" => {
            let ingress = v
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array);
            let mut ips: Vec<String> = ingress
                .into_iter()
                .flatten()
                .map(|i| s(i, "/ip").to_string() + s(i, "/hostname"))
                .filter(|x| !x.is_empty())
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
            .into()
        }
        "ExternalName" => s(v, "/spec/externalName").into(),
        _ => or_none(external.join(",")),
    }
}

fn selector(v: &Value) -> Value {
    let sel = v.pointer("/spec/selector").and_then(Value::as_object);
    let pairs = sel
        .into_iter()
        .flatten()
        .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or("")));
    or_none(pairs.collect::<Vec<_>>().join(","))
}

/// `pod/web-1`: the involved object's kind, lower case, and name.
fn involved(v: &Value) -> Value {
    let kind = s(v, "/involvedObject/kind").to_ascii_lowercase();
    format!("{kind}/{}", s(v, "/involvedObject/name")).into()
}

fn last_seen(v: &Value) -> Value {
    for p in ["/series/lastObservedTime", "/lastTimestamp", "/eventTime"] {
        if v.pointer(p).and_then(Value::as_str).is_some() {
            return age_of(v, p);
        }
    }
    age(v)
}

fn class_name(v: &Value) -> Value {
    let default = v
        .pointer("/metadata/annotations")
        .and_then(|a| {
            a.get("storageclass.kubernetes.io/is-default-class")
                .or_else(|| a.get("storageclass.beta.kubernetes.io/is-default-class"))
        })
        .and_then(Value::as_str)
        == Some("true");
    let name = s(v, "/metadata/name");
    if default {
        format!("{name} (default)")
    } else {
        name.to_string()
    }
    .into()
}

type Row = fn(&Value) -> Vec<Value>;

fn name(v: &Value) -> Value {
    s(v, "/metadata/name").into()
}

/// (columns, rows) for these kinds; `None` for others.
pub fn rows(group: &str, resource: &str, values: &[Value]) -> Option<(Columns, Vec<Vec<Value>>)> {
    let (columns, row): (Columns, Row) = match (group, resource) {
        ("", "namespaces") => (
            vec![
                ("Name", "string", 0, "Name of the namespace"),
                ("Status", "string", 0, "The namespace's phase"),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| vec![name(v), s(v, "/status/phase").into(), age(v)],
        ),
        ("", "configmaps") => (
            vec![
                ("Name", "string", 0, "Name of the ConfigMap"),
                ("Data", "integer", 0, "Entries in data and binaryData"),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| {
                let n = entries(v, "/data") + entries(v, "/binaryData");
                vec![name(v), n.into(), age(v)]
            },
        ),
        ("", "secrets") => (
            vec![
                ("Name", "string", 0, "Name of the Secret"),
                ("Type", "string", 0, "The Secret's type"),
                ("Data", "integer", 0, "Entries in data"),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| {
                vec![
                    name(v),
                    s(v, "/type").into(),
                    entries(v, "/data").into(),
                    age(v),
                ]
            },
        ),
        ("", "services") => (
            vec![
                ("Name", "string", 0, "Name of the Service"),
                ("Type", "string", 0, "The Service's type"),
                ("Cluster-IP", "string", 0, "Its cluster IP"),
                ("External-IP", "string", 0, "Its external IPs"),
                ("Port(s)", "string", 0, "Its ports"),
                ("Age", "string", 0, "Time since creation"),
                ("Selector", "string", 1, "The pods it selects"),
            ],
            |v| {
                let ty = match s(v, "/spec/type") {
                    "" => "ClusterIP",
                    t => t,
                };
                vec![
                    name(v),
                    ty.into(),
                    or_none(s(v, "/spec/clusterIP").to_string()),
                    external_ip(v),
                    or_none(ports(v)),
                    age(v),
                    selector(v),
                ]
            },
        ),
        ("", "serviceaccounts") => (
            vec![
                ("Name", "string", 0, "Name of the ServiceAccount"),
                ("Secrets", "integer", 0, "Secrets it lists"),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| {
                let n = v
                    .pointer("/secrets")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                vec![name(v), n.into(), age(v)]
            },
        ),
        ("", "events") => (
            vec![
                (
                    "Last Seen",
                    "string",
                    0,
                    "Time since the event last happened",
                ),
                ("Type", "string", 0, "Normal or Warning"),
                ("Reason", "string", 0, "Why"),
                ("Object", "string", 0, "The object it is about"),
                ("Message", "string", 0, "What happened"),
            ],
            |v| {
                vec![
                    last_seen(v),
                    s(v, "/type").into(),
                    s(v, "/reason").into(),
                    involved(v),
                    s(v, "/message").trim().into(),
                ]
            },
        ),
        ("scheduling.k8s.io", "priorityclasses") => (
            vec![
                ("Name", "string", 0, "Name of the PriorityClass"),
                ("Value", "integer", 0, "Its priority"),
                (
                    "Global-Default",
                    "boolean",
                    0,
                    "Whether pods without one get it",
                ),
                ("Age", "string", 0, "Time since creation"),
                ("PreemptionPolicy", "string", 0, "Whether its pods preempt"),
            ],
            |v| {
                let default = v
                    .get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let policy = match s(v, "/preemptionPolicy") {
                    "" => "PreemptLowerPriority",
                    p => p,
                };
                let value = v.get("value").and_then(Value::as_i64).unwrap_or(0);
                vec![name(v), value.into(), default.into(), age(v), policy.into()]
            },
        ),
        ("storage.k8s.io", "storageclasses") => (
            vec![
                ("Name", "string", 0, "Name of the StorageClass"),
                ("Provisioner", "string", 0, "Who makes its volumes"),
                (
                    "ReclaimPolicy",
                    "string",
                    0,
                    "What happens to a released volume",
                ),
                ("VolumeBindingMode", "string", 0, "When claims bind"),
                (
                    "AllowVolumeExpansion",
                    "string",
                    0,
                    "Whether claims may grow",
                ),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| {
                let grow = v
                    .get("allowVolumeExpansion")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                vec![
                    class_name(v),
                    s(v, "/provisioner").into(),
                    s(v, "/reclaimPolicy").into(),
                    s(v, "/volumeBindingMode").into(),
                    grow.to_string().into(),
                    age(v),
                ]
            },
        ),
        ("coordination.k8s.io", "leases") => (
            vec![
                ("Name", "string", 0, "Name of the Lease"),
                ("Holder", "string", 0, "Who holds it"),
                ("Age", "string", 0, "Time since creation"),
            ],
            |v| vec![name(v), s(v, "/spec/holderIdentity").into(), age(v)],
        ),
        _ => return None,
    };
    Some((columns, values.iter().map(row).collect()))
}

#[cfg(test)]
#[path = "table_core_tests.rs"]
mod tests;
