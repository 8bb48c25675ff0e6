//! The embedded API server through a normal kube-rs client: CRUD, conflicts, selectors,
//! pagination, every patch type, finalizers, namespaces.

use crate::common;

use std::collections::BTreeMap;

use common::{TestApi, api_code, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn crud_and_conflicts() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some()
    );
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &cm("a", &[])).await),
        409,
        "AlreadyExists"
    );
    assert_eq!(api_code(cms.get("missing").await), 404);

    let mut stale = created.clone();
    let mut fresh = cms.get("a").await.unwrap();
    fresh.data.as_mut().unwrap().insert("k".into(), "v2".into());
    let updated = cms
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    stale.data.as_mut().unwrap().insert("k".into(), "v3".into());
    assert_eq!(
        api_code(cms.replace("a", &PostParams::default(), &stale).await),
        409,
        "stale resourceVersion"
    );

    let bad: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "Bad_Name"}})).unwrap();
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &bad).await),
        422
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(api.client.clone(), "nope");
    assert_eq!(
        api_code(other_ns.create(&PostParams::default(), &cm("x", &[])).await),
        404,
        "namespace must exist"
    );

    let generated: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let g = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    assert!(g.metadata.name.unwrap().starts_with("gen-"));

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(cms.get("a").await), 404);
}

#[tokio::test]
async fn label_and_field_selectors() {
    let api = TestApi::start().await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("web-1", json!({"app": "web", "tier": "fe"})),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("web-2", json!({"app": "web", "tier": "be"})),
    )
    .await
    .unwrap();
    pods.create(&PostParams::default(), &pod("db-1", json!({"app": "db"})))
        .await
        .unwrap();
    let names = |l: kube::api::ObjectList<Pod>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(
        names(pods.list(&q("app=web")).await.unwrap()),
        vec!["web-1", "web-2"]
    );
    assert_eq!(
        names(pods.list(&q("app=web,tier notin (be)")).await.unwrap()),
        vec!["web-1"]
    );
    assert_eq!(names(pods.list(&q("!tier")).await.unwrap()), vec!["db-1"]);
    let f = |s: &str| ListParams::default().fields(s);
    assert_eq!(
        names(pods.list(&f("metadata.name=db-1")).await.unwrap()),
        vec!["db-1"]
    );
    assert_eq!(
        pods.list(&f("spec.nodeName=")).await.unwrap().items.len(),
        3,
        "unscheduled pods"
    );
    assert_eq!(
        pods.list(&f(
            "status.phase=Pending,spec.schedulerName=default-scheduler"
        ))
        .await
        .unwrap()
        .items
        .len(),
        3
    );
    assert_eq!(api_code(pods.list(&f("spec.bogus=1")).await), 400);
    assert_eq!(api_code(pods.list(&q("a b")).await), 400);
    let all: Api<Pod> = Api::all(api.client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
}

#[tokio::test]
async fn pagination_is_consistent() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    for i in 0..25 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("cm-{i:02}"), &[("page", "yes")]),
        )
        .await
        .unwrap();
    }
    let lp = ListParams::default().labels("page=yes").limit(10);
    let first = cms.list(&lp).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let token = first.metadata.continue_.clone().unwrap();
    // Written after the first page: not part of this list.
    cms.create(&PostParams::default(), &cm("cm-99", &[("page", "yes")]))
        .await
        .unwrap();
    let mut seen: Vec<String> = first
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let mut next = Some(token);
    while let Some(t) = next {
        let page = cms.list(&lp.clone().continue_token(&t)).await.unwrap();
        assert_eq!(
            page.metadata.resource_version, first.metadata.resource_version,
            "pages share one revision"
        );
        next = page.metadata.continue_.clone();
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
    }
    assert_eq!(seen.len(), 25);
    assert!(!seen.contains(&"cm-99".to_string()));
    assert_eq!(
        api_code(cms.list(&lp.clone().continue_token("MTIzNDU6MA")).await),
        410,
        "unknown token is expired"
    );
}

