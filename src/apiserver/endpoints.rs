//! Where a Service's traffic goes, as kube-apiserver resolves a webhook's `service`
//! clientConfig with endpoint routing: the Service's port by number, then the ready
//! endpoints of the Service's EndpointSlices on the port of the same name.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

use super::store::{Filter, Store};

/// The ready endpoints of port `port` of Service `ns/name`, in the order the slices list
/// them; an error in kube's words when the Service or its port is missing or nothing is
/// ready.
pub fn resolve(store: &Store, ns: &str, name: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let svc_key = (String::new(), "services".to_string());
    let svc = store
        .get(&svc_key, ns, name)
        .ok_or_else(|| format!("service \"{name}\" not found"))?
        .value();
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Err(format!(
            "unsupported service type \"ExternalName\" for service \"{name}\""
        ));
    }
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array);
    let port_name = ports
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(port.into()))
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let slice_key = ("discovery.k8s.io".to_string(), "endpointslices".to_string());
    let selector = format!("kubernetes.io/service-name={name}");
    let filter =
        Filter::parse(Some(ns.to_string()), Some(&selector), None).map_err(|e| e.to_string())?;
    let (_, slices) = store.list(&slice_key, &filter);
    let ready: Vec<SocketAddr> = slices
        .iter()
        .flat_map(|s| ready_in(&s.value(), &port_name))
        .collect();
    if ready.is_empty() {
        return Err(format!("no endpoints available for service \"{name}\""));
    }
    Ok(ready)
}

/// The ready addresses of one EndpointSlice on its port named `port_name`.
fn ready_in(slice: &Value, port_name: &str) -> Vec<SocketAddr> {
    let port = slice
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
        .and_then(|p| p.get("port").and_then(Value::as_u64))
        .and_then(|p| u16::try_from(p).ok());
    let Some(port) = port else {
        return Vec::new();
    };
    slice
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
        .flat_map(|e| {
            e.get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|a| a.as_str()?.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, port))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::store::{Change, StoreError, StoreOptions};
    use serde_json::json;

    fn put(s: &Store, resource: (&str, &str), v: Value) {
        let key = (resource.0.to_string(), resource.1.to_string());
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        s.commit::<StoreError>(&key, "ns", &name, |_| Ok(Change::Put(v)))
            .unwrap();
    }

    fn slice(name: &str, port: u16, ready: Option<bool>) -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "ns",
                "labels": {"kubernetes.io/service-name": "hooks"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
    }

    #[test]
    fn ready_endpoints_of_the_named_port() {
        let s = Store::temporary(StoreOptions::default()).unwrap();
        let err = resolve(&s, "ns", "hooks", 443).unwrap_err();
        assert_eq!(err, "service \"hooks\" not found");
        put(
            &s,
            ("", "services"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "ns"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9876}]}}),
        );
        let err = resolve(&s, "ns", "hooks", 8443).unwrap_err();
        assert_eq!(err, "no service port 8443 found for service \"hooks\"");
        let err = resolve(&s, "ns", "hooks", 443).unwrap_err();
        assert_eq!(err, "no endpoints available for service \"hooks\"");
        let es = ("discovery.k8s.io", "endpointslices");
        put(&s, es, slice("a", 9001, Some(true)));
        put(&s, es, slice("b", 9002, None));
        put(&s, es, slice("c", 9003, Some(false)));
        let got = resolve(&s, "ns", "hooks", 443).unwrap();
        let ports: Vec<u16> = got.iter().map(|a| a.port()).collect();
        assert_eq!(ports, vec![9001, 9002], "not-ready endpoints are skipped");
    }
}
