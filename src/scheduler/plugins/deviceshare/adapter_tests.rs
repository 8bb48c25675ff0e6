//! Koordinator's `device_plugin_adapter_test.go` tables, with their names: each vendor's
//! adapter, then `TestPlugin_adaptForDevicePlugin` (vendor from the Device, the node lock).

use std::collections::BTreeMap;

use super::*;

/// Koordinator's fake clock.
const NOW_MS: i64 = 1_780_000_000_000;
const MI: i64 = 1 << 20;

fn gpu(minor: i32, id: &str, res: &[(&str, i64)]) -> Granted {
    Granted {
        minor,
        id: id.into(),
        resources: res.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        ..Default::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn share(minor: i32) -> Granted {
    gpu(minor, "", &[(GPU_CORE, 5), (GPU_MEMORY, 1024 * MI)])
}

#[test]
fn general_device_plugin_adapter_adapt() {
    // "normal"
    let mut out = Adapted::default();
    general(&mut out);
    assert_eq!(out.stamped, [ANNOTATION_BIND_TIMESTAMP]);
    assert!(out.annotations.is_empty());
}

struct Case {
    name: &'static str,
    gpus: Vec<Granted>,
    labels: BTreeMap<String, String>,
    want: Result<BTreeMap<String, String>, &'static str>,
}

fn target<'a>(
    labels: &'a BTreeMap<String, String>,
    node_annotations: &'a BTreeMap<String, String>,
    vendor: &'a str,
    alive: &'a dyn Fn(&str) -> bool,
) -> Target<'a> {
    Target {
        namespace: "default",
        name: "test-pod",
        labels,
        node: "test-node",
        node_annotations,
        vendor,
        model: "",
        now_ms: NOW_MS,
        alive,
    }
}

#[test]
fn general_gpu_device_plugin_adapter_adapt() {
    let hami = map(&[(LABEL_GPU_ISOLATION_PROVIDER, "HAMi-core")]);
    for (name, labels, gpus, want_labels) in [
        (
            "normal",
            map(&[]),
            vec![gpu(0, "", &[]), gpu(1, "", &[])],
            map(&[]),
        ),
        (
            "hami gpu isolation provider",
            hami,
            vec![gpu(0, "", &[])],
            map(&[(LABEL_HAMI_VGPU_NODE_NAME, "test-node")]),
        ),
    ] {
        let none = BTreeMap::new();
        let t = target(&labels, &none, "", &|_| false);
        let mut out = Adapted::default();
        general_gpu(&mut out, &t, &gpus);
        let minors = if gpus.len() == 2 { "0,1" } else { "0" };
        assert_eq!(
            out.annotations,
            map(&[(ANNOTATION_GPU_MINORS, minors)]),
            "{name}"
        );
        assert_eq!(out.labels, want_labels, "{name}");
    }
}

#[test]
fn huawei_gpu_device_plugin_adapter_adapt() {
    let mut vnpu = gpu(0, "", &[]);
    vnpu.template = Some("vir02".into());
    for (name, model, gpus, want) in [
        (
            "full NPU",
            "",
            vec![gpu(0, "", &[]), gpu(1, "", &[])],
            (ANNOTATION_HUAWEI_NPU_CORE, "0,1"),
        ),
        (
            "full NPU - Ascend-310P3-300I-DUO",
            "Ascend-310P3-300I-DUO",
            vec![gpu(0, "", &[]), gpu(1, "", &[])],
            (ANNOTATION_HUAWEI_ASCEND310P, "Ascend310P-0,Ascend310P-1"),
        ),
        (
            "vNPU",
            "",
            vec![vnpu],
            (ANNOTATION_HUAWEI_NPU_CORE, "0-vir02"),
        ),
    ] {
        let mut out = Adapted::default();
        huawei(&mut out, model, &gpus).unwrap();
        assert_eq!(out.stamped, [ANNOTATION_PREDICATE_TIME], "{name}");
        assert_eq!(out.annotations, map(&[want]), "{name}");
    }
}

fn run_vendor(f: fn(&mut Adapted, &[Granted]) -> Result<(), String>, cases: Vec<Case>) {
    for c in cases {
        let mut out = Adapted::default();
        let got = f(&mut out, &c.gpus).map(|_| out.annotations);
        assert_eq!(got, c.want.map_err(String::from), "{}", c.name);
        assert!(c.labels.is_empty());
    }
}

