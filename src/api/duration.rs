//! Go `time.Duration` strings as Kubernetes serializes `metav1.Duration` (`5m0s`, `1h0m0s`,
//! `30s`, `1.5s`).

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}")]
pub struct DurationError(pub String);

/// The duration in configuration field `field`, `default` when absent.
pub fn field_or(
    field: &str,
    raw: Option<&str>,
    default: Duration,
) -> Result<Duration, crate::api::field::FieldError> {
    raw.map_or(Ok(default), |s| {
        parse(s).map_err(|e| crate::api::field::FieldError::new(field, e.to_string()))
    })
}

/// Parses `1h30m`, `5m0s`, `300ms`, `1.5h`, `0` (not negative: a configured period).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let nanos = (!t.starts_with('-')).then(|| parse_nanos(t)).flatten();
    nanos
        .map(|n| Duration::from_nanos(n as u64))
        .ok_or_else(|| DurationError(s.to_string()))
}

const UNITS: [(&str, i64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units, e.g. "1h30m0.5s".
pub fn parse_nanos(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&i| i > 0)?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = UNITS.iter().find(|(u, _)| *u == &rest[..unit_end])?.1;
        total += n * scale as f64;
        rest = &rest[unit_end..];
    }
    let total = total.round() as i64;
    Some(if neg { -total } else { total })
}

/// Formats like Go's `Duration.String()` for whole seconds and above (`5m0s`, `1h0m0s`).
pub fn format(d: Duration) -> String {
    let total = d.as_secs();
    let frac = d.subsec_millis();
    if total == 0 && frac == 0 {
        return "0s".into();
    }
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let secs = if frac > 0 {
        format!("{s}.{:03}", frac).trim_end_matches('0').to_string()
    } else {
        s.to_string()
    };
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_table() {
        for (text, secs, canonical) in [
            ("5m", 300, "5m0s"),
            ("5m0s", 300, "5m0s"),
            ("1h", 3600, "1h0m0s"),
            ("1h30m", 5400, "1h30m0s"),
            ("30s", 30, "30s"),
            ("24h", 86400, "24h0m0s"),
            ("0", 0, "0s"),
        ] {
            let d = parse(text).unwrap();
            assert_eq!(d.as_secs(), secs, "{text}");
            assert_eq!(format(d), canonical, "{text}");
        }
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        for bad in ["", "5", "m", "-1s", "5x", "1h-3m"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
