//! The node's pods: from the kubelet's `/pods` (polled, as Koordinator does) or from the
//! API server (watched with `spec.nodeName=<node>`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;

use crate::kernel::Shutdown;
use crate::kernel::http_client::{self, Trust};

/// How to reach the kubelet's pod list.
#[derive(Debug, Clone)]
pub struct KubeletPods {
    /// `https://<addr>:10250/pods` or `http://<addr>:10255/pods`.
    pub url: String,
    /// Service account token sent as `Authorization: Bearer` (HTTPS).
    pub token_file: Option<PathBuf>,
    pub sync_interval: Duration,
    pub timeout: Duration,
    /// `koordlet_kubelet_request_duration_seconds{verb,path,code}`.
    pub requests: Option<crate::koordlet::metrics::KubeletRequests>,
    /// Woken by the PLEG when a pod's cgroup appears: the list is read at once.
    pub wake: Option<Arc<tokio::sync::Notify>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("{0}")]
    Client(#[from] http_client::ClientError),
    #[error("kubelet answered HTTP {0}")]
    Status(u16),
    #[error("kubelet /pods is not a PodList: {0}")]
    Decode(String),
    #[error("token {0}: {1}")]
    Token(PathBuf, std::io::Error),
}

/// The `Authorization` of a kubelet request over HTTPS: the token file's bearer token.
pub fn authorization(
    url: &str,
    token_file: Option<&std::path::Path>,
) -> Result<Option<String>, KubeletError> {
    match token_file {
        Some(p) if url.starts_with("https://") => {
            let token =
                std::fs::read_to_string(p).map_err(|e| KubeletError::Token(p.to_path_buf(), e))?;
            Ok(Some(format!("Bearer {}", token.trim())))
        }
        _ => Ok(None),
    }
}

