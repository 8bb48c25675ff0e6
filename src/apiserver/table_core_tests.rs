use serde_json::json;

fn row(group: &str, resource: &str, v: serde_json::Value) -> Vec<serde_json::Value> {
    let (cols, rows) = super::rows(group, resource, &[v]).unwrap();
    assert_eq!(cols.len(), rows[0].len(), "{resource}");
    rows[0].clone()
}

#[test]
fn services_show_type_ips_ports_and_selector() {
    let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort",
        "clusterIP": "10.96.0.10", "selector": {"app": "web"},
        "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
    let r = row("", "services", svc);
    assert_eq!(
        r[..5],
        [
            json!("web"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP")
        ]
    );
    assert_eq!(r[6], json!("app=web"));
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.11"}});
    assert_eq!(row("", "services", lb)[3], json!("<pending>"));
    let headless = json!({"metadata": {"name": "db"}, "spec": {"clusterIP": "None"}});
    let r = row("", "services", headless);
    assert_eq!(
        (&r[1], &r[2], &r[4], &r[6]),
        (
            &json!("ClusterIP"),
            &json!("None"),
            &json!("<none>"),
            &json!("<none>")
        )
    );
}

#[test]
fn config_maps_secrets_namespaces_and_accounts_count_their_entries() {
    let cm = json!({"metadata": {"name": "slo-controller-config"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
    assert_eq!(row("", "configmaps", cm)[1], json!(3));
    let secret = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}});
    assert_eq!(
        row("", "secrets", secret)[1..3],
        [json!("Opaque"), json!(1)]
    );
    let ns = json!({"metadata": {"name": "demo"}, "status": {"phase": "Terminating"}});
    assert_eq!(row("", "namespaces", ns)[1], json!("Terminating"));
    let sa = json!({"metadata": {"name": "default"}});
    assert_eq!(row("", "serviceaccounts", sa)[1], json!(0));
}

#[test]
fn events_name_their_object_and_classes_their_default() {
    let ev = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "BECPUSuppressed",
        "involvedObject": {"kind": "Node", "name": "n1"}, "message": "best-effort CfsQuota -1 -> 200000\n"});
    let r = row("", "events", ev);
    assert_eq!(
        r[1..],
        [
            json!("Warning"),
            json!("BECPUSuppressed"),
            json!("node/n1"),
            json!("best-effort CfsQuota -1 -> 200000")
        ]
    );
    let sc = json!({"metadata": {"name": "local", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
    let r = row("storage.k8s.io", "storageclasses", sc);
    assert_eq!(
        r[..5],
        [
            json!("local (default)"),
            json!("kubernetes.io/no-provisioner"),
            json!("Delete"),
            json!("WaitForFirstConsumer"),
            json!("false")
        ]
    );
    let pc = json!({"metadata": {"name": "koord-batch"}, "value": 5000});
    let r = row("scheduling.k8s.io", "priorityclasses", pc);
    assert_eq!(
        (&r[1], &r[2], &r[4]),
        (&json!(5000), &json!(false), &json!("PreemptLowerPriority"))
    );
    let lease =
        json!({"metadata": {"name": "koord-scheduler"}, "spec": {"holderIdentity": "koord-1"}});
    assert_eq!(
        row("coordination.k8s.io", "leases", lease)[1],
        json!("koord-1")
    );
    assert!(super::rows("apps", "deployments", &[]).is_none());
}
