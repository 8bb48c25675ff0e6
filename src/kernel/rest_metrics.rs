//! client-go's request series for every koord client (`rest_client_requests_total{code,
//! method,host}`, `rest_client_request_duration_seconds{verb,host}`,
//! `rest_client_rate_limiter_duration_seconds{verb,host}`), recorded by a tower layer on
//! the kube client. The families are process-wide: a client is built before the roles'
//! registry exists, and every registry (there is one per process) exposes the same ones.
//! koord's clients have no client-side rate limiter, so each request waits 0 there.

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Metric;

use super::metric_docs::Labelled;
use tower::{Layer, Service};

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
    host: String,
}

type Hist = Family<VerbLabels, Histogram, fn() -> Histogram>;

/// client-go's latency buckets.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

pub struct RestSeries {
    requests: Family<RequestLabels, Counter>,
    latency: Hist,
    rate_limiter: Hist,
}

pub static SERIES: LazyLock<RestSeries> = LazyLock::new(|| RestSeries {
    requests: Family::default(),
    latency: Family::new_with_constructor(latency_buckets),
    rate_limiter: Family::new_with_constructor(latency_buckets),
});

/// The process-wide families, as shared handles for the registry to expose: requests by
/// code, request latency by verb, rate-limiter wait by verb.
pub fn families() -> (
    impl Metric + Labelled,
    impl Metric + Labelled,
    impl Metric + Labelled,
) {
    let s = &*SERIES;
    (
        s.requests.clone(),
        s.latency.clone(),
        s.rate_limiter.clone(),
    )
}

fn record(method: &str, host: &str, code: &str, seconds: f64) {
    let s = &*SERIES;
    let verb = VerbLabels {
        verb: method.to_string(),
        host: host.to_string(),
    };
    s.rate_limiter.get_or_create(&verb).observe(0.0);
    s.latency.get_or_create(&verb).observe(seconds);
    let l = RequestLabels {
        code: code.to_string(),
        method: method.to_string(),
        host: host.to_string(),
    };
    s.requests.get_or_create(&l).inc();
}

/// The layer for `kube::client::ClientBuilder::with_layer`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RestMetricsLayer;

impl<S> Layer<S> for RestMetricsLayer {
    type Service = RestMetrics<S>;
    fn layer(&self, inner: S) -> RestMetrics<S> {
        RestMetrics(inner)
    }
}

pub struct RestMetrics<S>(S);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, Rb> Service<Request<B>> for RestMetrics<S>
where
    S: Service<Request<B>, Response = Response<Rb>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let host = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let started = Instant::now();
        let fut = self.0.call(req);
        Box::pin(async move {
            let r = fut.await;
            let code = match &r {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            record(&method, &host, &code, started.elapsed().as_secs_f64());
            r
        })
    }
}
