//! The embedded API server refuses what kube-apiserver refuses: RBAC per ServiceAccount
//! (kube's 403 wording), ServiceAccount tokens from `kubectl create token`, `kubectl auth
//! can-i` (also `--as` and `--list`), custom objects checked against their CRD's structural
//! schema (422 with a cause per field; unknown fields refused under kubectl's Strict), and
//! RBAC's escalation check — all with the machine's real kubectl.

use crate::common;

use std::path::PathBuf;

use super::kubectl::kubectl_path;

use common::TestApi;
use serde_json::{Value, json};

const ADMIN: &str = "rbac-test-admin-token-0123456789";

struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    async fn run(
        &self,
        kubeconfig: &str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(self.dir.join(kubeconfig))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("run kubectl");
        if let (Some(mut input), Some(text)) = (child.stdin.take(), stdin) {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().await.unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// `kubectl auth can-i …`: yes (exit 0, "yes") or no (exit 1, "no").
    async fn can_i(&self, kc: &str, args: &[&str]) -> bool {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        let (ok, out, err) = self.run(kc, &all, None).await;
        assert_eq!(
            out.trim(),
            if ok { "yes" } else { "no" },
            "can-i {args:?}: {err}"
        );
        ok
    }

    async fn ok(&self, kc: &str, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(kc, args, stdin).await;
        assert!(ok, "kubectl {args:?} failed:\n{err}\n{out}");
        out
    }
}

async fn setup() -> Option<(TestApi, tempfile::TempDir, Kubectl)> {
    let Some(bin) = kubectl_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return None;
    };
    let mut opts = koord::apiserver::Options::for_tests();
    opts.tls = true;
    opts.bearer_token = Some(ADMIN.into());
    let api = TestApi::start_with(opts).await;
    let dir = tempfile::tempdir().unwrap();
    api.server()
        .write_kubeconfig(&dir.path().join("admin"))
        .unwrap();
    let k = Kubectl {
        bin,
        dir: dir.path().to_path_buf(),
    };
    Some((api, dir, k))
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: probe-sa, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: team-a}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: probe-reads-pods, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- kind: ServiceAccount
  name: probe-sa
  namespace: team-a
"#;

#[tokio::test]
async fn service_account_tokens_and_rbac_as_kube_apiserver() {
    let Some((mut api, _dir, k)) = setup().await else {
        return;
    };
    k.ok("admin", &["apply", "-f", "-"], Some(OBJECTS)).await;
    // The aggregated bootstrap roles hold their rules, as the aggregation controller
    // writes them: `admin` has what `edit` has, which has what `view` has.
    let rules = |role: &'static str| {
        let k = &k;
        async move {
            let args = ["get", "clusterrole", role, "-o", "jsonpath={.rules}"];
            let out = k.ok("admin", &args, None).await;
            serde_json::from_str::<Vec<Value>>(&out).unwrap_or_default()
        }
    };
    let (view, edit, admin) = (
        rules("view").await,
        rules("edit").await,
        rules("admin").await,
    );
    assert!(!view.is_empty(), "view has rules");
    assert!(
        view.iter().all(|r| edit.contains(r)),
        "edit has view's rules"
    );
    assert!(
        edit.iter().all(|r| admin.contains(r)),
        "admin has edit's rules"
    );
    assert!(admin.len() > edit.len() && edit.len() > view.len());
    let token = k
        .ok(
            "admin",
            &[
                "create",
                "token",
                "probe-sa",
                "-n",
                "team-a",
                "--duration",
                "15m",
            ],
            None,
        )
        .await;
    let token = token.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let admin_kc = std::fs::read_to_string(k.dir.join("admin")).unwrap();
    std::fs::write(k.dir.join("sa"), admin_kc.replace(ADMIN, &token)).unwrap();

    let pods = k
        .ok("sa", &["get", "pods", "-n", "team-a", "-o", "json"], None)
        .await;
    assert!(pods.contains("\"items\""), "{pods}");
    let (ok, _, err) = k.run("sa", &["get", "pods", "-n", "team-b"], None).await;
    assert!(!ok);
    assert!(
        err.contains("pods is forbidden: User \"system:serviceaccount:team-a:probe-sa\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-b\""),
        "{err}"
    );
    let (ok, _, err) = k.run("sa", &["get", "jobs.batch", "-A"], None).await;
    assert!(
        !ok && err
            .contains("cannot list resource \"jobs\" in API group \"batch\" at the cluster scope"),
        "{err}"
    );

    // can-i as the ServiceAccount, and as the admin impersonating it.
    let as_sa = "--as=system:serviceaccount:team-a:probe-sa";
    assert!(k.can_i("sa", &["list", "pods", "-n", "team-a"]).await);
    assert!(!k.can_i("sa", &["list", "pods", "-n", "team-b"]).await);
    assert!(
        k.can_i("admin", &["watch", "pods", "-n", "team-a", as_sa])
            .await
    );
    assert!(
        !k.can_i("admin", &["delete", "pods", "-n", "team-a", as_sa])
            .await
    );
    let list = k
        .ok("sa", &["auth", "can-i", "--list", "-n", "team-a"], None)
        .await;
    assert!(
        list.lines()
            .any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{list}"
    );
    assert!(
        !list.contains("*.*"),
        "the ServiceAccount may not do everything:\n{list}"
    );
    let whoami = k.ok("sa", &["auth", "whoami", "-o", "json"], None).await;
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:probe-sa"
    );

    // The ServiceAccount may not grant itself more than it has.
    let grab = r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"grab","namespace":"team-a"},
        "rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]}"#;
    let (ok, _, err) = k.run("sa", &["create", "-f", "-"], Some(grab)).await;
    assert!(!ok && err.contains("forbidden"), "{err}");

    // The token stops working with its ServiceAccount.
    k.ok(
        "admin",
        &["delete", "serviceaccount", "probe-sa", "-n", "team-a"],
        None,
    )
    .await;
    let (ok, _, err) = k.run("sa", &["get", "pods", "-n", "team-a"], None).await;
    assert!(!ok && err.contains("Unauthorized"), "{err}");
    api.stop().await;
}

