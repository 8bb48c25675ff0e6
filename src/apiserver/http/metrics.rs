//! `metrics.k8s.io/v1beta1` (what `kubectl top` reads), served from the NodeMetric objects
//! the koordlets report: a node's usage is its `status.nodeMetric.nodeUsage`, a pod's its
//! `podsMetric[].podUsage`, averaged over the NodeMetric's aggregation window. NodeMetric
//! carries pod totals only, so a pod with several containers shows one entry, `POD`.

use std::sync::Arc;

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::{Query, ServerState};
use crate::apiserver::error::ApiError;
use crate::apiserver::store::{Filter, Stored};
use crate::kernel::http::{Body, json as json_response};

pub use crate::apiserver::registry::METRICS_GROUP as GROUP;
const API_VERSION: &str = "metrics.k8s.io/v1beta1";
const DEFAULT_WINDOW_SECONDS: i64 = 300;

fn node_metrics(state: &ServerState) -> Vec<Value> {
    let key = ("slo.koordinator.sh".to_string(), "nodemetrics".to_string());
    let (_, items) = state.store.list(&key, &Filter::default());
    items.iter().map(|i| i.value()).collect()
}

fn window(nm: &Value) -> String {
    let secs = nm
        .pointer("/spec/metricCollectPolicy/aggregateDurationSeconds")
        .and_then(Value::as_i64)
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_WINDOW_SECONDS);
    crate::apiserver::proto::format_duration(secs * 1_000_000_000)
}

fn usage(resources: Option<&Value>) -> Value {
    let r = |k: &str| {
        resources
            .and_then(|r| r.get(k))
            .cloned()
            .unwrap_or_else(|| "0".into())
    };
    json!({"cpu": r("cpu"), "memory": r("memory")})
}

fn node_item(nm: &Value, node: &Stored) -> Option<Value> {
    let status = nm.get("status")?;
    let resources = status.pointer("/nodeMetric/nodeUsage/resources")?;
    Some(json!({
        "metadata": {"name": node.name, "labels": node.value().pointer("/metadata/labels").cloned().unwrap_or(json!({})),
                     "creationTimestamp": crate::api::time::now()},
        "timestamp": status.get("updateTime").cloned().unwrap_or(Value::Null),
        "window": window(nm),
        "usage": usage(Some(resources)),
    }))
}

fn pod_item(nm: &Value, pm: &Value, pod: &Stored) -> Value {
    let value = pod.value();
    let containers: Vec<&str> = value
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let name = match containers.as_slice() {
        [only] => *only,
        _ => "POD",
    };
    json!({
        "metadata": {"name": pod.name, "namespace": pod.namespace,
                     "labels": value.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
                     "creationTimestamp": crate::api::time::now()},
        "timestamp": nm.pointer("/status/updateTime").cloned().unwrap_or(Value::Null),
        "window": window(nm),
        "containers": [{"name": name, "usage": usage(pm.pointer("/podUsage/resources"))}],
    })
}

fn list(kind: &str, items: Vec<Value>) -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({"kind": format!("{kind}List"), "apiVersion": API_VERSION, "metadata": {}, "items": items}),
    )
}

fn one(kind: &str, item: Value) -> Response<Body> {
    let mut item = item;
    item["kind"] = kind.into();
    item["apiVersion"] = API_VERSION.into();
    json_response(StatusCode::OK, &item)
}

fn not_found(resource: &str, name: &str) -> ApiError {
    let mut e = ApiError::new(
        404,
        "NotFound",
        format!("{resource}.{GROUP} \"{name}\" not found"),
    );
    e.details = Some(json!({"name": name, "group": GROUP, "kind": resource}));
    e
}

/// `/apis/metrics.k8s.io/v1beta1/...`: get and list of nodes and pods.
pub fn serve(
    state: &Arc<ServerState>,
    rest: &[&str],
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let selector = |ns: Option<&str>| {
        Filter::parse(ns.map(str::to_string), q.get("labelSelector"), None)
            .map_err(|e| ApiError::bad_request(e.to_string()))
    };
    match rest {
        ["nodes"] => Ok(list("NodeMetrics", nodes(state, &selector(None)?, None))),
        ["nodes", name] => nodes(state, &selector(None)?, Some(name))
            .pop()
            .map(|i| one("NodeMetrics", i))
            .ok_or_else(|| not_found("nodes", name)),
        ["pods"] => Ok(list("PodMetrics", pods(state, &selector(None)?, None))),
        ["namespaces", ns, "pods"] => {
            Ok(list("PodMetrics", pods(state, &selector(Some(ns))?, None)))
        }
        ["namespaces", ns, "pods", name] => pods(state, &selector(Some(ns))?, Some(name))
            .pop()
            .map(|i| one("PodMetrics", i))
            .ok_or_else(|| not_found("pods", name)),
        _ => Err(ApiError::route_not_found()),
    }
}

fn nodes(state: &ServerState, filter: &Filter, only: Option<&str>) -> Vec<Value> {
    let key = (String::new(), "nodes".to_string());
    node_metrics(state)
        .iter()
        .filter_map(|nm| {
            let name = nm.pointer("/metadata/name")?.as_str()?;
            if only.is_some_and(|o| o != name) {
                return None;
            }
            let node = state
                .store
                .get(&key, "", name)
                .filter(|n| filter.matches(n))?;
            node_item(nm, &node)
        })
        .collect()
}

fn pods(state: &ServerState, filter: &Filter, only: Option<&str>) -> Vec<Value> {
    let key = (String::new(), "pods".to_string());
    let mut out = Vec::new();
    for nm in node_metrics(state) {
        let reported = nm.pointer("/status/podsMetric").and_then(Value::as_array);
        for pm in reported.into_iter().flatten() {
            let s = |k: &str| pm.get(k).and_then(Value::as_str).unwrap_or("");
            let (ns, name) = (s("namespace"), s("name"));
            if only.is_some_and(|o| o != name) {
                continue;
            }
            if let Some(pod) = state
                .store
                .get(&key, ns, name)
                .filter(|p| filter.matches(p))
            {
                out.push(pod_item(&nm, pm, &pod));
            }
        }
    }
    out
}
