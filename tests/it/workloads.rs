//! kubectl's everyday workload commands against `koord --role=all --embedded` with
//! simulated nodes, as against a kind cluster: create deployment, rollout status, scale,
//! set image, rollout undo and restart, delete with its ReplicaSets and pods collected,
//! delete with `--cascade=orphan|foreground`; create job, its completion, and delete.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Koord, wait_until};

pub(crate) struct Kubectl {
    pub(crate) kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .output()
            .expect("run kubectl");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn ok(&self, args: &[&str], koord: &Koord) -> String {
        let (ok, text) = self.run(args);
        assert!(ok, "kubectl {args:?}:\n{text}\n--- koord\n{}", koord.logs());
        text
    }

    fn count(&self, args: &[&str]) -> usize {
        self.run(args).1.split_whitespace().count()
    }
}

fn has_kubectl() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok()
}

fn start(dir: &Path) -> (Koord, Kubectl) {
    let data = dir.join("data");
    let koord = Koord::embedded(
        dir,
        &["--sim-nodes=2"],
        // Only the simulated nodes (they run what is bound to them); this machine is not one.
        &[
            ("KOORD_EMBEDDED__NODE_RUNTIME__ENABLED", "false"),
            ("KOORD_EMBEDDED__REGISTER_LOCAL_NODE", "false"),
        ],
    );
    let k = Kubectl {
        kubeconfig: data.join("kubeconfig"),
        cache: dir.join("kcache"),
    };
    (koord, k)
}

/// koord with simulated nodes whose API server answers, or `None` (skipped) without kubectl.
pub(crate) fn up() -> Option<(tempfile::TempDir, Koord, Kubectl)> {
    if !has_kubectl() {
        eprintln!("skipped: no kubectl on PATH");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (koord, k) = start(dir.path());
    assert!(
        wait_until(Duration::from_secs(30), || k.run(&["get", "nodes"]).0),
        "{}",
        koord.logs()
    );
    Some((dir, koord, k))
}

#[test]
fn deployments_roll_out_scale_undo_and_delete_as_in_a_cluster() {
    let _cpu = common::cpu_exclusive();
    let Some((_dir, koord, k)) = up() else {
        return;
    };
    k.ok(
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1",
            "--replicas=2",
        ],
        &koord,
    );
    let status = ["rollout", "status", "deployment/web", "--timeout=60s"];
    let out = k.ok(&status, &koord);
    assert!(out.contains("successfully rolled out"), "{out}");
    let pods = ["get", "pods", "-l", "app=web", "-o", "name"];
    assert_eq!(k.count(&pods), 2);
    // kubectl's columns, as a cluster prints them.
    let table = k.ok(&["get", "deployment", "web"], &koord);
    assert!(
        table.contains("READY") && table.contains("UP-TO-DATE") && table.contains("2/2"),
        "{table}"
    );

    k.ok(&["scale", "deployment/web", "--replicas=3"], &koord);
    k.ok(&status, &koord);
    assert!(wait_until(Duration::from_secs(20), || k.count(&pods) == 3));

    k.ok(&["set", "image", "deployment/web", "nginx=nginx:2"], &koord);
    k.ok(&status, &koord);
    let sets = ["get", "rs", "-l", "app=web", "-o", "name"];
    assert_eq!(k.count(&sets), 2, "one ReplicaSet per template");
    let image = [
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ];
    assert_eq!(k.ok(&image, &koord), "nginx:2");
    let history = k.ok(&["rollout", "history", "deployment/web"], &koord);
    assert!(history.contains('1') && history.contains('2'), "{history}");

    k.ok(&["rollout", "undo", "deployment/web"], &koord);
    k.ok(&status, &koord);
    assert_eq!(k.ok(&image, &koord), "nginx:1");
    let images = [
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ];
    assert!(
        wait_until(Duration::from_secs(30), || {
            let (_, out) = k.run(&images);
            out.split_whitespace().count() == 3 && out.split_whitespace().all(|i| i == "nginx:1")
        }),
        "{}",
        k.run(&images).1
    );

    k.ok(&["rollout", "restart", "deployment/web"], &koord);
    k.ok(&status, &koord);
    assert_eq!(k.count(&sets), 3, "a restart is a new template");

    k.ok(&["delete", "deployment", "web"], &koord);
    assert!(
        wait_until(Duration::from_secs(30), || k.count(&pods) == 0
            && k.count(&sets) == 0),
        "ReplicaSets and pods collected:\n{}\n{}",
        k.run(&["get", "rs,pods", "-A"]).1,
        koord.logs()
    );
    drop(koord);
}

