use super::*;

fn names(p: &Profile, point: Point) -> Vec<String> {
    p.points
        .get(&point)
        .map(|l| l.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default()
}

#[test]
fn built_in_default_is_koordinators_profile() {
    let cfg = default_config().unwrap();
    let p = &cfg.profiles[0];
    assert_eq!(p.scheduler_name, "koord-scheduler");
    assert_eq!(names(p, Point::QueueSort), ["PrioritySort"]);
    assert_eq!(
        names(p, Point::Filter),
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "LoadAwareScheduling",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation"
        ]
    );
    assert_eq!(
        names(p, Point::PreBind),
        [
            "VolumeBinding",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
            "Coscheduling"
        ]
    );
    assert_eq!(
        names(p, Point::PostFilter),
        [
            "Reservation",
            "Coscheduling",
            "ElasticQuota",
            "DefaultPreemption"
        ]
    );
    assert_eq!(names(p, Point::Permit), ["Coscheduling"]);
    let score: Vec<(String, i64)> = p.points[&Point::Score].clone();
    assert_eq!(
        score,
        vec![
            ("TaintToleration".to_string(), 3),
            ("NodeAffinity".to_string(), 2),
            ("NodeResourcesFit".to_string(), 1),
            ("VolumeBinding".to_string(), 1),
            ("PodTopologySpread".to_string(), 2),
            ("InterPodAffinity".to_string(), 2),
            ("NodeResourcesBalancedAllocation".to_string(), 1),
            ("ImageLocality".to_string(), 1),
            ("LoadAwareScheduling".to_string(), 1),
            ("NodeNUMAResource".to_string(), 1),
            ("DeviceShare".to_string(), 1),
            ("Reservation".to_string(), 5000),
            ("Coscheduling".to_string(), 1)
        ]
    );
    assert_eq!(names(p, Point::Bind), ["DefaultBinder"]);
    assert_eq!(
        names(p, Point::PreEnqueue),
        ["SchedulingGates", "Coscheduling"]
    );
    assert_eq!(
        p.args["LoadAwareScheduling"]["nodeMetricExpirationSeconds"],
        300
    );
    assert_eq!(
        cfg.backoff,
        Backoff {
            initial_seconds: 1,
            max_seconds: 10
        }
    );
    framework(p).unwrap();
}

const USER: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: koord-scheduler
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      enabled:
      - name: LoadAwareScheduling
        weight: 5
      - name: NodeAffinity
        weight: 7
  pluginConfig:
  - name: LoadAwareScheduling
    args:
      usageThresholds:
        cpu: 70
"#;

#[test]
fn user_config_merges_like_kube_scheduler() {
    let cfg = resolve(Some((USER, "test.yaml"))).unwrap();
    let p = &cfg.profiles[0];
    assert_eq!(p.percentage_of_nodes_to_score, Some(30));
    // Enabled plugins that are defaults come first with their new weights, then the other
    // defaults, then the rest (LoadAwareScheduling is not an upstream default).
    assert_eq!(
        p.points[&Point::Score],
        vec![
            ("NodeAffinity".to_string(), 7),
            ("TaintToleration".to_string(), 3),
            ("NodeResourcesFit".to_string(), 1),
            ("VolumeBinding".to_string(), 1),
            ("PodTopologySpread".to_string(), 2),
            ("InterPodAffinity".to_string(), 2),
            ("ImageLocality".to_string(), 1),
            ("LoadAwareScheduling".to_string(), 5)
        ]
    );
    assert!(
        !names(p, Point::Filter).contains(&"LoadAwareScheduling".to_string()),
        "only enabled at score"
    );
    // pluginConfig args replace the default args of that plugin.
    assert_eq!(
        p.args["LoadAwareScheduling"],
        serde_json::json!({"usageThresholds": {"cpu": 70}})
    );
    framework(p).unwrap();
}

