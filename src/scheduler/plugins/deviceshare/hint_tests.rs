//! DeviceShare's device-allocate-hint (selectors, VFs, allocate strategies, exclusive
//! policies) and the GPU shared-resource templates.

use super::*;

fn hints(v: Value) -> super::hint::Hints {
    let p: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(json!({"metadata": {"annotations": {
        super::hint::ANNOTATION_DEVICE_ALLOCATE_HINT: v.to_string()}}}))
        .unwrap();
    super::hint::of(&p).unwrap()
}

#[test]
fn allocate_hints_select_devices_and_virtual_functions() {
    // Two NICs: minor 0's VF group is labelled for this workload, minor 1's is not.
    let mut d = device(&[], &[(0, 0, "p0"), (1, 0, "p0")]);
    let list = d["spec"]["devices"].as_array_mut().unwrap();
    list[0]["labels"] = json!({"nic": "fast"});
    list[0]["vfGroups"] = json!([{"labels": {"type": "general"},
        "vfs": [{"minor": 12, "busID": "0000:0f:00.3"}, {"minor": 11, "busID": "0000:0f:00.2"}]}]);
    list[1]["vfGroups"] =
        json!([{"labels": {"type": "other"}, "vfs": [{"minor": 21, "busID": "0000:1f:00.2"}]}]);
    let devs = node_devices(d);
    let req = gpu_request(json!({"koordinator.sh/rdma": "1"}));
    let none = Used::new();
    let vf = hints(json!({"rdma": {"vfSelector": {"matchLabels": {"type": "general"}}}}));
    let a = run_hinted(&devs, &none, &none, false, &req, None, &vf).unwrap();
    assert_eq!(
        minors(&a, "rdma"),
        [0],
        "only NIC 0 has a VF the selector picks"
    );
    assert_eq!(
        a["rdma"][0].vfs,
        [("0000:0f:00.2".to_string(), 11)],
        "lowest bus id"
    );
    let sel = hints(json!({"rdma": {"selector": {"matchLabels": {"nic": "fast"}}}}));
    let busy = used(&[("rdma", 0, &[(RDMA, 100)])]);
    let e = run_hinted(&devs, &busy, &none, false, &req, None, &sel).unwrap_err();
    assert_eq!(e, "Insufficient rdma devices", "NIC 1 is not selected");
    let plain = node_devices(device(&[], &[(0, 0, "p0")]));
    let mut no_vfs = plain.clone();
    no_vfs.by_type.get_mut("rdma").unwrap()[0].vf_groups.clear();
    let e = run_hinted(&no_vfs, &none, &none, false, &req, None, &vf).unwrap_err();
    assert_eq!(e, "Insufficient rdma VirtualFunctions");
}