/// One fetch of the kubelet's pod list.
pub async fn fetch(k: &KubeletPods) -> Result<Vec<Pod>, KubeletError> {
    let auth = authorization(&k.url, k.token_file.as_deref())?;
    let mut headers = vec![("accept", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let start = std::time::Instant::now();
    let resp = http_client::send(
        Method::GET,
        &k.url,
        &headers,
        None,
        Some(&Trust::Insecure),
        k.timeout,
    )
    .await?;
    if let Some(h) = &k.requests {
        let l: crate::koordlet::metrics::Pairs = vec![
            ("verb", "get".into()),
            ("path", "/pods".into()),
            ("code", resp.status.as_u16().to_string()),
        ];
        h.get_or_create(&l).observe(start.elapsed().as_secs_f64());
    }
    if !resp.status.is_success() {
        return Err(KubeletError::Status(resp.status.as_u16()));
    }
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Vec<Pod>,
    }
    let list: List =
        serde_json::from_slice(&resp.body).map_err(|e| KubeletError::Decode(e.to_string()))?;
    Ok(list.items)
}

/// Polls the kubelet; an error or an empty answer keeps the previous state.
pub async fn poll_kubelet(
    k: &KubeletPods,
    shutdown: &Shutdown,
    mut publish: impl FnMut(Vec<Arc<Pod>>),
) {
    let mut tick = tokio::time::interval(k.sync_interval);
    let mut published = false;
    let mut limiter = crate::koordlet::pleg::Limiter::default();
    let woken = || async {
        match &k.wake {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    };
    loop {
        tokio::select! {
            _ = shutdown.draining() => return,
            _ = tick.tick() => {}
            _ = woken() => {
                if !limiter.allow() {
                    continue;
                }
                tick.reset();
            }
        }
        match fetch(k).await {
            // An empty answer after a non-empty one is usually a kubelet restart, not a
            // drained node; the first answer counts even when empty, so an idle node syncs.
            Ok(pods) if !pods.is_empty() || !published => {
                published = true;
                publish(pods.into_iter().map(Arc::new).collect())
            }
            Ok(_) => tracing::debug!("kubelet returned no pods; keeping the previous list"),
            Err(e) => {
                tracing::warn!(url = %k.url, error = %e, "listing pods from the kubelet failed")
            }
        }
    }
}

/// Watches the node's pods on the API server.
pub async fn watch_api(
    client: kube::Client,
    node: &str,
    shutdown: &Shutdown,
    mut publish: impl FnMut(Vec<Arc<Pod>>),
) {
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let key = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    // Shared with the published lists: one copy of each pod, not one per list.
    let mut pods: BTreeMap<String, Arc<Pod>> = BTreeMap::new();
    let mut init: BTreeMap<String, Arc<Pod>> = BTreeMap::new();
    let mut index = crate::kernel::pump::forward(move |ev: watcher::Event<Pod>| {
        match ev {
            watcher::Event::Init => init.clear(),
            watcher::Event::InitApply(p) => {
                init.insert(key(&p), Arc::new(p));
            }
            watcher::Event::InitDone => {
                pods = std::mem::take(&mut init);
                publish(pods.values().cloned().collect());
            }
            watcher::Event::Apply(p) => {
                pods.insert(key(&p), Arc::new(p));
                publish(pods.values().cloned().collect());
            }
            watcher::Event::Delete(p) => {
                pods.remove(&key(&p));
                publish(pods.values().cloned().collect());
            }
        }
        true
    });
    crate::kernel::pump::pump::<Pod, _>(client, None, cfg, &mut index, shutdown.draining()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A kubelet that answers one `/pods` request with an empty PodList.
    async fn one_answer() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            // Read the whole request first: closing with unread bytes resets the connection.
            let (mut buf, mut got) = ([0u8; 4096], Vec::new());
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let body = r#"{"kind":"PodList","apiVersion":"v1","items":[]}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(body.as_bytes()).await.unwrap();
            s.shutdown().await.unwrap();
        });
        format!("http://{addr}/pods")
    }

    #[tokio::test]
    async fn each_kubelet_request_is_timed_as_koordinators() {
        let registry = crate::kernel::Metrics::new();
        let m = crate::koordlet::metrics::KoordletMetrics::register(&registry);
        let k = KubeletPods {
            url: one_answer().await,
            token_file: None,
            sync_interval: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            requests: Some(m.ops.kubelet_requests.clone()),
            wake: None,
        };
        assert!(fetch(&k).await.unwrap().is_empty());
        let scrape = registry.scrape();
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == "koordlet_kubelet_request_duration_seconds")
            .expect("the request is timed");
        assert_eq!(s.labels.get("verb"), Some("get"));
        assert_eq!(s.labels.get("path"), Some("/pods"));
        assert_eq!(s.labels.get("code"), Some("200"));
    }

    /// A kubelet answering every `/pods` request with an empty PodList, counting them.
    async fn counting_kubelet() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let (mut buf, mut got) = ([0u8; 4096], Vec::new());
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let body = r#"{"kind":"PodList","apiVersion":"v1","items":[]}"#;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
                let _ = s.shutdown().await;
            }
        });
        (format!("http://{addr}/pods"), count)
    }

    #[tokio::test]
    async fn a_pleg_wake_reads_the_pod_list_before_the_next_sync() {
        let (url, count) = counting_kubelet().await;
        let wake = Arc::new(tokio::sync::Notify::new());
        let k = KubeletPods {
            url,
            token_file: None,
            sync_interval: Duration::from_secs(3600),
            timeout: Duration::from_secs(5),
            requests: None,
            wake: Some(wake.clone()),
        };
        let shutdown = Shutdown::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sd = shutdown.clone();
        let task = tokio::spawn(async move {
            poll_kubelet(&k, &sd, |p| {
                let _ = tx.send(p.len());
            })
            .await
        });
        rx.recv().await.expect("the first read, at start");
        wake.notify_one();
        let read_again = async {
            while count.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), read_again)
            .await
            .expect("read again at once, not after the hour");
        shutdown.begin_drain();
        task.await.unwrap();
    }
}
