//! The koordlet DaemonSet, the manager, scheduler and descheduler Deployments and their
//! Services. Every process serves `/livez`, `/healthz`, `/readyz` and `/metrics` on its
//! admin port; liveness is `/livez` (a role waiting for RBAC is alive, not restarted).

use serde_json::{Value, json};

use super::{ADMIN_PORT, IMAGE, NAMESPACE, WEBHOOK_PORT};

fn env(pairs: &[(&str, &str)]) -> Value {
    pairs
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect()
}

fn probes(container: &mut Value) {
    container["readinessProbe"] = json!({"httpGet": {"path": "/readyz", "port": ADMIN_PORT}});
    container["livenessProbe"] =
        json!({"httpGet": {"path": "/livez", "port": ADMIN_PORT}, "initialDelaySeconds": 10});
}

fn labels(name: &str) -> Value {
    json!({"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "koord"})
}

fn metadata(name: &str) -> Value {
    json!({"name": name, "namespace": NAMESPACE, "labels": labels(name)})
}

/// The Service Prometheus scrapes (`/metrics` on the admin port).
pub fn metrics_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("{name}-metrics"), "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "metrics"}},
        "spec": {"selector": {"app.kubernetes.io/name": name}, "clusterIP": "None",
            "ports": [{"name": "metrics", "port": ADMIN_PORT, "targetPort": ADMIN_PORT}]},
    })
}

struct HostDir {
    name: &'static str,
    host: &'static str,
    mount: &'static str,
    read_only: bool,
    kind: &'static str,
}

const fn dir(
    name: &'static str,
    host: &'static str,
    mount: &'static str,
    read_only: bool,
    kind: &'static str,
) -> HostDir {
    HostDir {
        name,
        host,
        mount,
        read_only,
        kind,
    }
}

/// Koordinator's DaemonSet layout (/host-cgroup, /host-sys, /host-var-run, ...).
const KOORDLET_DIRS: &[HostDir] = &[
    dir(
        "host-cgroup",
        "/sys/fs/cgroup",
        "/host-cgroup",
        false,
        "Directory",
    ),
    dir("host-sys", "/sys", "/host-sys", true, "Directory"),
    dir("host-sys-fs", "/sys/fs", "/host-sys-fs", false, "Directory"),
    dir(
        "host-var-run",
        "/var/run",
        "/host-var-run",
        false,
        "Directory",
    ),
    dir("host-run", "/run", "/host-run", false, "Directory"),
    dir(
        "host-kubelet",
        "/var/lib/kubelet",
        "/var/lib/kubelet",
        true,
        "Directory",
    ),
    dir(
        "data",
        "/var/lib/koord",
        "/var/lib/koord",
        false,
        "DirectoryOrCreate",
    ),
    dir(
        "runtime-hooks",
        "/var/run/koordlet",
        "/host-var-run-koordlet",
        false,
        "DirectoryOrCreate",
    ),
    dir(
        "hookserver-dir",
        "/etc/runtime/hookserver.d",
        "/host-etc-hookserver",
        false,
        "DirectoryOrCreate",
    ),
];

pub fn koordlet() -> Vec<Value> {
    let mut c = json!({
        "name": "koordlet", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["--role=koordlet"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "ports": [{"name": "admin", "containerPort": ADMIN_PORT}],
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"}},
        "securityContext": {"privileged": true},
        "volumeMounts": KOORDLET_DIRS.iter().map(|d| json!({"name": d.name, "mountPath": d.mount,
            "readOnly": d.read_only})).collect::<Vec<_>>(),
    });
    let extra = env(&[
        ("KOORD_COMMON__ADMIN_ADDR", &format!("0.0.0.0:{ADMIN_PORT}")),
        ("KOORD_COMMON__DATA_DIR", "/var/lib/koord"),
        ("KOORD_KOORDLET__CGROUP_ROOT", "/host-cgroup"),
        ("KOORD_KOORDLET__SYS_ROOT", "/host-sys"),
        (
            "KOORD_KOORDLET__KUBELET__PODS_URL",
            "https://127.0.0.1:10250/pods",
        ),
        (
            "KOORD_KOORDLET__RUNTIME_HOOKS__SOCKET",
            "/host-var-run-koordlet/koordlet.sock",
        ),
        (
            "KOORD_KOORDLET__RUNTIME_HOOKS__HOST_ENDPOINT",
            "/var/run/koordlet/koordlet.sock",
        ),
        (
            "KOORD_KOORDLET__RUNTIME_HOOKS__HOOK_SERVER_DIR",
            "/host-etc-hookserver",
        ),
        (
            "KOORD_KOORDLET__DEVICES__XPU_DEVICE_INFOS_DIR",
            "/host-var-run-koordlet/xpu-device-infos/",
        ),
    ]);
    if let (Some(e), Some(more)) = (c["env"].as_array_mut(), extra.as_array()) {
        e.extend(more.iter().cloned());
    }
    probes(&mut c);
    let volumes: Vec<Value> = KOORDLET_DIRS
        .iter()
        .map(|d| json!({"name": d.name, "hostPath": {"path": d.host, "type": d.kind}}))
        .collect();
    let ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata("koordlet"),
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "koordlet"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "20%"}},
            "template": {"metadata": {"labels": labels("koordlet")}, "spec": {
                "serviceAccountName": "koordlet", "hostNetwork": true, "hostPID": true,
                "dnsPolicy": "ClusterFirstWithHostNet", "priorityClassName": "system-node-critical",
                "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 30,
                "containers": [c], "volumes": volumes}},
        },
    });
    vec![ds, metrics_service("koordlet")]
}

