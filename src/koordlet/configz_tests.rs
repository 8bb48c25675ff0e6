//! Koordinator's `kubelet_stub_test.go` (its `/configz` bodies, before and after v1.28's
//! `logging`, served over TLS behind a bearer token) and the address choice of
//! `newKubeletStubFromConfig`.

use std::path::PathBuf;
use std::sync::Arc;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::kernel::http::{json as json_response, text};

const KUBELET_CONFIGZ_DATA: &str = r#"{
    "kubeletconfig": {
        "enableServer": true,
        "cpuManagerPolicy": "static",
        "cpuManagerReconcilePeriod": "10s",
        "evictionHard": {
            "imagefs.available": "15%",
            "memory.available": "222Mi",
            "nodefs.available": "10%",
            "nodefs.inodesFree": "5%"
        },
        "systemReserved": {"cpu": "200m", "memory": "1111Mi", "pid": "1000"},
        "kubeReserved": {"cpu": "200m", "memory": "6666Mi", "pid": "1000"}
    }
}"#;

/// The same with v1.28's `logging`, which older decoders refused.
fn configz_128() -> String {
    let mut v: serde_json::Value = serde_json::from_str(KUBELET_CONFIGZ_DATA).unwrap();
    v["kubeletconfig"]["logging"] = json!({"format": "text", "flushFrequency": "5s",
        "verbosity": 3, "options": {"json": {"infoBufferSize": "0"}}});
    v.to_string()
}

fn expect_koordinators(c: &KubeletConfiguration) {
    let map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(c.cpu_manager_policy, "static");
    assert_eq!(
        c.eviction_hard,
        map(&[
            ("imagefs.available", "15%"),
            ("memory.available", "222Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%")
        ])
    );
    let reserved = |mem| map(&[("cpu", "200m"), ("memory", mem), ("pid", "1000")]);
    assert_eq!(c.system_reserved, reserved("1111Mi"));
    assert_eq!(c.kube_reserved, reserved("6666Mi"));
    // The kubelet's defaults for what the answer leaves out.
    assert_eq!(c.topology_manager_policy, "none");
    assert_eq!(c.topology_manager_scope, "container");
}

/// A kubelet's authenticated port: `/configz` for the bearer token `token` only.
async fn kubelet(body: String) -> (String, CancellationToken) {
    let bundle = crate::kernel::tls::generate("kubelet", &["127.0.0.1".into()]).unwrap();
    let tls =
        crate::kernel::tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())
            .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let handler = move |req: hyper::Request<hyper::body::Incoming>| {
        let body = body.clone();
        async move {
            let authorized = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                == Some("Bearer token");
            let _ = req.into_body().collect().await;
            match authorized {
                true => {
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    json_response(hyper::StatusCode::OK, &v)
                }
                false => text(hyper::StatusCode::UNAUTHORIZED, "Unauthorized"),
            }
        }
    };
    let source = Arc::new(std::sync::RwLock::new(tls));
    let s = stop.clone();
    tokio::spawn(async move { crate::kernel::http::serve_tls(listener, source, handler, s).await });
    (format!("https://{addr}/configz"), stop)
}

fn token_file(dir: &std::path::Path, token: &str) -> PathBuf {
    let f = dir.join("token");
    std::fs::write(&f, format!("{token}\n")).unwrap();
    f
}

#[tokio::test]
async fn test_kubelet_stub_get_kubelet_configuration() {
    let dir = tempfile::tempdir().unwrap();
    for body in [KUBELET_CONFIGZ_DATA.to_string(), configz_128()] {
        let (url, stop) = kubelet(body).await;
        let t = token_file(dir.path(), "token");
        let c = fetch(&url, &t, Duration::from_secs(10)).await.unwrap();
        expect_koordinators(&c);
        let wrong = token_file(dir.path(), "other");
        let e = fetch(&url, &wrong, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), format!("request {url} failed, code 401"));
        stop.cancel();
    }
}

#[test]
fn a_configz_answer_that_is_not_one_is_named() {
    let e = KubeletConfiguration::from_configz(b"{\"kubeletconfig\": 3}").unwrap_err();
    assert!(e.to_string().starts_with("kubelet /configz is not"), "{e}");
}