#[test]
fn jobs_run_complete_and_take_their_pods_along() {
    let _cpu = common::cpu_exclusive();
    let Some((dir, koord, k)) = up() else {
        return;
    };
    k.ok(
        &["create", "job", "pi", "--image=busybox", "--", "true"],
        &koord,
    );
    let pods = ["get", "pods", "-l", "job-name=pi", "-o", "name"];
    assert!(
        wait_until(Duration::from_secs(20), || k.count(&pods) == 1),
        "{}",
        koord.logs()
    );
    let active = ["get", "job", "pi", "-o", "jsonpath={.status.active}"];
    assert!(wait_until(Duration::from_secs(10), || k.run(&active).1 == "1"));
    // The simulated node runs the pod; here it finishes.
    let pod = k.ok(&pods, &koord);
    let pod = pod.trim().trim_start_matches("pod/");
    k.ok(
        &[
            "patch",
            "pod",
            pod,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ],
        &koord,
    );
    k.ok(
        &[
            "wait",
            "--for=condition=complete",
            "job/pi",
            "--timeout=30s",
        ],
        &koord,
    );
    let succeeded = k.ok(
        &["get", "job", "pi", "-o", "jsonpath={.status.succeeded}"],
        &koord,
    );
    assert_eq!(succeeded, "1");
    k.ok(&["delete", "job", "pi"], &koord);
    assert!(
        wait_until(Duration::from_secs(20), || k.count(&pods) == 0),
        "the Job's pod is collected:\n{}",
        k.run(&["get", "pods", "-A"]).1
    );

    // Indexed: one pod per index, `completedIndexes` as the pods finish.
    let file = dir.path().join("indexed.yaml");
    std::fs::write(&file, INDEXED).unwrap();
    k.ok(&["apply", "-f", file.to_str().unwrap()], &koord);
    let indexed = ["get", "pods", "-l", "job-name=shards", "-o", "name"];
    assert!(wait_until(Duration::from_secs(20), || k.count(&indexed) == 2));
    let indexes = k.ok(
        &[
            "get",
            "pods",
            "-l",
            "job-name=shards",
            "-o",
            "jsonpath={.items[*].metadata.annotations.batch\\.kubernetes\\.io/job-completion-index}",
        ],
        &koord,
    );
    let mut indexes: Vec<&str> = indexes.split_whitespace().collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1"]);
    for pod in k.ok(&indexed, &koord).split_whitespace() {
        let pod = pod.trim_start_matches("pod/");
        k.ok(
            &[
                "patch",
                "pod",
                pod,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Succeeded"}}"#,
            ],
            &koord,
        );
    }
    k.ok(
        &[
            "wait",
            "--for=condition=complete",
            "job/shards",
            "--timeout=30s",
        ],
        &koord,
    );
    let done = [
        "get",
        "job",
        "shards",
        "-o",
        "jsonpath={.status.completedIndexes}",
    ];
    assert_eq!(k.ok(&done, &koord), "0-1");
    drop(koord);
}

const INDEXED: &str = r#"apiVersion: batch/v1
kind: Job
metadata: {name: shards, namespace: default}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox, command: ["true"]}]
"#;

#[test]
fn delete_with_cascade_orphan_and_foreground() {
    let _cpu = common::cpu_exclusive();
    let Some((_dir, koord, k)) = up() else {
        return;
    };
    let create = [
        "create",
        "deployment",
        "api",
        "--image=nginx",
        "--replicas=2",
    ];
    k.ok(&create, &koord);
    k.ok(
        &["rollout", "status", "deployment/api", "--timeout=60s"],
        &koord,
    );
    let pods = ["get", "pods", "-l", "app=api", "-o", "name"];
    let sets = ["get", "rs", "-l", "app=api", "-o", "name"];
    let owners = [
        "get",
        "rs",
        "-l",
        "app=api",
        "-o",
        "jsonpath={.items[*].metadata.ownerReferences}",
    ];
    assert!(!k.ok(&owners, &koord).is_empty());

    // Orphan: the Deployment goes (kubectl waits for it), its ReplicaSet and pods stay,
    // released from it.
    k.ok(&["delete", "deployment", "api", "--cascade=orphan"], &koord);
    let (gone, _) = k.run(&["get", "deployment", "api"]);
    assert!(!gone, "the Deployment is gone once kubectl returns");
    assert_eq!(k.count(&sets), 1, "{}", koord.logs());
    assert_eq!(k.ok(&owners, &koord), "", "the ReplicaSet is released");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(k.count(&pods), 2, "the orphaned ReplicaSet keeps its pods");

    // Foreground: the ReplicaSet stays until its pods are gone; kubectl waits for it.
    k.ok(
        &["delete", "rs", "-l", "app=api", "--cascade=foreground"],
        &koord,
    );
    assert_eq!(k.count(&sets), 0);
    assert_eq!(k.count(&pods), 0, "pods went before their ReplicaSet");
    drop(koord);
}

const DB: &str = r#"apiVersion: v1
kind: PersistentVolume
metadata: {name: vol-a}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/koord-it-vol-a}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: vol-b}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/koord-it-vol-b}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:16}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

