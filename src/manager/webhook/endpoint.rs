//! On koord's embedded API server there are no pods behind the webhook Service, so each
//! manager replica publishes itself as an endpoint of it: the Service (created if
//! missing) and one EndpointSlice per replica with its loopback address and port. The
//! server calls a ready endpoint and skips one that refuses the connection, so every
//! replica serves admission and a failover loses none (as the Service does in a cluster).

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::Config;

const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGER: &str = "koord-manager";
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// This replica's EndpointSlice: the Service's name and the port it serves on.
fn slice_name(cfg: &Config, addr: SocketAddr) -> String {
    format!("{}-{}", cfg.service_name, addr.port())
}

/// Creates the Service if missing and applies this replica's EndpointSlice.
pub async fn publish(client: &kube::Client, cfg: &Config, addr: SocketAddr) -> kube::Result<()> {
    let services: Api<Service> = Api::namespaced(client.clone(), &cfg.namespace);
    if services.get_opt(&cfg.service_name).await?.is_none() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": cfg.service_name, "labels": {"app.kubernetes.io/name": MANAGER}},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": cfg.port}]},
        }))
        .map_err(kube::Error::SerdeError)?;
        match services.create(&PostParams::default(), &svc).await {
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            other => {
                other?;
            }
        }
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &cfg.namespace);
    let name = slice_name(cfg, addr);
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {SERVICE_NAME: cfg.service_name, MANAGED_BY: MANAGER}},
        "addressType": if addr.is_ipv4() { "IPv4" } else { "IPv6" },
        "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}],
    });
    let pp = PatchParams::apply(MANAGER).force();
    slices.patch(&name, &pp, &Patch::Apply(&slice)).await?;
    Ok(())
}

/// Deletes the slices of replicas that no longer take connections (killed ones cannot
/// remove their own).
pub async fn prune(client: &kube::Client, cfg: &Config, own: SocketAddr) -> kube::Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &cfg.namespace);
    let selector = format!("{SERVICE_NAME}={},{MANAGED_BY}={MANAGER}", cfg.service_name);
    for s in slices
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        let Some(name) = s.metadata.name.clone() else {
            continue;
        };
        if name == slice_name(cfg, own) || serving(&s).await {
            continue;
        }
        tracing::info!(slice = %name, "removing the endpoint of a webhook server that is gone");
        match slices.delete(&name, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// Whether some loopback endpoint of the slice accepts a connection; slices with other
/// addresses are left alone (this replica cannot tell from here).
async fn serving(s: &EndpointSlice) -> bool {
    let port = s.ports.iter().flatten().find_map(|p| p.port);
    let Some(port) = port.and_then(|p| u16::try_from(p).ok()) else {
        return true;
    };
    let ips = s.endpoints.iter().flat_map(|e| e.addresses.iter());
    let ips: Vec<std::net::IpAddr> = ips.filter_map(|a| a.parse().ok()).collect();
    if ips.is_empty() || ips.iter().any(|ip| !ip.is_loopback()) {
        return true;
    }
    for ip in ips {
        let connect = tokio::net::TcpStream::connect((ip, port));
        let timeout = std::time::Duration::from_secs(1);
        if let Ok(Ok(_)) = tokio::time::timeout(timeout, connect).await {
            return true;
        }
    }
    false
}

/// How many endpoint slices the Service has (`None` when they cannot be listed).
pub async fn remaining(client: &kube::Client, cfg: &Config) -> Option<usize> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &cfg.namespace);
    let selector = format!("{SERVICE_NAME}={}", cfg.service_name);
    let lp = ListParams::default().labels(&selector);
    slices.list(&lp).await.ok().map(|l| l.items.len())
}

/// Removes this replica's slice on the way out.
pub async fn withdraw(client: &kube::Client, cfg: &Config, addr: SocketAddr) -> kube::Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &cfg.namespace);
    match slices
        .delete(&slice_name(cfg, addr), &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}