#[tokio::test]
async fn every_patch_type() {
    let api = TestApi::start().await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({"a": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let merged = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.labels.unwrap().len(), 2);
    let json_patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels/c", "value": "3"}]))
            .unwrap();
    let jp = pods
        .patch("p", &pp, &Patch::<()>::Json(json_patch))
        .await
        .unwrap();
    assert_eq!(jp.metadata.labels.unwrap()["c"], "3");
    let smp = json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}});
    let s = pods.patch("p", &pp, &Patch::Strategic(smp)).await.unwrap();
    let c = &s.spec.unwrap().containers[0];
    assert_eq!(c.image.as_deref(), Some("busybox:2"));
    assert_eq!(
        c.env.as_ref().unwrap().len(),
        1,
        "strategic merge kept the container's env"
    );
    let failed_test: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/labels/a", "value": "x"}]))
            .unwrap();
    assert_eq!(
        api_code(pods.patch("p", &pp, &Patch::<()>::Json(failed_test)).await),
        400
    );
    // Server-side apply: the configuration must name the object; the manager's fields are
    // recorded in managedFields.
    let nameless = pods
        .patch(
            "p",
            &PatchParams::apply("t"),
            &Patch::Apply(json!({"metadata": {"labels": {"z": "1"}}})),
        )
        .await;
    assert_eq!(api_code(nameless), 400);
    let applied = pods
        .patch(
            "p",
            &PatchParams::apply("t"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "p", "labels": {"z": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["z"], "1");
    let managers: Vec<_> = applied
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|m| (m.manager.unwrap(), m.operation.unwrap()))
        .collect();
    assert!(
        managers.contains(&("t".into(), "Apply".into())),
        "{managers:?}"
    );
    // Status writes through the subresource only.
    let st = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().phase.as_deref(), Some("Running"));
    let ignored = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        ignored.status.unwrap().phase.as_deref(),
        Some("Running"),
        "main resource ignores status"
    );
}

#[tokio::test]
async fn finalizers_hold_deletion() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let mut c = cm("held", &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &c).await.unwrap();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = cms.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_code(cms.get("held").await),
        404,
        "removed once finalizers are empty"
    );
}

#[tokio::test]
async fn namespace_deletion_goes_through_terminating_and_honours_finalizers() {
    let api = TestApi::start().await;
    let nss: Api<Namespace> = Api::all(api.client.clone());
    let team = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        team.spec.unwrap().finalizers,
        Some(vec!["kubernetes".to_string()]),
        "kube-apiserver's default"
    );
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "team");
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let phase = |n: Namespace| n.status.and_then(|s| s.phase).unwrap_or_default();
    assert_eq!(phase(nss.get("team").await.unwrap()), "Terminating");
    let refused = cms.create(&PostParams::default(), &cm("late", &[])).await;
    match refused {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
            );
        }
        other => panic!("{other:?}"),
    }
    // Unheld content goes; the finalizer holds its object, and the object the namespace.
    assert!(
        eventually(Duration::from_secs(10), || async {
            cms.get_opt("x").await.unwrap().is_none()
        })
        .await
    );
    let kept = cms.get("held").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_some());
    let conditions = nss
        .get("team")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap_or_default();
    let finalizers = conditions
        .iter()
        .find(|c| c.type_ == "NamespaceFinalizersRemaining")
        .unwrap();
    assert_eq!(
        finalizers.message.as_deref(),
        Some(
            "Some content in the namespace has finalizers remaining: configmaps has 1 resource instances"
        )
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        cms.get_opt("held").await.unwrap().is_some(),
        "a finalizer is never skipped"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            nss.get_opt("team").await.unwrap().is_none()
        })
        .await
    );
    assert_eq!(phase(nss.get("default").await.unwrap()), "Active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_and_loopback_rules() {
    let mut open = koord::apiserver::Options::for_tests();
    open.addr = "0.0.0.0:0".parse().unwrap();
    let err = koord::apiserver::ApiServer::start(open.clone())
        .await
        .err()
        .expect("non-loopback needs a token");
    assert!(err.to_string().contains("bearerToken"), "{err}");

    open.bearer_token = Some("s3cret".into());
    let api = TestApi::start_with(open).await;
    let port = api.server().addr().port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let get = |path: &'static str| {
        tokio::task::spawn_blocking(move || common::http_get(addr, path).unwrap().0)
    };
    assert_eq!(
        get("/api/v1/namespaces").await.unwrap(),
        401,
        "no token, no access"
    );
    assert_eq!(get("/healthz").await.unwrap(), 200, "health stays open");
    // The kubeconfig carries the token, so the client works.
    let nss: Api<Namespace> = Api::all(api.client.clone());
    assert!(nss.list(&ListParams::default()).await.unwrap().items.len() >= 5);
}

