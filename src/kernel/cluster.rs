//! Finding the cluster: `--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, then the in-cluster
//! service account. The error names every place looked at.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::Shutdown;
use super::host::HostEnv;

#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    /// Where the connection came from, for logs (`kubeconfig /root/.kube/config`).
    pub source: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "no Kubernetes cluster found; looked at: {}. Pass --kubeconfig, run in a pod, or use --embedded",
        .looked.join("; ")
    )]
    NotFound { looked: Vec<String> },
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    #[error("creating the Kubernetes client: {0}")]
    Client(String),
}

const SA_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Resolves the cluster for roles that need one.
pub async fn resolve(explicit: Option<&Path>, env: &HostEnv) -> Result<Cluster, ClusterError> {
    let mut looked = Vec::new();
    let from_env = env
        .var("KUBECONFIG")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let home = env.home.as_ref().map(|h| h.join(".kube").join("config"));
    let candidates = [
        (
            "--kubeconfig / common.kubeconfig",
            explicit.map(Path::to_path_buf),
        ),
        ("$KUBECONFIG", from_env),
        ("~/.kube/config", home),
    ];
    for (what, path) in candidates {
        match path {
            Some(p) if p.exists() => return from_kubeconfig(&p).await,
            Some(p) if what.starts_with("--") => {
                return Err(ClusterError::Kubeconfig {
                    path: p,
                    message: "file does not exist".into(),
                });
            }
            Some(p) => looked.push(format!("{what} ({} missing)", p.display())),
            None => looked.push(format!("{what} (unset)")),
        }
    }
    let in_cluster_host = env.var("KUBERNETES_SERVICE_HOST").is_some();
    if in_cluster_host && Path::new(SA_TOKEN).exists() {
        let config =
            kube::Config::incluster().map_err(|e| ClusterError::InCluster(e.to_string()))?;
        let client = client_for(config).map_err(|e| ClusterError::Client(e.to_string()))?;
        return Ok(Cluster {
            client,
            source: "in-cluster service account".into(),
        });
    }
    looked.push(format!(
        "in-cluster service account (KUBERNETES_SERVICE_HOST {}, {SA_TOKEN} {})",
        if in_cluster_host { "set" } else { "unset" },
        if Path::new(SA_TOKEN).exists() {
            "present"
        } else {
            "missing"
        }
    ));
    Err(ClusterError::NotFound { looked })
}

/// A client from one kubeconfig file.
pub async fn from_kubeconfig(path: &Path) -> Result<Cluster, ClusterError> {
    let err = |message: String| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    let client = client_for(config).map_err(|e| ClusterError::Client(e.to_string()))?;
    Ok(Cluster {
        client,
        source: format!("kubeconfig {}", path.display()),
    })
}

/// Whether the API server is koord's own embedded one (its version says so): it runs on
/// one machine and calls webhooks by URL, never through a Service.
pub async fn is_koord_embedded(client: &kube::Client) -> bool {
    client
        .apiserver_version()
        .await
        .is_ok_and(|v| v.git_version.ends_with("-koord"))
}

/// Waits until the API server answers `/version`, retrying with backoff; false when the
/// process starts draining first.
pub async fn wait_reachable(client: &kube::Client, shutdown: &Shutdown) -> bool {
    let mut delay = Duration::from_millis(100);
    loop {
        match client.apiserver_version().await {
            Ok(_) => return true,
            Err(err) => tracing::warn!(%err, "API server not reachable yet"),
        }
        if !shutdown.sleep(delay).await {
            return false;
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// A client without kube-rs's built-in retry of 429/503/504: its exponential backoff (up to
/// 15 attempts) turns an eviction refused by a PodDisruptionBudget into minutes of waiting.
/// koord's controllers requeue with their own backoff instead.
/// Requests carry `User-Agent: koord/<version>`, so API servers name koord as the field
/// manager of its writes (`koord`, as they name kubelet's `kubelet`), and are counted
/// under client-go's `rest_client_*` series.
pub fn client_for(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    let ua = concat!("koord/", env!("CARGO_PKG_VERSION"));
    if let Ok(v) = hyper::header::HeaderValue::from_str(ua) {
        config.headers.push((hyper::header::USER_AGENT, v));
    }
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&super::rest_metrics::RestMetricsLayer)
        .build())
}