/// GPU shared-resource templates (Koordinator's allocator_gpu `allocateByTemplate` cases):
/// with the chart's templates, a shared NPU request equal to `vir02` is placed on an
/// Ascend-310P node and its allocation names the template; a request equal to no template
/// is refused at PreFilter; a node whose model has no such template is refused; a request
/// not naming a templated resource is not held to templates.
#[test]
fn gpu_shared_resource_templates_cut_npu_shares() {
    let npu_node = |name: &str, model: &str| {
        json!({"metadata": {"name": name, "labels": {
            "node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": model}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
    };
    let mut c = cluster(vec![
        npu_node("n1", "Ascend-310P"),
        npu_node("n2", "Ascend-910"),
    ]);
    for node in ["n1", "n2"] {
        let d = json!({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device",
            "metadata": {"name": node}, "spec": {"devices": [{"type": "gpu", "minor": 0, "id": "NPU-0",
                "health": true, "resources": {"huawei.com/npu-core": "8", "huawei.com/npu-cpu": "7",
                    "huawei.com/npu-dvpp": "100", GPU_MEMORY: "24Gi", GPU_MEMORY_RATIO: "100", GPU_CORE: "100"}}]}});
        c.upsert_device(&serde_json::from_value(d).unwrap());
    }
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "gpu-shared-resource-templates", "namespace": "koordinator-system"},
        "data": {"data.yaml": "huawei-Ascend-310P:\n  vir02:\n    huawei.com/npu-core: \"2\"\n    huawei.com/npu-cpu: \"2\"\n    huawei.com/npu-dvpp: \"25\"\n    koordinator.sh/gpu-memory: 6Gi\nhuawei-Ascend-910:\n  vir04:\n    huawei.com/npu-core: \"4\"\n    huawei.com/npu-cpu: \"1\"\n    koordinator.sh/gpu-memory: 4Gi\n"}}))
    .unwrap();
    c.gpu_templates = Arc::new(
        crate::scheduler::model::gpu_templates::GpuTemplates::from_config_map(&cm).unwrap(),
    );
    let p = DeviceShare::new(serde_json::from_value(json!({})).unwrap()).unwrap();
    let npu_pod = |core: &str, cpu: &str, dvpp: Option<&str>, mem: &str| {
        let mut r = json!({"koordinator.sh/gpu.shared": "1", "huawei.com/npu-core": core,
            "huawei.com/npu-cpu": cpu, GPU_MEMORY: mem});
        if let Some(d) = dvpp {
            r["huawei.com/npu-dvpp"] = d.into();
        }
        pod(
            json!({"metadata": {"name": "npu", "namespace": "default", "uid": "npu"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": r}}]}}),
        )
    };
    let vir02 = npu_pod("2", "2", Some("25"), "6Gi");
    let mut state = CycleState::default();
    assert_eq!(p.pre_filter(&mut state, &vir02, &c).0.code, Code::Success);
    let on_910 = p.filter(&state, &vir02, &c.nodes[1], &c);
    assert_eq!(
        (on_910.code, on_910.message().as_str()),
        (Code::UnschedulableAndUnresolvable, NO_TEMPLATE)
    );
    let ok = p.filter(&state, &vir02, &c.nodes[0], &c);
    assert!(ok.is_success(), "{ok:?}");
    assert!(p.reserve(&mut state, &vir02, "n1", &c).is_success());
    let v = reserved_devices(&state).unwrap();
    assert_eq!(
        v["gpu"][0]["extension"]["gpuSharedResourceTemplate"], "vir02",
        "{v}"
    );
    let parsed = devices::parse(&v.to_string()).unwrap();
    assert_eq!(
        parsed["gpu"][0].template.as_deref(),
        Some("vir02"),
        "read back"
    );
    let odd = npu_pod("3", "2", Some("25"), "6Gi");
    let (s, _) = p.pre_filter(&mut CycleState::default(), &odd, &c);
    assert_eq!(
        (s.code, s.message().as_str()),
        (Code::UnschedulableAndUnresolvable, NO_TEMPLATE)
    );
    // Not naming huawei.com/npu-core (the default matched resource): no template is needed.
    let p_other = DeviceShare::new(
        serde_json::from_value(
            json!({"gpuSharedResourceTemplatesConfig": {"matchedResources": ["example.com/x"]}}),
        )
        .unwrap(),
    )
    .unwrap();
    let (s, _) = p_other.pre_filter(&mut CycleState::default(), &odd, &c);
    assert_eq!(s.code, Code::Success);
}

/// `device-allocate-hint` strategies and exclusive policies (Koordinator's
/// DefaultDeviceHandler `CalcDesiredRequestsAndCount` and `filterFreeDevicesByPCIe`):
/// ApplyForAll gives one share of every device the selector picks, RequestsAsCount reads
/// the amount as a number of devices (whole ones with DeviceLevel), PCIeLevel takes only
/// devices whose PCIe switch is wholly free.
#[test]
fn allocate_strategies_and_exclusive_policies() {
    let mut d = device(
        &[],
        &[(1, 0, "p0"), (2, 0, "p0"), (3, 0, "p1"), (4, 0, "p1")],
    );
    let list = d["spec"]["devices"].as_array_mut().unwrap();
    for dev in list.iter_mut().take(2) {
        dev["labels"] = json!({"nic": "fast"});
    }
    let devs = node_devices(d);
    let none = Used::new();
    let rdma = |v: &str| gpu_request(json!({"koordinator.sh/rdma": v}));
    let with = |req: &Request, h: &super::hint::Hints| {
        let mut req = req.clone();
        requests_as_count(&mut req, h);
        run_hinted(&devs, &none, &none, false, &req, None, h)
    };
    let all = hints(json!({"rdma": {"allocateStrategy": "ApplyForAll"}}));
    let a = with(&rdma("1"), &all).unwrap();
    assert_eq!(minors(&a, "rdma"), [1, 2, 3, 4]);
    assert!(a["rdma"].iter().all(|g| g.resources[RDMA] == 1));
    let fast = hints(json!({"rdma": {"allocateStrategy": "ApplyForAll",
        "selector": {"matchLabels": {"nic": "fast"}}}}));
    assert_eq!(minors(&with(&rdma("1"), &fast).unwrap(), "rdma"), [1, 2]);
    let nothing = hints(json!({"rdma": {"allocateStrategy": "ApplyForAll",
        "selector": {"matchLabels": {"nic": "none"}}}}));
    assert_eq!(
        with(&rdma("1"), &nothing).unwrap_err(),
        "Insufficient rdma devices"
    );
    let count = hints(json!({"rdma": {"allocateStrategy": "RequestsAsCount"}}));
    let a = with(&rdma("2"), &count).unwrap();
    assert_eq!(a["rdma"].len(), 2);
    assert!(a["rdma"].iter().all(|g| g.resources[RDMA] == 1));
    let whole = hints(
        json!({"rdma": {"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"}}),
    );
    let a = with(&rdma("3"), &whole).unwrap();
    assert_eq!(a["rdma"].len(), 3);
    assert!(a["rdma"].iter().all(|g| g.resources[RDMA] == 100));
    // Device 2 (on p0) is partly used: with PCIeLevel only p1's devices are eligible.
    let pcie = hints(json!({"rdma": {"exclusivePolicy": "PCIeLevel"}}));
    let busy = used(&[("rdma", 2, &[(RDMA, 10)])]);
    let a = run_hinted(&devs, &busy, &none, false, &rdma("100"), None, &pcie).unwrap();
    assert!(matches!(minors(&a, "rdma")[..], [3] | [4]), "{a:?}");
    let both = used(&[("rdma", 2, &[(RDMA, 10)]), ("rdma", 4, &[(RDMA, 10)])]);
    let e = run_hinted(&devs, &both, &none, false, &rdma("100"), None, &pcie).unwrap_err();
    assert_eq!(
        e, "Insufficient rdma devices",
        "no PCIe switch is wholly free"
    );
}