#[tokio::test]
async fn metadata_lists_decode() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("m", &[("x", "y")]))
        .await
        .unwrap();
    let metas = cms.list_metadata(&ListParams::default()).await.unwrap();
    let names: Vec<_> = metas
        .items
        .iter()
        .map(|m| m.metadata.name.as_deref())
        .collect();
    // As on a cluster, every namespace also holds kube-root-ca.crt.
    assert_eq!(names, vec![Some("kube-root-ca.crt"), Some("m")]);
}

/// Opens `n` connections to `addr` and sends each `prefix` (nothing for idle ones).
fn hold_connections(
    addr: std::net::SocketAddr,
    n: usize,
    prefix: &str,
) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    (0..n)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            if !prefix.is_empty() {
                s.write_all(prefix.as_bytes()).unwrap();
            }
            s
        })
        .collect()
}

/// How many of `conns` the server has closed (a read sees EOF or an error).
fn closed_by_server(conns: &mut [std::net::TcpStream]) -> usize {
    use std::io::Read;
    conns
        .iter_mut()
        .filter(|s| {
            let s: &std::net::TcpStream = s;
            let mut s = s;
            s.set_read_timeout(Some(std::time::Duration::from_millis(5)))
                .unwrap();
            let mut buf = [0u8; 512];
            match s.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => s.read(&mut buf).is_ok_and(|n| n == 0),
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            }
        })
        .count()
}

/// Thousands of idle, half-sent-head and half-sent-body connections: the server keeps
/// answering, and closes the idle and half-sent ones after the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_do_not_starve_the_server() {
    use std::time::{Duration, Instant};
    koord::os::tuning::raise_nofile_limit();
    let mut opts = koord::apiserver::Options::for_tests();
    opts.bearer_token = Some("t0k".into());
    opts.limits.header_timeout = Duration::from_secs(2);
    let api = TestApi::start_with(opts).await;
    let addr = api.server().addr();
    let body_head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"metadata\":";
    let (mut idle, mut heads, bodies) = tokio::task::spawn_blocking(move || {
        (
            hold_connections(addr, 2000, ""),
            hold_connections(
                addr,
                1000,
                "GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthoriz",
            ),
            hold_connections(addr, 500, body_head),
        )
    })
    .await
    .unwrap();
    let started = Instant::now();
    let nss: Api<Namespace> = Api::all(api.client.clone());
    assert!(nss.list(&ListParams::default()).await.unwrap().items.len() >= 4);
    let health = tokio::task::spawn_blocking(move || common::http_get(addr, "/healthz"))
        .await
        .unwrap();
    assert_eq!(health.map(|h| h.0), Some(200));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    tokio::time::sleep(Duration::from_secs(4)).await;
    let (idle_closed, heads_closed) = tokio::task::spawn_blocking(move || {
        (closed_by_server(&mut idle), closed_by_server(&mut heads))
    })
    .await
    .unwrap();
    assert_eq!((idle_closed, heads_closed), (2000, 1000));
    drop(bodies);
}

/// Beyond the connection cap new clients wait, and are served once the idle ones time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_beyond_the_connection_cap_are_served_after_idle_ones_time_out() {
    use std::time::Duration;
    let mut opts = koord::apiserver::Options::for_tests();
    opts.limits.max_connections = 50;
    opts.limits.header_timeout = Duration::from_secs(1);
    let api = TestApi::start_with(opts).await;
    let addr = api.server().addr();
    let idle = tokio::task::spawn_blocking(move || hold_connections(addr, 150, ""))
        .await
        .unwrap();
    let nss: Api<Namespace> = Api::all(api.client.clone());
    let listed = tokio::time::timeout(Duration::from_secs(15), nss.list(&ListParams::default()))
        .await
        .expect("served within 15 s")
        .unwrap();
    assert!(!listed.items.is_empty());
    drop(idle);
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let mut big = cm("big", &[]);
    big.data = Some(BTreeMap::from([("k".into(), "x".repeat(4 << 20))]));
    let err = cms.create(&PostParams::default(), &big).await;
    assert_eq!(api_code(err), 413);
}