#[test]
fn cambricon_gpu_device_plugin_adapter_adapt() {
    let profile = map(&[
        (ANNOTATION_CAMBRICON_DSMLU_ASSIGNED, "false"),
        (ANNOTATION_CAMBRICON_DSMLU_PROFILE, "0_5_4"),
    ]);
    run_vendor(
        cambricon,
        vec![
            Case {
                name: "normal case",
                gpus: vec![share(0)],
                labels: map(&[]),
                want: Ok(profile),
            },
            Case {
                name: "multiple gpu share",
                gpus: vec![share(0), share(1)],
                labels: map(&[]),
                want: Err("multiple gpu share is not supported on device side"),
            },
            Case {
                name: "missing gpu core",
                gpus: vec![gpu(0, "", &[(GPU_MEMORY, 1024 * MI)])],
                labels: map(&[]),
                want: Err("gpu core resource is required"),
            },
            Case {
                name: "too small gpu memory",
                gpus: vec![gpu(0, "", &[(GPU_CORE, 5), (GPU_MEMORY, 128 * MI)])],
                labels: map(&[]),
                want: Err("gpu memory must not be less than 268435456 bytes"),
            },
        ],
    );
}

#[test]
fn metax_gpu_device_plugin_adapter_adapt() {
    let res = [(GPU_CORE, 5), (GPU_MEMORY, 1024 * MI)];
    run_vendor(
        metax,
        vec![
            Case {
                name: "normal case",
                gpus: vec![gpu(0, "GPU-0", &res), gpu(1, "GPU-1", &res)],
                labels: map(&[]),
                want: Ok(map(&[(
                    ANNOTATION_METAX_GPU_DEVICES_ALLOCATED,
                    r#"[[{"uuid":"GPU-0","compute":5,"vRam":1024},{"uuid":"GPU-1","compute":5,"vRam":1024}]]"#,
                )])),
            },
            Case {
                name: "missing gpu core",
                gpus: vec![gpu(0, "GPU-0", &[(GPU_MEMORY, 1024 * MI)])],
                labels: map(&[]),
                want: Err("gpu core resource is required"),
            },
            Case {
                name: "too small gpu memory",
                gpus: vec![gpu(0, "GPU-0", &[(GPU_CORE, 5), (GPU_MEMORY, 512 * 1024)])],
                labels: map(&[]),
                want: Err("gpu memory must not be less than 1048576 bytes"),
            },
        ],
    );
}