#[test]
fn a_stateful_set_starts_in_order_with_its_own_claims() {
    let _cpu = common::cpu_exclusive();
    let Some((dir, koord, k)) = up() else {
        return;
    };
    let file = dir.path().join("db.yaml");
    std::fs::write(&file, DB).unwrap();
    k.ok(&["apply", "-f", file.to_str().unwrap()], &koord);
    let status = ["rollout", "status", "statefulset/db", "--timeout=60s"];
    let out = k.ok(&status, &koord);
    // What kubectl prints against a cluster too: kube defaults `partition: 0`.
    assert!(
        out.contains("partitioned roll out complete: 2 new pods have been updated"),
        "{out}"
    );
    let pods = ["get", "pods", "-l", "app=db", "-o", "name"];
    assert_eq!(k.ok(&pods, &koord), "pod/db-0\npod/db-1\n");
    let claims = [
        "get",
        "pvc",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}",
    ];
    assert_eq!(k.ok(&claims, &koord), "data-db-0=Bound data-db-1=Bound ");
    let table = k.ok(&["get", "statefulset", "db"], &koord);
    assert!(table.contains("2/2"), "{table}");

    k.ok(&["scale", "statefulset/db", "--replicas=1"], &koord);
    assert!(
        wait_until(Duration::from_secs(30), || k.count(&pods) == 1),
        "{}",
        k.run(&pods).1
    );
    assert_eq!(
        k.ok(&pods, &koord),
        "pod/db-0\n",
        "the highest ordinal goes"
    );
    assert!(
        k.ok(&claims, &koord).contains("data-db-1=Bound"),
        "claims are retained"
    );

    k.ok(
        &["set", "image", "statefulset/db", "db=postgres:17"],
        &koord,
    );
    k.ok(&status, &koord);
    let image = [
        "get",
        "pod",
        "db-0",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ];
    assert!(wait_until(Duration::from_secs(30), || k.run(&image).1 == "postgres:17"));

    let history = k.ok(&["rollout", "history", "statefulset/db"], &koord);
    assert!(history.contains('2'), "{history}");
    k.ok(&["rollout", "undo", "statefulset/db"], &koord);
    k.ok(&status, &koord);
    assert!(wait_until(Duration::from_secs(30), || k.run(&image).1 == "postgres:16"));

    // whenDeleted: Delete — the running pod's claim goes with the set; db-1's (no pod) stays.
    let policy = r#"{"spec":{"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete"}}}"#;
    k.ok(
        &["patch", "statefulset", "db", "--type=merge", "-p", policy],
        &koord,
    );
    let owner = [
        "get",
        "pvc",
        "data-db-0",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].kind}",
    ];
    assert!(wait_until(Duration::from_secs(20), || k.run(&owner).1 == "StatefulSet"));
    k.ok(&["delete", "statefulset", "db"], &koord);
    assert!(wait_until(Duration::from_secs(30), || k.count(&pods) == 0));
    let left = ["get", "pvc", "-o", "name"];
    assert!(
        wait_until(Duration::from_secs(20), || k.run(&left).1.trim()
            == "persistentvolumeclaim/data-db-1"),
        "{}",
        k.run(&left).1
    );
    drop(koord);
}

const AGENT: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: busybox, command: [sleep, "3600"]}]
"#;

#[test]
fn a_daemon_set_puts_one_pod_on_every_node() {
    let _cpu = common::cpu_exclusive();
    let Some((dir, koord, k)) = up() else {
        return;
    };
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, AGENT).unwrap();
    k.ok(&["apply", "-f", file.to_str().unwrap()], &koord);
    let out = k.ok(
        &["rollout", "status", "daemonset/agent", "--timeout=60s"],
        &koord,
    );
    assert!(out.contains("successfully rolled out"), "{out}");
    let nodes = k.ok(
        &[
            "get",
            "pods",
            "-l",
            "app=agent",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        &koord,
    );
    let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
    nodes.sort();
    assert_eq!(nodes, ["sim-node-0", "sim-node-1"]);
    k.ok(
        &["set", "image", "daemonset/agent", "agent=busybox:2"],
        &koord,
    );
    k.ok(
        &["rollout", "status", "daemonset/agent", "--timeout=60s"],
        &koord,
    );
    let images = [
        "get",
        "pods",
        "-l",
        "app=agent",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ];
    assert!(
        wait_until(Duration::from_secs(30), || {
            let (_, out) = k.run(&images);
            out.split_whitespace().collect::<Vec<_>>() == ["busybox:2", "busybox:2"]
        }),
        "{}",
        k.run(&images).1
    );
    // The template history kubectl reads and rolls back through (ControllerRevisions).
    let history = k.ok(&["rollout", "history", "daemonset/agent"], &koord);
    assert!(
        history.contains("REVISION") && history.contains('2'),
        "{history}"
    );
    k.ok(&["rollout", "undo", "daemonset/agent"], &koord);
    k.ok(
        &["rollout", "status", "daemonset/agent", "--timeout=60s"],
        &koord,
    );
    assert!(
        wait_until(Duration::from_secs(30), || {
            let (_, out) = k.run(&images);
            out.split_whitespace().collect::<Vec<_>>() == ["busybox", "busybox"]
        }),
        "undone: {}",
        k.run(&images).1
    );
    k.ok(&["delete", "daemonset", "agent"], &koord);
    let pods = ["get", "pods", "-l", "app=agent", "-o", "name"];
    assert!(wait_until(Duration::from_secs(20), || k.count(&pods) == 0));
    drop(koord);
}