/// A raw request through the kube client; the error's HTTP code, or 200 and the body.
async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    ct: &str,
    body: &str,
) -> (u16, String) {
    let req = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", ct)
        .body(body.as_bytes().to_vec())
        .unwrap();
    match client.request_text(req).await {
        Ok(text) => (200, text),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(e) => panic!("{method} {uri}: {e}"),
    }
}

/// Bodies and parameters kube-apiserver refuses get its statuses, never a dropped
/// connection, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_and_parameters_get_kube_statuses() {
    let api = TestApi::start().await;
    let c = &api.client;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &cm("keep", &[]))
        .await
        .unwrap();
    let cm_uri = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let merge = "application/merge-patch+json";

    let (code, msg) = raw(c, "PATCH", &format!("{cm_uri}/keep"), merge, "[1]").await;
    assert_eq!(code, 422, "{msg}");
    let (code, _) = raw(
        c,
        "PUT",
        &format!("{cm_uri}/keep"),
        json,
        r#"{"metadata":"x"}"#,
    )
    .await;
    assert_eq!(code, 400);
    let deep = format!("{}1{}", "{\"a\":".repeat(110), "}".repeat(110));
    let body = format!(r#"{{"metadata":{{"name":"deep"}},"data":{{}},"x":{deep}}}"#);
    assert_eq!(raw(c, "POST", cm_uri, json, &body).await.0, 400);
    let half = format!("{}1{}", "{\"a\":".repeat(60), "}".repeat(60));
    let (code, _) = raw(
        c,
        "POST",
        cm_uri,
        json,
        &format!(r#"{{"metadata":{{"name":"half"}},"x":{half}}}"#),
    )
    .await;
    assert_eq!(code, 200);
    let (code, msg) = raw(
        c,
        "PATCH",
        &format!("{cm_uri}/half"),
        merge,
        &format!(r#"{{"x":{{"a":{half}}}}}"#),
    )
    .await;
    assert_eq!(code, 200, "{msg}: 62 levels is fine");
    let (code, msg) = raw(
        c,
        "PATCH",
        &format!("{cm_uri}/half"),
        merge,
        &format!(r#"{{"x":{{"a":{{"a":{half}}}}}}}"#),
    )
    .await;
    assert_eq!((code, msg.contains("deeper")), (200, false), "{msg}");
    let deeper = format!("{}1{}", "{\"a\":".repeat(99), "}".repeat(99));
    let (code, msg) = raw(
        c,
        "PATCH",
        &format!("{cm_uri}/half"),
        merge,
        &format!(r#"{{"y":{{"z":{deeper}}}}}"#),
    )
    .await;
    assert_eq!(code, 422, "{msg}: a patch building 101 levels");
    let yaml = format!(
        "metadata: {{name: y}}\nx: {}1{}\n",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let started = std::time::Instant::now();
    assert_eq!(
        raw(c, "POST", cm_uri, "application/yaml", &yaml).await.0,
        400
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));

    let pod_uri = "/api/v1/namespaces/default/pods";
    let pod = |q: &str| {
        format!(
            r#"{{"metadata":{{"name":"q"}},"spec":{{"containers":[{{"name":"c","image":"busybox","resources":{{"requests":{{"cpu":"{q}"}}}}}}]}}}}"#
        )
    };
    let (code, msg) = raw(c, "POST", pod_uri, json, &pod("abc")).await;
    assert_eq!(code, 400);
    assert!(
        msg.contains("quantities must match the regular expression"),
        "{msg}"
    );
    let (code, msg) = raw(c, "POST", pod_uri, json, &pod("-5")).await;
    assert_eq!(code, 422);
    assert!(msg.contains("must be greater than or equal to 0"), "{msg}");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    assert!(pods.get_opt("q").await.unwrap().is_none(), "nothing stored");

    assert_eq!(
        raw(
            c,
            "GET",
            &format!("{cm_uri}?resourceVersion=garbage"),
            json,
            ""
        )
        .await
        .0,
        400
    );
    assert_eq!(
        raw(
            c,
            "GET",
            &format!("{cm_uri}/keep?resourceVersion=-1"),
            json,
            ""
        )
        .await
        .0,
        400
    );
    let (code, msg) = raw(
        c,
        "GET",
        &format!("{cm_uri}?resourceVersion=99999999"),
        json,
        "",
    )
    .await;
    assert_eq!(code, 504);
    assert!(
        msg.starts_with("Too large resource version: 99999999"),
        "{msg}"
    );
    let (code, msg) = raw(
        c,
        "GET",
        &format!("{cm_uri}?watch=true&resourceVersion=99999999"),
        json,
        "",
    )
    .await;
    assert_eq!(code, 504, "{msg}");

    let (code, msg) = raw(
        c,
        "DELETE",
        &format!("{cm_uri}/keep?dryRun=garbage"),
        json,
        "",
    )
    .await;
    assert_eq!(code, 422);
    assert!(msg.contains("supported values: \"All\""), "{msg}");
    assert_eq!(
        raw(c, "DELETE", &format!("{cm_uri}/keep?dryRun=All"), json, "")
            .await
            .0,
        200
    );
    assert_eq!(
        raw(c, "DELETE", &format!("{cm_uri}?dryRun=All"), json, "")
            .await
            .0,
        200
    );
    assert_eq!(
        raw(
            c,
            "PATCH",
            &format!("{cm_uri}/keep?dryRun=All"),
            merge,
            r#"{"data":{"k":"dry"}}"#
        )
        .await
        .0,
        200
    );
    let kept = cms.get("keep").await.unwrap();
    assert_eq!(kept.data.unwrap()["k"], "v", "dry runs change nothing");

    let ssar = r#"{"spec":{"resourceAttributes":{"verb":"create","resource":"pods"}}}"#;
    let reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = raw(c, "POST", reviews, json, ssar).await;
    assert_eq!(code, 200, "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["status"]["allowed"], true, "{body}");
    assert_eq!(review["kind"], "SelfSubjectAccessReview");
    assert_eq!(raw(c, "GET", reviews, json, "").await.0, 405, "create-only");
    let (code, msg) = raw(
        c,
        "POST",
        cm_uri,
        json,
        r#"{"metadata":{"name":"num"},"data":{"a":1}}"#,
    )
    .await;
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("ConfigMap.data of type string"), "{msg}");
    let (code, msg) = raw(c, "POST", cm_uri, json, r#"{"metadata":{"name":"a..b"}}"#).await;
    assert_eq!(code, 422);
    assert!(msg.contains("RFC 1123 subdomain"), "{msg}");
}

fn any_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z0-9.-]{0,8}|-?[0-9]{1,3}[eEmMGiK]{0,2}[0-9]{0,4}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "metadata",
                    "name",
                    "spec",
                    "containers",
                    "resources",
                    "requests",
                    "cpu",
                    "image",
                    "data",
                    "status",
                    "labels",
                    "$patch",
                    "kind",
                    "apiVersion",
                    "op",
                    "path",
                    "value",
                ])
                .prop_map(str::to_string),
                inner,
                0..5,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Whatever the body, through the real server: a status below 500, never a dropped
/// connection (a handler panic would answer 500).
#[test]
fn random_bodies_through_the_server_never_fail_it() {
    use proptest::test_runner::{Config, TestRunner};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = rt.block_on(TestApi::start());
    let c = api.client.clone();
    rt.block_on(async {
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
        cms.create(&PostParams::default(), &cm("target", &[]))
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
        pods.create(&PostParams::default(), &pod("target", json!({})))
            .await
            .unwrap();
    });
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok());
    let mut runner = TestRunner::new(Config {
        cases: cases.unwrap_or(256),
        ..Config::default()
    });
    let strategy = (
        any_json(),
        proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    );
    runner
        .run(&strategy, |(v, junk)| {
            let body = serde_json::to_string(&v).unwrap();
            let junk = String::from_utf8_lossy(&junk).to_string();
            let cases = [
                ("POST", "configmaps", "", "application/json", &body),
                ("POST", "pods", "", "application/json", &body),
                ("POST", "configmaps", "", "application/yaml", &junk),
                ("PUT", "configmaps", "/target", "application/json", &body),
                (
                    "PATCH",
                    "configmaps",
                    "/target",
                    "application/merge-patch+json",
                    &body,
                ),
                (
                    "PATCH",
                    "pods",
                    "/target",
                    "application/strategic-merge-patch+json",
                    &body,
                ),
                (
                    "PATCH",
                    "pods",
                    "/target",
                    "application/json-patch+json",
                    &body,
                ),
                (
                    "PATCH",
                    "configmaps",
                    "/target",
                    "application/merge-patch+json",
                    &junk,
                ),
            ];
            for (method, res, name, ct, body) in cases {
                let uri = format!("/api/v1/namespaces/default/{res}{name}");
                let (code, msg) = rt.block_on(raw(&c, method, &uri, ct, body));
                proptest::prop_assert!(code < 500, "{method} {uri} {body}: {code} {msg}");
            }
            Ok(())
        })
        .unwrap();
    drop(api);
}

#[tokio::test]
async fn metadata_and_container_names_are_validated_as_kube_apiserver_does() {
    let api = TestApi::start().await;
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let pod = |name: &str, container: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": container, "image": "busybox"}]}}))
        .unwrap()
    };
    let refused = |r: Result<Pod, kube::Error>| match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let (code, msg) = refused(
        pods.create(&pp, &pod("escape", "../../../../../../../../tmp/x"))
            .await,
    );
    assert_eq!(code, 422);
    assert!(
        msg.starts_with("Pod \"escape\" is invalid: spec.containers[0].name: Invalid value: \"../../../../../../../../tmp/x\": a lowercase RFC 1123 label"),
        "{msg}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let with_meta = |meta: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": meta})).unwrap()
    };
    for (meta, want) in [
        (
            json!({"name": "a", "labels": {"": "x"}}),
            "metadata.labels: Invalid value: \"\": name part must be non-empty",
        ),
        (
            json!({"name": "b", "labels": {"has space": "x"}}),
            "metadata.labels: Invalid value: \"has space\": name part must consist",
        ),
        (
            json!({"name": "c", "labels": {"k": "has space"}}),
            "metadata.labels: Invalid value: \"has space\": a valid label must be",
        ),
        (
            json!({"name": "d", "annotations": {"big": "x".repeat(600_000)}}),
            "metadata.annotations: Too long: must have at most 262144 bytes",
        ),
        (
            json!({"name": "e", "finalizers": ["not a finalizer"]}),
            "metadata.finalizers[0]: Invalid value: \"not a finalizer\"",
        ),
    ] {
        match cms.create(&pp, &with_meta(meta.clone())).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{meta}");
                assert!(s.message.contains(want), "{meta}: {}", s.message);
            }
            other => panic!("{meta}: {other:?}"),
        }
    }
    // Updates are held to the same rules.
    cms.create(&pp, &cm("ok", &[])).await.unwrap();
    let patched = cms
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"bad key": "v"}}})),
        )
        .await;
    assert_eq!(api_code(patched), 422);
    // What no single label breaks, the object's size does (etcd's 1.5 MiB).
    let labels: serde_json::Map<String, serde_json::Value> = (0..60_000)
        .map(|i| (format!("label-{i:05}"), json!(format!("value-{i:05}"))))
        .collect();
    let many = cms
        .create(&pp, &with_meta(json!({"name": "many", "labels": labels})))
        .await;
    assert_eq!(api_code(many), 413);
}

