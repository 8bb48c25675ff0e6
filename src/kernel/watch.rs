//! The one way roles watch the API server. kube-rs decodes a whole list into `K`, so one
//! object that fails to decode (a malformed NodeSLO, a Pod with a field of the wrong type)
//! fails the list, and the watcher retries it forever: the role sees nothing at all. Here
//! each object is decoded on its own; one that fails is skipped, counted
//! ([`DecodeErrors`]) and logged once per resourceVersion, and the good ones flow as usual. Optional CRDs are probed before watching so a cluster without
//! them gets one clear line instead of an endless error loop.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What a watched kind must be (every typed Kubernetes and Koordinator object is).
pub trait Watchable:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watchable for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// An object as it arrived: decoded, or kept with the reason it did not decode.
#[derive(Clone, Debug)]
pub enum Decoded<K> {
    Ok(K),
    Bad {
        meta: Box<ObjectMeta>,
        error: String,
    },
}

impl<'de, K: DeserializeOwned> serde::Deserialize<'de> for Decoded<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The object's text, decoded straight into K: going through a `Value` tree first
        // allocated several times the object's size for every event. (Watch events put
        // `type` before `object`, as Kubernetes writes them, so serde does not buffer it.)
        // managedFields are cut from the text first: no role reads them, and they were
        // most of what decoding a small object allocated.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        match crate::api::decode::from_str::<K>(&crate::api::trim::without_managed_fields(
            raw.get(),
        )) {
            Ok(k) => Ok(Decoded::Ok(k)),
            Err(e) => {
                let meta = serde_json::from_str::<Value>(raw.get())
                    .ok()
                    .and_then(|v| serde_json::from_value(v.get("metadata")?.clone()).ok())
                    .unwrap_or_default();
                Ok(Decoded::Bad {
                    meta: Box::new(meta),
                    error: e.to_string(),
                })
            }
        }
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Decoded<K> {
    type DynamicType = ();
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Decoded::Ok(k) => k.meta(),
            Decoded::Bad { meta, .. } => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Decoded::Ok(k) => k.meta_mut(),
            Decoded::Bad { meta, .. } => meta,
        }
    }
}

#[derive(
    Clone, Debug, Default, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet,
)]
pub struct KindLabels {
    kind: String,
}

/// Every watch's decode failures in this process, by kind (`/metrics`): the family is
/// process-wide, as a watch may start before the role's registry exists.
static DECODE_FAILURES: std::sync::LazyLock<
    prometheus_client::metrics::family::Family<
        KindLabels,
        prometheus_client::metrics::counter::Counter,
    >,
> = std::sync::LazyLock::new(Default::default);

/// The process-wide decode-failure family (`koord_watch_decode_errors_total`, registered
/// by every process's `Metrics`).
pub fn decode_failures() -> prometheus_client::metrics::family::Family<
    KindLabels,
    prometheus_client::metrics::counter::Counter,
> {
    DECODE_FAILURES.clone()
}

/// Decode failures seen so far, for `/metrics` and tests.
#[derive(Clone, Default)]
pub struct DecodeErrors {
    seen: Arc<Mutex<HashSet<(String, String, String)>>>,
    count: Arc<std::sync::atomic::AtomicU64>,
}

impl DecodeErrors {
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn record(&self, kind: &str, meta: &ObjectMeta, error: &str) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        DECODE_FAILURES
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .inc();
        let key = (
            format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or("")
            ),
            meta.resource_version.clone().unwrap_or_default(),
            kind.to_string(),
        );
        let first = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone());
        if first {
            tracing::warn!(kind, object = %key.0, resource_version = %key.1, %error, "skipping an object that does not decode; the others are used");
        }
    }
}