fn node(addresses: &[(&str, &str)], port: i32) -> Node {
    let addresses: Vec<_> = addresses
        .iter()
        .map(|(t, a)| json!({"type": t, "address": a}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": "n"}, "status": {"addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}),
    )
    .unwrap()
}

#[test]
fn the_kubelet_is_found_as_koordinators_new_kubelet_stub_from_config() {
    let both = [("Hostname", "node-a"), ("InternalIP", "10.0.0.7")];
    let k = |f: &dyn Fn(&mut KubeletConfig)| {
        let mut k = KubeletConfig::default();
        f(&mut k);
        k
    };
    let cases: Vec<(&str, KubeletConfig, Node, Result<&str, &str>)> = vec![
        (
            "InternalIP by default",
            k(&|_| {}),
            node(&both, 10250),
            Ok("https://10.0.0.7:10250/configz"),
        ),
        (
            "the daemon endpoint's port",
            k(&|_| {}),
            node(&both, 11250),
            Ok("https://10.0.0.7:11250/configz"),
        ),
        (
            "no port: the kubelet's",
            k(&|_| {}),
            node(&both, 0),
            Ok("https://10.0.0.7:10250/configz"),
        ),
        (
            "preferred Hostname",
            k(&|k| k.preferred_address_type = "Hostname".into()),
            node(&both, 10250),
            Ok("https://node-a:10250/configz"),
        ),
        (
            "unsupported type: InternalIP",
            k(&|k| k.preferred_address_type = "Nonsense".into()),
            node(&both, 10250),
            Ok("https://10.0.0.7:10250/configz"),
        ),
        (
            "insecure TLS: the read-only port",
            k(&|k| k.insecure_tls = true),
            node(&both, 10250),
            Ok("http://10.0.0.7:10255/configz"),
        ),
        (
            "IPv6",
            k(&|_| {}),
            node(&[("InternalIP", "fd00::7")], 10250),
            Ok("https://[fd00::7]:10250/configz"),
        ),
        (
            "the kubelet podsUrl names",
            k(&|k| k.pods_url = Some("http://127.0.0.1:10255/pods".into())),
            node(&both, 10250),
            Ok("http://127.0.0.1:10255/configz"),
        ),
        (
            "configzUrl first",
            k(&|k| {
                k.pods_url = Some("http://127.0.0.1:10255/pods".into());
                k.configz_url = Some("https://kubelet:10250/configz".into());
            }),
            node(&both, 10250),
            Ok("https://kubelet:10250/configz"),
        ),
        (
            "no address of the type",
            k(&|_| {}),
            node(&[("Hostname", "node-a")], 10250),
            Err("no address matched types InternalIP"),
        ),
    ];
    for (name, k, n, want) in cases {
        let got = url(&k, &n).map_err(|e| e.to_string());
        assert_eq!(
            got,
            want.map(str::to_string).map_err(str::to_string),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_config_file_answers_when_configz_does_not_and_configz_wins_once_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "cpuManagerPolicy: none\ntopologyManagerPolicy: restricted\n",
    )
    .unwrap();
    let (served, stop) = kubelet(KUBELET_CONFIGZ_DATA.to_string()).await;
    let mut k = KubeletConfig {
        config_file: file,
        token_file: token_file(dir.path(), "token"),
        timeout_seconds: 5,
        ..Default::default()
    };
    let n = node(&[("InternalIP", "127.0.0.1")], 1);
    let mut last = Source::default();
    // Nothing listens on port 1: the file.
    let c = read(&k, &n, &mut last).await.unwrap();
    assert_eq!(
        (c.topology_manager_policy.as_str(), last),
        ("restricted", Source::File)
    );
    k.configz_url = Some(served);
    let c = read(&k, &n, &mut last).await.unwrap();
    assert_eq!(
        (c.cpu_manager_policy.as_str(), last),
        ("static", Source::Configz)
    );
    k.disable_query_kubelet_config = true;
    assert!(read(&k, &n, &mut last).await.is_none());
    stop.cancel();
}