fn deployment(name: &str, replicas: u32, container: Value, volumes: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(name),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"metadata": {"labels": labels(name)}, "spec": {
                "serviceAccountName": name, "terminationGracePeriodSeconds": 30,
                "containers": [container], "volumes": volumes}},
        },
    })
}

/// The manager: every replica serves the webhooks, the Lease holder runs the controllers.
pub fn manager() -> Vec<Value> {
    let mut c = json!({
        "name": "koord", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["--role=manager"],
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "ports": [{"name": "admin", "containerPort": ADMIN_PORT},
            {"name": "webhook", "containerPort": WEBHOOK_PORT}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"}},
    });
    let extra = env(&[("KOORD_COMMON__ADMIN_ADDR", &format!("0.0.0.0:{ADMIN_PORT}"))]);
    if let (Some(e), Some(more)) = (c["env"].as_array_mut(), extra.as_array()) {
        e.extend(more.iter().cloned());
    }
    probes(&mut c);
    let webhook_service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "koordinator-webhook-service", "namespace": NAMESPACE, "labels": labels("koord-manager")},
        "spec": {"selector": {"app.kubernetes.io/name": "koord-manager"},
            "ports": [{"name": "https", "port": 443, "targetPort": WEBHOOK_PORT}]},
    });
    vec![
        deployment("koord-manager", 2, c, json!([])),
        webhook_service,
        metrics_service("koord-manager"),
    ]
}

/// The scheduler, under its own ServiceAccount as in Koordinator's chart; the Lease
/// holder schedules, every replica keeps its caches warm.
pub fn scheduler() -> Vec<Value> {
    let mut c = json!({
        "name": "koord", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["--role=scheduler"],
        "env": env(&[("KOORD_COMMON__ADMIN_ADDR", &format!("0.0.0.0:{ADMIN_PORT}")),
            ("KOORD_SCHEDULER__CONFIG_FILE", "/config/koord-scheduler.config")]),
        "ports": [{"name": "admin", "containerPort": ADMIN_PORT}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"}},
        "volumeMounts": [{"name": "scheduler-config", "mountPath": "/config", "readOnly": true}],
    });
    probes(&mut c);
    let volumes = json!([{"name": "scheduler-config", "configMap": {"name": "koord-scheduler-config",
        "items": [{"key": "koord-scheduler-config", "path": "koord-scheduler.config"}]}}]);
    vec![
        deployment("koord-scheduler", 2, c, volumes),
        metrics_service("koord-scheduler"),
    ]
}

pub fn descheduler() -> Vec<Value> {
    let mut c = json!({
        "name": "koord", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["--role=descheduler"],
        "env": env(&[("KOORD_COMMON__ADMIN_ADDR", &format!("0.0.0.0:{ADMIN_PORT}")),
            ("KOORD_DESCHEDULER__CONFIG_FILE", "/config/koord-descheduler.config")]),
        "ports": [{"name": "admin", "containerPort": ADMIN_PORT}],
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"}},
        "volumeMounts": [{"name": "descheduler-config", "mountPath": "/config", "readOnly": true}],
    });
    probes(&mut c);
    let volumes = json!([{"name": "descheduler-config", "configMap": {"name": "koord-descheduler-config",
        "items": [{"key": "koord-descheduler-config", "path": "koord-descheduler.config"}]}}]);
    vec![
        deployment("koord-descheduler", 1, c, volumes),
        metrics_service("koord-descheduler"),
    ]
}

/// Koordinator's koord-device-daemon as `koord device-scan`: it reads the host's PCI bus,
/// runs the vendors' tools inside the host's root (read-only at `/hostfs`; privileged, as
/// Koordinator's, because those tools open the devices' management nodes) and writes the
/// file the koordlet reads; it never talks to the API server, so it has no token.
pub fn device_daemon() -> Value {
    let name = "koord-device-daemon";
    let c = json!({
        "name": name, "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["device-scan", "--sys-root=/host-sys", "--host-root=/hostfs", "--dev-root=/dev",
            "--prints-output-file=/var/run/koordlet/xpu-device-infos/ic-device"],
        "securityContext": {"privileged": true},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"}},
        "volumeMounts": [{"name": "host-sys", "mountPath": "/host-sys", "readOnly": true},
            {"name": "hostfs", "mountPath": "/hostfs", "readOnly": true},
            {"name": "dev", "mountPath": "/dev"},
            {"name": "device-infos", "mountPath": "/var/run/koordlet/xpu-device-infos"}],
    });
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata(name),
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels(name)}, "spec": {
                "automountServiceAccountToken": false, "priorityClassName": "system-node-critical",
                "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 30,
                "containers": [c],
                "volumes": [{"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}},
                    {"name": "hostfs", "hostPath": {"path": "/", "type": "Directory"}},
                    {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}},
                    {"name": "device-infos", "hostPath": {"path": "/var/run/koordlet/xpu-device-infos",
                        "type": "DirectoryOrCreate"}}]}},
        },
    })
}
