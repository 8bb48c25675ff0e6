use serde_json::json;

use super::*;

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web", "namespace": "default", "labels": {"app": "web", "empty": ""},
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}},
                               "time": "2026-01-02T03:04:05Z"}]
        },
        "spec": {
            "containers": [{
                "name": "c", "image": "busybox", "command": ["sleep", "1d"],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": 1}},
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 0},
                "securityContext": {"privileged": false, "runAsUser": 0}
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "terminationGracePeriodSeconds": 0,
            "priority": 9000
        },
        "status": {"phase": "Running"}
    })
}

#[test]
fn objects_round_trip_through_the_envelope() {
    let bytes = encode(&pod()).unwrap();
    assert_eq!(&bytes[..4], b"k8s\0");
    let back = decode(&bytes).unwrap();
    let mut want = pod();
    // A number where a Quantity belongs comes back as its string form.
    want["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1".into();
    // A non-pointer zero is what Go's JSON encoder leaves out; pointer zeros that mean
    // something (runAsUser 0, a zero grace period, privileged false) stay.
    want["spec"]["containers"][0]["livenessProbe"]
        .as_object_mut()
        .unwrap()
        .remove("periodSeconds");
    assert_eq!(back, want);
}

#[test]
fn int_or_string_and_times_keep_their_json_forms() {
    let back = decode(&encode(&pod()).unwrap()).unwrap();
    let c = &back["spec"]["containers"][0];
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["ports"][0]["containerPort"], 80);
    assert_eq!(
        back["metadata"]["creationTimestamp"],
        "2026-01-02T03:04:05Z"
    );
    assert_eq!(
        back["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    );
}

#[test]
fn a_zero_time_reads_as_absent() {
    let k = pool::kube();
    let meta = k.named("apimachinery.pkg.apis.meta.v1.ObjectMeta");
    let mut m = DynamicMessage::new(meta.clone());
    m.set_field_by_name("name", Pv::String("a".into()));
    m.set_field_by_name("namespace", Pv::String(String::new()));
    let time = k.named("apimachinery.pkg.apis.meta.v1.Time");
    m.set_field_by_name("creationTimestamp", Pv::Message(DynamicMessage::new(time)));
    assert_eq!(transcode::to_json(&m), json!({"name": "a"}));
}

#[test]
fn wrong_types_name_the_field() {
    let mut p = pod();
    p["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty".into();
    let err = encode(&p).unwrap_err();
    assert!(
        err.contains("Pod.spec.containers[0].ports[0].containerPort"),
        "{err}"
    );
    assert!(
        decode(b"{\"kind\":\"Pod\"}")
            .unwrap_err()
            .contains("k8s\\0")
    );
    assert!(decode(b"k8s\0\xff\xff").is_err());
}

#[test]
fn status_and_delete_options_come_from_meta() {
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                        "message": "nope", "reason": "NotFound", "code": 404,
                        "details": {"name": "x", "kind": "pods"}, "metadata": {}});
    assert_eq!(decode(&encode(&status).unwrap()).unwrap(), status);
    let opts = json!({"apiVersion": "apps/v1", "kind": "DeleteOptions",
                      "propagationPolicy": "Foreground", "gracePeriodSeconds": 0});
    assert_eq!(decode(&encode(&opts).unwrap()).unwrap(), opts);
    assert!(supports("v1", "ConfigMap"));
    assert!(!supports("slo.koordinator.sh/v1alpha1", "NodeSLO"));
}

#[test]
fn accept_headers_pick_protobuf_only_when_first() {
    assert!(wants(Some(
        "application/vnd.kubernetes.protobuf,application/json"
    )));
    assert!(wants(Some("application/vnd.kubernetes.protobuf, */*")));
    assert!(!wants(Some(
        "application/json, application/vnd.kubernetes.protobuf"
    )));
    assert!(!wants(Some(
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
    )));
    assert!(!wants(None));
    assert!(only_protobuf(Some("application/vnd.kubernetes.protobuf")));
    assert!(!only_protobuf(Some(
        "application/vnd.kubernetes.protobuf,application/json"
    )));
}

#[test]
fn watch_frames_are_length_prefixed_events() {
    let frame = watch_frame("ADDED", &pod()).unwrap();
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let ev = DynamicMessage::decode(pool::kube().named(WATCH_EVENT), &frame[4..]).unwrap();
    assert_eq!(
        ev.get_field_by_name("type").unwrap().as_str(),
        Some("ADDED")
    );
    let raw = match ev.get_field_by_name("object").as_deref() {
        Some(Pv::Message(m)) => m
            .get_field_by_name("raw")
            .unwrap()
            .as_bytes()
            .unwrap()
            .clone(),
        _ => panic!("no object"),
    };
    assert_eq!(decode(&raw).unwrap()["metadata"]["name"], "web");
}

#[test]
fn go_durations_parse_and_print() {
    for (s, n) in [
        ("0s", 0),
        ("1.5s", 1_500_000_000),
        ("300ms", 300_000_000),
        ("1h0m0s", 3_600_000_000_000),
        ("2m30s", 150_000_000_000),
        ("1µs", 1_000),
        ("-5s", -5_000_000_000),
    ] {
        assert_eq!(parse_duration(s), Some(n), "{s}");
        assert_eq!(format_duration(n), s, "{n}");
    }
    assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
    assert_eq!(parse_duration("abc"), None);
    assert_eq!(parse_duration(""), None);
}

#[test]
fn type_errors_read_as_kube_apiserver_writes_them() {
    let mut p = pod();
    assert_eq!(check("v1", "Pod", &p), Some(Ok(vec![])));
    p["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty".into();
    let err = check("v1", "Pod", &p).unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1}});
    assert_eq!(
        check("v1", "ConfigMap", &cm)
            .unwrap()
            .unwrap_err()
            .to_string(),
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    let mut extra = pod();
    extra["spec"]["bogus"] = 1.into();
    extra["spec"]["containers"][0]["httpGet"] = json!({});
    extra["spec"]["volumes"][0]["hostPath"] = json!({"path": "/x"});
    assert_eq!(
        check("v1", "Pod", &extra).unwrap().unwrap(),
        vec![
            "spec.bogus".to_string(),
            "spec.containers[0].httpGet".to_string()
        ]
    );
    assert!(check("slo.koordinator.sh/v1alpha1", "NodeSLO", &cm).is_none());
}

#[test]
fn fields_named_after_go_fields_keep_their_json_names() {
    let hooks = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                       "metadata": {"name": "m"},
                       "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x/y"},
                                     "matchConditions": [{"name": "n", "expression": "true"}]}]});
    assert_eq!(decode(&encode(&hooks).unwrap()).unwrap(), hooks);
    assert_eq!(
        check(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            &hooks
        ),
        Some(Ok(vec![]))
    );
}
