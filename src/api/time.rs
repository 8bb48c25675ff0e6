//! Timestamps as Kubernetes writes them in object metadata and status.

/// Now, in RFC 3339 with whole seconds (`2026-01-01T00:00:00Z`), as `metav1.Time` encodes.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Seconds since the epoch in the same form.
pub fn format_unix(secs: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
