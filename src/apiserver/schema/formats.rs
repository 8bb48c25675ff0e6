//! The string formats a CRD schema's `format` names that kube-apiserver checks (kube-openapi's
//! strfmt registry): dates, times, base64, IP addresses, CIDRs and UUIDs; others pass.

/// Whether `text` is in `format`, for the formats kube checks (others pass).
pub fn format_ok(format: &str, text: &str) -> bool {
    match format {
        "date-time" | "datetime" => date_time(text),
        "date" => date(text),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "uuid" => uuid::Uuid::try_parse(text).is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        }),
        _ => true,
    }
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

fn date(s: &str) -> bool {
    let p: Vec<&str> = s.split('-').collect();
    matches!(p.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2)
        && (1..=12).contains(&m.parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&d.parse::<u8>().unwrap_or(0)))
}

/// RFC 3339 and the ISO 8601 forms kube's strfmt also takes (no seconds, no zone).
fn date_time(s: &str) -> bool {
    let Some((d, t)) = s.split_once(['T', 't', ' ']) else {
        return false;
    };
    if !date(d) {
        return false;
    }
    let (clock, zone) = match t.find(['Z', 'z', '+', '-']) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let zone_ok = match zone {
        "" | "Z" | "z" => true,
        z => {
            let hm = z[1..].replace(':', "");
            digits(&hm, 4)
        }
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let parts: Vec<&str> = hms.split(':').collect();
    let clock_ok = matches!(parts.as_slice(), [h, m] | [h, m, _] if digits(h, 2) && digits(m, 2))
        && parts.get(2).is_none_or(|sec| digits(sec, 2))
        && frac.bytes().all(|b| b.is_ascii_digit());
    zone_ok && clock_ok
}