/// One row of `TestPlugin_adaptForDevicePlugin`: the pod's extra annotations (beyond the
/// bind time), and the node's lock annotation after.
struct PluginCase {
    name: &'static str,
    kind: &'static str,
    gpus: Vec<Granted>,
    vendor: &'static str,
    labels: BTreeMap<String, String>,
    held: Option<String>,
    locker_alive: bool,
    want: Result<BTreeMap<String, String>, String>,
    want_lock: Option<(&'static str, String)>,
}

fn lock_at(ms: i64, name: &str) -> String {
    format!("{},default,{name}", rfc3339(ms))
}

fn plugin_case(name: &'static str, vendor: &'static str, gpus: Vec<Granted>) -> PluginCase {
    PluginCase {
        name,
        kind: "gpu",
        gpus,
        vendor,
        labels: map(&[]),
        held: None,
        locker_alive: false,
        want: Ok(map(&[(ANNOTATION_GPU_MINORS, "0")])),
        want_lock: None,
    }
}

fn cambricon_case(name: &'static str, held: Option<String>, alive: bool) -> PluginCase {
    let mut c = plugin_case(name, "cambricon", vec![share(0)]);
    c.want = Ok(map(&[
        (ANNOTATION_GPU_MINORS, "0"),
        (ANNOTATION_CAMBRICON_DSMLU_ASSIGNED, "false"),
        (ANNOTATION_CAMBRICON_DSMLU_PROFILE, "0_5_4"),
    ]));
    c.want_lock = Some((ANNOTATION_CAMBRICON_DSMLU_LOCK, lock_at(NOW_MS, "test-pod")));
    c.held = held;
    c.locker_alive = alive;
    c
}

fn plugin_cases() -> Vec<PluginCase> {
    let minute_ago = Some(lock_at(NOW_MS - 60_000, "existing-pod"));
    let mut huawei = plugin_case("huawei", "huawei", vec![gpu(0, "", &[])]);
    huawei.want = Ok(map(&[
        (ANNOTATION_GPU_MINORS, "0"),
        (ANNOTATION_HUAWEI_NPU_CORE, "0"),
    ]));
    let mut metax = plugin_case(
        "metax",
        "metax",
        vec![gpu(0, "GPU-0", &[(GPU_CORE, 5), (GPU_MEMORY, 1024 * MI)])],
    );
    metax.want = Ok(map(&[
        (ANNOTATION_GPU_MINORS, "0"),
        (
            ANNOTATION_METAX_GPU_DEVICES_ALLOCATED,
            r#"[[{"uuid":"GPU-0","compute":5,"vRam":1024}]]"#,
        ),
    ]));
    metax.want_lock = Some((ANNOTATION_HAMI_LOCK, lock_at(NOW_MS, "test-pod")));
    let mut locked = cambricon_case("node locked", minute_ago.clone(), true);
    locked.want = Err(
        "failed to adapt for GPU device plugin of vendor \"cambricon\": failed to lock node: \
         node \"test-node\" has been locked"
            .into(),
    );
    locked.want_lock = None;
    let expired = lock_at(NOW_MS - NODE_LOCK_TIMEOUT_MS - 1000, "existing-pod");
    let mut hami = plugin_case(
        "hami gpu isolation provider",
        "nvidia",
        vec![gpu(0, "", &[])],
    );
    hami.labels = map(&[(LABEL_GPU_ISOLATION_PROVIDER, "HAMi-core")]);
    let mut fpga = plugin_case("non-gpu device allocation", "nvidia", vec![gpu(0, "", &[])]);
    fpga.kind = "fpga";
    fpga.want = Ok(map(&[]));
    vec![
        plugin_case("nvidia", "nvidia", vec![gpu(0, "", &[])]),
        huawei,
        cambricon_case("cambricon", None, false),
        metax,
        locked,
        cambricon_case("node lock expired", Some(expired), true),
        cambricon_case("original node locker pod deleted", minute_ago, false),
        plugin_case("unknown vendor", "test", vec![gpu(0, "", &[])]),
        hami,
        fpga,
    ]
}

#[test]
fn plugin_adapt_for_device_plugin() {
    for c in plugin_cases() {
        let node_annotations = match &c.held {
            Some(v) => map(&[(ANNOTATION_CAMBRICON_DSMLU_LOCK, v)]),
            None => map(&[]),
        };
        let alive = |key: &str| c.locker_alive && key == "default/existing-pod";
        let t = target(&c.labels, &node_annotations, c.vendor, &alive);
        let allocs: Allocations = [(c.kind.to_string(), c.gpus.clone())].into();
        let got = adapt(&t, &allocs);
        match (&got, &c.want) {
            (Ok(a), Ok(want)) => {
                assert_eq!(&a.annotations, want, "{}", c.name);
                assert!(a.stamped.contains(&ANNOTATION_BIND_TIMESTAMP), "{}", c.name);
                assert_eq!(a.node_lock, c.want_lock, "{}", c.name);
                let hami = c.name == "hami gpu isolation provider";
                assert_eq!(a.labels.contains_key(LABEL_HAMI_VGPU_NODE_NAME), hami);
            }
            (Err(e), Err(want)) => assert_eq!(e, want, "{}", c.name),
            _ => panic!("{}: got {got:?}, want {:?}", c.name, c.want),
        }
    }
}

#[test]
fn huawei_stamps_predicate_time_with_the_bind_time() {
    let mut pod = k8s_openapi::api::core::v1::Pod::default();
    let mut draft = crate::scheduler::framework::PodDraft::new(&pod);
    let mut a = Adapted::default();
    huawei(&mut a, "", &[gpu(0, "", &[])]).unwrap();
    general(&mut a);
    write(&a, &mut draft);
    pod = draft.changed().unwrap();
    let ann = pod.metadata.annotations.unwrap();
    let stamp = &ann[ANNOTATION_BIND_TIMESTAMP];
    assert_eq!(&ann[ANNOTATION_PREDICATE_TIME], stamp, "one bind time");
    assert!(stamp.parse::<i64>().unwrap() > NOW_MS * 1_000_000 / 2);
    assert!(bind_timestamp().parse::<i64>().unwrap() > stamp.parse::<i64>().unwrap());
}

#[test]
fn a_malformed_lock_is_an_error_naming_it() {
    let held = map(&[(ANNOTATION_CAMBRICON_DSMLU_LOCK, "garbage")]);
    let none = map(&[]);
    let t = target(&none, &held, "cambricon", &|_| true);
    let allocs: Allocations = [("gpu".to_string(), vec![share(0)])].into();
    let e = adapt(&t, &allocs).unwrap_err();
    assert!(e.ends_with("invalid node lock value \"garbage\""), "{e}");
}
