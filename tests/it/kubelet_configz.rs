//! `koord --role=all --embedded`: the koordlet reads the node runtime's kubelet `/configz`
//! (behind the API server's token, as a kubelet's authenticated port), and the node's
//! NodeResourceTopology carries what it says.

use crate::common;

use std::time::Duration;

use common::{Koord, wait_until};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

#[test]
fn the_koordlet_reads_the_node_runtimes_configz() {
    if !common::is_root() {
        eprintln!("skipped: the embedded node runtime needs root for its cgroups");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let koord = Koord::embedded(
        dir.path(),
        &[],
        &[("KOORD_COMMON__LOG_LEVEL", "koord::koordlet=info,warn")],
    );
    let read = "kubelet configuration read from the kubelet's /configz";
    assert!(
        wait_until(Duration::from_secs(60), || koord.logs().contains(read)),
        "{}",
        koord.logs()
    );
    assert!(
        !koord.logs().contains("kubelet /configz unreadable"),
        "{}",
        koord.logs()
    );
    let kubeconfig = dir.path().join("data").join("kubeconfig");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let nrt = rt.block_on(async {
        let c = common::embedded_client(&koord, &kubeconfig).await;
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("topology.node.k8s.io", "v1alpha1", "NodeResourceTopology"),
            "noderesourcetopologies",
        );
        let api: Api<DynamicObject> = Api::all_with(c, &ar);
        for _ in 0..150 {
            let first = api.list(&Default::default()).await.ok();
            if let Some(o) = first.and_then(|l| l.items.into_iter().next()) {
                return Some(o);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    });
    let nrt = serde_json::to_value(nrt.expect("a NodeResourceTopology")).unwrap();
    let policy = &nrt["metadata"]["annotations"]["kubelet.koordinator.sh/cpu-manager-policy"];
    assert_eq!(policy, r#"{"policy":"none"}"#, "{nrt}");
    assert_eq!(
        nrt["topologyPolicies"],
        serde_json::json!(["None"]),
        "{nrt}"
    );
    drop(koord);
}