/// Keeps the good objects of a decoded event; a bad one is recorded and dropped (a bad
/// update of a good object leaves the consumer with the last good version).
fn keep_good<K: Resource<DynamicType = ()>>(
    ev: watcher::Event<Decoded<K>>,
    errors: &DecodeErrors,
) -> Option<watcher::Event<K>> {
    let kind = K::kind(&()).to_string();
    let good = |d: Decoded<K>| match d {
        Decoded::Ok(k) => Some(k),
        Decoded::Bad { meta, error } => {
            errors.record(&kind, &meta, &error);
            None
        }
    };
    Some(match ev {
        watcher::Event::Apply(d) => watcher::Event::Apply(good(d)?),
        watcher::Event::Delete(d) => watcher::Event::Delete(good(d)?),
        watcher::Event::InitApply(d) => watcher::Event::InitApply(good(d)?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

/// Watches every `K` (in `namespace`, or all) with `cfg`, with kube's default backoff,
/// skipping objects that do not decode. A custom resource is first probed until the API
/// server serves it (said once, then checked every 30 s).
pub fn watch<K>(
    client: Client,
    namespace: Option<&str>,
    cfg: watcher::Config,
    errors: DecodeErrors,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Watchable,
{
    let api: Api<Decoded<K>> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &()),
        None => Api::all_with(client.clone(), &()),
    };
    let custom = !K::group(&()).is_empty();
    futures::stream::once(async move {
        if custom {
            wait_served::<K>(&client).await;
        }
    })
    .flat_map(move |()| watcher(api.clone(), cfg.clone()).default_backoff())
    .filter_map(move |ev| {
        let out = match ev {
            Ok(ev) => keep_good(ev, &errors).map(Ok),
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(out)
    })
}

/// Every `K` in the cluster that decodes; one that does not (a Reservation with
/// `owners: 5` stored before its CRD had a schema) is logged with its reason and left
/// out, so one bad object cannot stop a controller's whole round.
pub async fn list_decodable<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<Decoded<K>> = Api::all_with(client.clone(), &());
    let items = api.list(&ListParams::default()).await?.items;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Decoded::Ok(k) => out.push(k),
            Decoded::Bad { meta, error } => tracing::warn!(
                kind = %K::kind(&()),
                namespace = meta.namespace.as_deref().unwrap_or(""),
                name = meta.name.as_deref().unwrap_or(""),
                %error,
                "object does not decode; skipped"
            ),
        }
    }
    Ok(out)
}

/// Whether the API server serves `K` (an optional CRD may not be installed).
pub async fn served<K>(client: &Client) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<Decoded<K>> = Api::all_with(client.clone(), &());
    !matches!(
        api.list(&ListParams::default().limit(1)).await,
        Err(kube::Error::Api(s)) if s.code == 404
    )
}

/// Waits until `K` is served, saying once that it is not.
async fn wait_served<K>(client: &Client)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut said = false;
    while !served::<K>(client).await {
        if !said {
            tracing::warn!(kind = %K::kind(&()), group = %K::group(&()), "not served by the API server (CRD not installed?); watching once it is");
            said = true;
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::slo::NodeMetric;

    #[test]
    fn decode_failures_reach_metrics() {
        let errors = DecodeErrors::default();
        let meta = ObjectMeta {
            name: Some("bad".into()),
            namespace: Some("d".into()),
            resource_version: Some("7".into()),
            ..Default::default()
        };
        errors.record("ConfigMapProbe", &meta, "spec: invalid type");
        assert_eq!(errors.count(), 1);
        let text = super::super::metrics::Metrics::new().encode();
        assert!(
            text.contains("koord_watch_decode_errors_total{kind=\"ConfigMapProbe\"} 1"),
            "{text}"
        );
    }

    /// The live scheduler skipped a NodeMetric without `spec` that explain read: every
    /// watch decodes through `api::decode` now.
    #[test]
    fn a_watched_object_without_spec_decodes() {
        let text = r#"{"apiVersion":"slo.koordinator.sh/v1alpha1","kind":"NodeMetric",
            "metadata":{"name":"n1"},"status":{"updateTime":"2026-01-01T00:00:00Z"}}"#;
        match serde_json::from_str::<Decoded<NodeMetric>>(text).unwrap() {
            Decoded::Ok(m) => assert!(m.status.is_some()),
            Decoded::Bad { error, .. } => panic!("{error}"),
        }
    }

    /// What every role gets from a watch: the object without its managedFields.
    #[test]
    fn a_watched_object_arrives_without_managed_fields() {
        let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":
            [{"manager":"m","operation":"Update","fieldsV1":{"f:spec":{}}}],"uid":"u"},
            "spec":{"containers":[{"name":"c"}]}}"#;
        match serde_json::from_str::<Decoded<k8s_openapi::api::core::v1::Pod>>(text).unwrap() {
            Decoded::Ok(p) => {
                assert!(p.metadata.managed_fields.is_none());
                assert_eq!(p.metadata.uid.as_deref(), Some("u"));
                assert_eq!(p.spec.unwrap().containers[0].name, "c");
            }
            Decoded::Bad { error, .. } => panic!("{error}"),
        }
    }
}