#[test]
fn errors_name_the_plugin_and_field() {
    let doc = |body: &str| {
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: koord-scheduler\n{body}"
        )
    };
    for (body, want) in [
        (
            "  plugins:\n    filter:\n      enabled:\n      - name: Bogus\n",
            "unknown plugin \"Bogus\"",
        ),
        (
            "  plugins:\n    filter:\n      enabled:\n      - name: PrioritySort\n",
            "PrioritySort does not implement filter",
        ),
        (
            "  plugins:\n    score:\n      enabled:\n      - name: NodeAffinity\n        weight: -3\n",
            "profiles[0]: plugins.score.enabled[0].weight: Invalid value: -3: plugin NodeAffinity must have a positive weight",
        ),
        (
            "  pluginConfig:\n  - name: LoadAwareScheduling\n    args:\n      usageThresholds:\n        cpu: 170\n",
            "usageThresholds[cpu]",
        ),
        (
            "  pluginConfig:\n  - name: LoadAwareScheduling\n    args:\n      resourceWeights:\n        gpu: 1\n",
            "resourceWeights[gpu]",
        ),
        (
            "  pluginConfig:\n  - name: LoadAwareScheduling\n    args:\n      nodeMetricExpirationSeconds: 0\n",
            "nodeMetricExpirationSeconds",
        ),
        (
            "  pluginConfig:\n  - name: LoadAwareScheduling\n    args:\n      bogusField: 1\n",
            "bogusField",
        ),
        (
            "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Nope\n",
            "scoringStrategy.type",
        ),
        (
            "  pluginConfig:\n  - name: Nope\n",
            "unknown plugin \"Nope\"",
        ),
        (
            "  percentageOfNodesToScore: 120\n",
            "percentageOfNodesToScore",
        ),
        (
            "  plugins:\n    queueSort:\n      disabled:\n      - name: \"*\"\n",
            "queueSort",
        ),
    ] {
        let err = resolve(Some((&doc(body), "f.yaml")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(want) && err.contains("f.yaml"),
            "{body}: {err}"
        );
    }
    let wrong_kind = "apiVersion: v1\nkind: ConfigMap\n";
    assert!(
        resolve(Some((wrong_kind, "f.yaml")))
            .unwrap_err()
            .to_string()
            .contains("KubeSchedulerConfiguration")
    );
}

#[test]
fn unimplemented_plugins_are_skipped_and_named() {
    let body = "  plugins:\n    filter:\n      enabled:\n      - name: DynamicResources\n    preBind:\n      enabled:\n      - name: DefaultPreBind\n  pluginConfig:\n  - name: Coscheduling\n    args: {awareNetworkTopology: true}\n";
    let doc = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: koord-scheduler\n{body}"
    );
    let cfg = resolve(Some((&doc, "f.yaml"))).unwrap();
    let names: Vec<&str> = cfg.unsupported.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["DynamicResources"], "awareNetworkTopology runs");
    assert!(cfg.unsupported[0].message.contains("enabled at filter"));
    let p = &cfg.profiles[0];
    assert!(
        p.points
            .values()
            .flatten()
            .all(|(n, _)| n != "DynamicResources" && n != "DefaultPreBind")
    );
    let default = default_config().unwrap();
    let names: Vec<&str> = default
        .unsupported
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert!(
        names.is_empty(),
        "Koordinator's default profile runs without warnings: {names:?}"
    );
}

#[test]
fn feasible_nodes_to_find() {
    use crate::scheduler::framework::runtime::num_feasible_nodes_to_find as n;
    assert_eq!(n(50, None), 50);
    assert_eq!(n(500, None), 230, "p = 50 - 500/125 = 46%");
    assert_eq!(n(5000, None), 500, "p = 10%");
    assert_eq!(n(10000, None), 500, "p floors at 5%");
    assert_eq!(n(1000, Some(5)), 100, "at least 100");
    assert_eq!(n(1000, Some(100)), 1000);
}

#[test]
fn parallelism_and_leader_election_from_the_file() {
    let doc = |extra: &str| {
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{extra}profiles:\n- schedulerName: koord-scheduler\n"
        )
    };
    let cfg = resolve(Some((
        &doc("parallelism: 4\nleaderElection:\n  leaderElect: true\n  resourceName: my-scheduler\n  resourceNamespace: kube-system\n  leaseDuration: 30s\n  renewDeadline: 20s\n  retryPeriod: 5s\n  resourceLock: leases\n"),
        "f.yaml",
    )))
    .unwrap();
    assert_eq!(cfg.parallelism, Some(4));
    let base = crate::kernel::lease::LeaseConfig::named("koord-scheduler");
    let lease = cfg.leader_election.unwrap().apply(&base).unwrap();
    assert_eq!(
        (
            lease.name.as_str(),
            lease.namespace.as_str(),
            lease.lease_duration_seconds,
            lease.renew_deadline_seconds,
            lease.retry_period_seconds
        ),
        ("my-scheduler", "kube-system", 30, 20, 5)
    );
    let e = resolve(Some((&doc("parallelism: 0\n"), "f.yaml")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("parallelism: Invalid value: 0: should be an integer value greater than zero"),
        "{e}"
    );
    let e = resolve(Some((
        &doc("leaderElection:\n  resourceLock: endpoints\n"),
        "f.yaml",
    )))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("leaderElection.resourceLock: Unsupported value"),
        "{e}"
    );
}

/// `--embedded` has no kube-scheduler: the first profile also serves `default-scheduler`,
/// unless the configuration names a profile so.
#[test]
fn embedded_mode_serves_default_scheduler_with_the_first_profile() {
    let mut cfg = default_config().unwrap();
    serve_default_scheduler(&mut cfg);
    let names: Vec<&str> = cfg
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    assert_eq!(names, ["koord-scheduler", "default-scheduler"]);
    assert_eq!(cfg.profiles[1].points, cfg.profiles[0].points);
    serve_default_scheduler(&mut cfg);
    assert_eq!(cfg.profiles.len(), 2, "once");
}