/// A ~1 KB JSON patch of copies doubling a ConfigMap's data used to take the server's
/// memory (20 copies: 0.8 GB); kube-apiserver's bounds refuse it at once, and a patch of
/// more than 10,000 operations with its 413.
#[tokio::test]
async fn json_patches_within_kube_apiserver_bounds() {
    let api = TestApi::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(api.client.clone(), "default");
    let grow: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "grow"}, "data": {"payload": "x".repeat(1024)}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &grow).await.unwrap();
    let copies: Vec<serde_json::Value> = (0..30)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(json!(copies)).unwrap();
    let pp = PatchParams::default();
    let err = cms
        .patch("grow", &pp, &Patch::Json::<()>(patch))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err:?}")
    };
    assert_eq!(s.code, 422, "{}", s.message);
    assert!(
        s.message.contains("exceeding the limit 3145728"),
        "{}",
        s.message
    );
    let many: Vec<serde_json::Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/metadata/name", "value": "grow"}))
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(json!(many)).unwrap();
    let err = cms
        .patch("grow", &pp, &Patch::Json::<()>(patch))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err:?}")
    };
    assert_eq!(s.code, 413);
    assert_eq!(
        s.message,
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    let kept = cms.get("grow").await.unwrap();
    assert_eq!(kept.data.unwrap().len(), 1, "nothing applied");
}
