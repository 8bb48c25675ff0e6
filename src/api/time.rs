//! Timestamps as Kubernetes writes them in object metadata and status.

/// Now, in RFC 3339 with whole seconds (`2026-01-01T00:00:00Z`), as `metav1.Time` encodes.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
