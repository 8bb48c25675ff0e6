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

/// Parses `1h30m`, `5m0s`, `300ms`, `1.5h`, `0`.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(s.to_string());
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() || t.starts_with('-') {
        return Err(err());
    }
    let mut total = 0f64;
    let mut rest = t.strip_prefix('+').unwrap_or(t);
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_end == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| err())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * unit;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
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
