//! DeviceShare's GPU shared-resource templates in the live scheduler: the ConfigMap the
//! default DeviceShare args name arrives on its watch, and a shared NPU pod equal to a
//! template is bound with its allocation naming the template — the same snapshot that
//! `koord explain schedule` answers in `explain_schedule.rs`.

use crate::common::TestApi;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use koord::api::scheduling::device::Device;
use koord::scheduler::live::Ev;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher::Event::Apply;
use serde_json::Value;

const NPU: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/npu-templates-snapshot.yaml"
);

fn docs(kind: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(NPU).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::with::singleton_map_recursive::deserialize::<Value, _>(d).unwrap())
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_templated_npu_share_is_bound_with_its_template() {
    let mut api = TestApi::start().await;
    let c = api.client.clone();
    let pp = PostParams::default();
    let mut s = crate::common::default_scheduler(&c);
    let source = s
        .gpu_templates_source
        .clone()
        .expect("the default profile runs DeviceShare");
    assert_eq!(
        (
            source.config_map_namespace.as_str(),
            source.config_map_name.as_str()
        ),
        ("koordinator-system", "gpu-shared-resource-templates")
    );
    for n in docs("Node") {
        let n = Api::<Node>::all(c.clone())
            .create(&pp, &obj(n))
            .await
            .unwrap();
        s.apply(Ev::Node(Apply(n)));
    }
    for d in docs("Device") {
        s.apply(Ev::Device(Apply(obj::<Device>(d))));
    }
    let cm: ConfigMap = obj(docs("ConfigMap").remove(0));
    s.apply(Ev::GpuTemplates(Box::new(Apply(cm))));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let vir02 = docs("Pod")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "vir02")
        .unwrap();
    let created = pods.create(&pp, &obj(vir02)).await.unwrap();
    s.apply(Ev::Pod(Apply(created)));
    assert!(s.schedule_one());
    s.settle().await;
    let bound = pods.get("vir02").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-310p"));
    let ann = bound.metadata.annotations.unwrap();
    let devices: Value =
        serde_json::from_str(&ann["scheduling.koordinator.sh/device-allocated"]).unwrap();
    assert_eq!(
        devices["gpu"][0]["extension"]["gpuSharedResourceTemplate"], "vir02",
        "{devices}"
    );
    api.stop().await;
}
