//! kubectl's human-readable ages and durations, shared by the table printers.

/// kubectl's relative age (`45s`, `3m2s`, `5h`, `3d`).
pub fn human_age(created: Option<&str>) -> String {
    let Some(ts) = created.and_then(|c| c.parse::<k8s_openapi::jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = (k8s_openapi::jiff::Timestamp::now() - ts).get_seconds();
    human_seconds(secs)
}

pub fn human_seconds(secs: i64) -> String {
    match secs {
        s if s < 0 => "<invalid>".into(),
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s if s < 8 * 86400 => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
        s => format!("{}d", s / 86400),
    }
}
