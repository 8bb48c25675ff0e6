//! Koordinator's scheduler-name label in the live scheduler.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;

use crate::scheduler::{api_with_one_node, gated_scheduler, pod};

/// Koordinator's `scheduling.koordinator.sh/scheduler-name` label: a pod whose
/// `spec.schedulerName` is kube's default is scheduled by the koord profile the label names,
/// and PreBind's patch (computed on the scheduler's copy, which carries the label's name and
/// the original in an annotation) applies to the pod as stored — which has no annotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_name_label_picks_the_profile() {
    use koord::scheduler::framework::Point;
    let (mut api, c, pp) = api_with_one_node().await;
    let mut s = gated_scheduler(&c, &[Point::PreBind]);
    s.apply(koord::scheduler::live::Ev::Node(
        kube::runtime::watcher::Event::Apply(
            Api::<Node>::all(c.clone()).get("node-0").await.unwrap(),
        ),
    ));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut labelled = pod(1);
    labelled.metadata.name = Some("labelled".into());
    labelled.metadata.labels = Some(
        [(
            "scheduling.koordinator.sh/scheduler-name".to_string(),
            "koord-scheduler".to_string(),
        )]
        .into(),
    );
    labelled.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
    let mut plain = pod(2);
    plain.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
    for p in [labelled, plain] {
        let created = pods.create(&pp, &p).await.unwrap();
        assert!(created.metadata.annotations.is_none());
        s.apply(koord::scheduler::live::Ev::Pod(
            kube::runtime::watcher::Event::Apply(created),
        ));
    }
    assert!(s.schedule_one(), "the labelled pod is koord's");
    assert!(
        !s.schedule_one(),
        "the other belongs to kube's default scheduler"
    );
    s.settle().await;
    let bound = pods.get("labelled").await.unwrap();
    let spec = bound.spec.unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-0"));
    assert_eq!(
        spec.scheduler_name.as_deref(),
        Some("default-scheduler"),
        "stored as created"
    );
    let annotations = bound.metadata.annotations.unwrap();
    assert_eq!(
        annotations["test.koord.io/prebind"], "node-0",
        "PreBind's patch applied"
    );
    assert!(
        !annotations.contains_key("internal.scheduling.koordinator.sh/original-scheduler-name"),
        "the scheduler's own bookkeeping is not written: {annotations:?}"
    );
    assert_eq!(
        pods.get("pod-02").await.unwrap().spec.unwrap().node_name,
        None
    );
    api.stop().await;
}