#[tokio::test]
async fn token_review_and_access_reviews_through_a_kube_client() {
    let mut api = TestApi::start().await;
    let c = &api.client;
    let post = |path: &str, body: Value| {
        let req = hyper::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        c.request::<Value>(req)
    };
    post(
        "/api/v1/namespaces",
        json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns1"}}),
    )
    .await
    .unwrap();
    post(
        "/api/v1/namespaces/ns1/serviceaccounts",
        json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa"}}),
    )
    .await
    .unwrap();
    let tr = post(
        "/api/v1/namespaces/ns1/serviceaccounts/sa/token",
        json!({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}),
    )
    .await
    .unwrap();
    let token = tr["status"]["token"].as_str().unwrap().to_string();
    let review = post("/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token": token}})).await.unwrap();
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:ns1:sa"
    );
    let groups = review["status"]["user"]["groups"].as_array().unwrap();
    assert!(
        groups.contains(&json!("system:serviceaccounts:ns1"))
            && groups.contains(&json!("system:authenticated"))
    );
    let bad = post("/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token": "x.y.z"}})).await.unwrap();
    assert_eq!(bad["status"]["authenticated"], false);
    let short = post("/api/v1/namespaces/ns1/serviceaccounts/sa/token", json!({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds": 60}})).await.unwrap_err();
    assert!(short.to_string().contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"), "{short}");
    let sar = |verb: &str, ns: &str| {
        json!({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{
        "user": "system:serviceaccount:ns1:sa", "groups": ["system:serviceaccounts", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}}})
    };
    let r = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("get", "ns1"),
    )
    .await
    .unwrap();
    assert_eq!(r["status"]["allowed"], false, "no binding yet");
    post("/apis/rbac.authorization.k8s.io/v1/namespaces/ns1/rolebindings", json!({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
        "metadata":{"name":"view"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
        "subjects":[{"kind":"ServiceAccount","name":"sa","namespace":"ns1"}]})).await.unwrap();
    let r = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("get", "ns1"),
    )
    .await
    .unwrap();
    assert_eq!(
        r["status"]["allowed"], true,
        "the aggregated view role: {r}"
    );
    assert!(
        r["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("RoleBinding \"view\" of ClusterRole \"view\"")
    );
    let r = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("delete", "ns1"),
    )
    .await
    .unwrap();
    assert_eq!(r["status"]["allowed"], false);
    let r = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar("get", "other"),
    )
    .await
    .unwrap();
    assert_eq!(r["status"]["allowed"], false);
    api.stop().await;
}

const BAD_RESERVATION: &str = r#"
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: r-bad}
spec: {ttl: 12, owners: "everyone", template: {}, allocatePolicy: Loose}
"#;

#[tokio::test]
async fn custom_objects_meet_their_crd_schema() {
    let Some((mut api, _dir, k)) = setup().await else {
        return;
    };
    let (ok, _, err) = k
        .run("admin", &["apply", "-f", "-"], Some(BAD_RESERVATION))
        .await;
    assert!(!ok, "kube-apiserver refuses it: {err}");
    assert!(
        err.contains("The Reservation \"r-bad\" is invalid"),
        "{err}"
    );
    assert!(err.contains("spec.allocatePolicy: Unsupported value: \"Loose\": supported values: \"Aligned\", \"Restricted\""), "{err}");
    assert!(err.contains("spec.owners: Invalid value: \"string\": spec.owners in body must be of type array: \"string\""), "{err}");
    assert!(err.contains("spec.ttl: Invalid value: \"integer\": spec.ttl in body must be of type string: \"integer\""), "{err}");
    let unknown = "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nmetadata: {name: n1}\nspec: {colour: red}\n";
    let (ok, _, err) = k.run("admin", &["create", "-f", "-"], Some(unknown)).await;
    assert!(
        !ok && err.contains("unknown field \"spec.colour\""),
        "kubectl sends Strict: {err}"
    );
    let warn = k
        .run(
            "admin",
            &["create", "--validate=warn", "-f", "-"],
            Some(unknown),
        )
        .await;
    assert!(
        warn.0 && warn.2.contains("unknown field \"spec.colour\""),
        "{warn:?}"
    );
    let got = k
        .ok("admin", &["get", "nodeslo", "n1", "-o", "json"], None)
        .await;
    let got: Value = serde_json::from_str(&got).unwrap();
    assert!(got["spec"].get("colour").is_none(), "pruned: {got}");
    // A pod with several faults gets every cause, in kube's words.
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{"restartPolicy":"Sometimes",
        "containers":[{"name":"c","image":"i","ports":[{"containerPort":99999}],"resources":{"requests":{"cpu":"-1"}}}]}}"#;
    let (ok, _, err) = k.run("admin", &["create", "-f", "-"], Some(pod)).await;
    assert!(!ok);
    for cause in [
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        "spec.containers[0].ports[0].containerPort: Invalid value: 99999: must be between 1 and 65535, inclusive",
        "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
    ] {
        assert!(err.contains(cause), "{cause} in {err}");
    }
    assert!(!err.contains("Some(") && !err.contains("None"), "{err}");
    api.stop().await;
}
