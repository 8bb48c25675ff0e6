//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) as exact integers.
//!
//! Koordinator writes `kubernetes.io/batch-cpu` as an integer number of milli-cores and
//! memory as bytes, so every calculation works on integers. Parsing follows
//! apimachinery's `resource.Quantity`: `Value()` and `MilliValue()` round up.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// kube-apiserver's grammar for quantities, quoted in its error messages.
pub const QUANTITY_REGEX: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?} is empty")]
    Empty(String),
    #[error("quantity {0:?}: quantities must match the regular expression '{QUANTITY_REGEX}'")]
    Format(String),
    #[error("quantity {0:?}: unable to parse numeric part of quantity")]
    Number(String),
    #[error("quantity {0:?}: unable to parse quantity's suffix")]
    Suffix(String, String),
}

impl QuantityError {
    /// The reason in kube-apiserver's words (without the value).
    pub fn kube_reason(&self) -> String {
        match self {
            QuantityError::Empty(_) | QuantityError::Format(_) => {
                format!("quantities must match the regular expression '{QUANTITY_REGEX}'")
            }
            QuantityError::Number(_) => "unable to parse numeric part of quantity".into(),
            QuantityError::Suffix(..) => "unable to parse quantity's suffix".into(),
        }
    }

    /// The text that failed to parse.
    pub fn raw(&self) -> &str {
        match self {
            QuantityError::Empty(r)
            | QuantityError::Format(r)
            | QuantityError::Number(r)
            | QuantityError::Suffix(r, _) => r,
        }
    }
}

/// A parsed quantity in nano-units. Like apimachinery, values beyond 2^63-1 units are
/// capped there, and non-zero values below one nano-unit round up to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    nano: i128,
}

const NANO: i128 = 1_000_000_000;
/// 2^63-1 units, apimachinery's cap.
const CAP_NANO: i128 = i64::MAX as i128 * NANO;

impl Parsed {
    /// Whether the value was capped at 2^63-1 units (or its negative).
    pub fn capped(self) -> bool {
        self.nano.abs() >= CAP_NANO
    }

    pub fn is_negative(self) -> bool {
        self.nano < 0
    }

    /// The value × `10^9 / per_unit`, rounded up and saturated to i64.
    fn ceil_div(self, per_unit: i128) -> i64 {
        let q = self.nano.div_euclid(per_unit);
        let v = if self.nano.rem_euclid(per_unit) != 0 {
            q + 1
        } else {
            q
        };
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// Whether `s` matches [`QUANTITY_REGEX`].
fn matches_grammar(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    if num_end == 0 {
        return false;
    }
    let suffix = &body[num_end..];
    let letters_end = suffix
        .find(|c: char| !"eEinumkKMGTP".contains(c))
        .unwrap_or(suffix.len());
    let rest = &suffix[letters_end..];
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    rest.chars().all(|c| c.is_ascii_digit())
}

/// (power of ten, power of 1024) of a suffix.
fn suffix_scale(suffix: &str) -> Option<(i64, u32)> {
    let p = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        s if s.starts_with(['e', 'E']) && s.len() > 1 => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Exponents this large saturate either way; keep the arithmetic small.
            let mag: i64 = digits.parse().unwrap_or(i64::MAX).min(10_000);
            (if exp.starts_with('-') { -mag } else { mag }, 0)
        }
        _ => return None,
    };
    Some(p)
}

/// `digits × 10^pow10 × 1024^pow1024` in nano-units, rounded up, capped.
fn scaled_nano(digits: &str, pow10: i64, pow1024: u32) -> i128 {
    let sig = digits.trim_start_matches('0');
    if sig.is_empty() {
        return 0;
    }
    let e = pow10 + 9;
    let magnitude = sig.len() as i64 + e + (pow1024 as i64 * 31) / 10;
    if magnitude > 29 {
        return CAP_NANO;
    }
    let mut v: i128 = if e >= 0 {
        // At most 29 significant digits here: fits in i128.
        let base: i128 = sig.parse().unwrap_or(CAP_NANO);
        base.saturating_mul(10i128.saturating_pow(e as u32))
    } else {
        let cut = (-e) as usize;
        if cut >= sig.len() {
            1
        } else {
            let (keep, dropped) = sig.split_at(sig.len() - cut);
            let base: i128 = keep.parse().unwrap_or(CAP_NANO);
            base + i128::from(dropped.bytes().any(|b| b != b'0'))
        }
    };
    for _ in 0..pow1024 {
        v = v.saturating_mul(1024);
    }
    v.min(CAP_NANO)
}

/// Parses a quantity as apimachinery's `ParseQuantity` does.
pub fn parse(raw: &str) -> Result<Parsed, QuantityError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty(raw.to_string()));
    }
    if !matches_grammar(s) {
        return Err(QuantityError::Format(raw.to_string()));
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(num_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return Err(QuantityError::Number(raw.to_string()));
    }
    let (pow10, pow1024) = suffix_scale(suffix)
        .ok_or_else(|| QuantityError::Suffix(raw.to_string(), suffix.to_string()))?;
    // Most quantities ("100m", "4Gi") have no fraction: no allocation for them.
    let digits: std::borrow::Cow<str> = if frac_part.is_empty() {
        int_part.into()
    } else {
        format!("{int_part}{frac_part}").into()
    };
    let nano = scaled_nano(&digits, pow10 - frac_part.len() as i64, pow1024);
    Ok(Parsed {
        nano: if neg { -nano } else { nano },
    })
}

/// `MilliValue()`: the quantity × 1000, rounded up (saturated at i64's range).
pub fn milli(raw: &str) -> Result<i64, QuantityError> {
    Ok(parse(raw)?.ceil_div(NANO / 1000))
}

/// `Value()`: the quantity rounded up to an integer (saturated at i64's range).
pub fn value(raw: &str) -> Result<i64, QuantityError> {
    Ok(parse(raw)?.ceil_div(NANO))
}

/// Milli value of a `Quantity`, 0 when it does not parse (callers that must report bad
/// input use [`milli`] directly).
pub fn q_milli(q: &Quantity) -> i64 {
    milli(&q.0).unwrap_or(0)
}

/// Integer value of a `Quantity`, 0 when it does not parse.
pub fn q_value(q: &Quantity) -> i64 {
    value(&q.0).unwrap_or(0)
}

/// A plain integer quantity (`"3200"`), as Koordinator writes batch-cpu and bytes.
pub fn from_int(v: i64) -> Quantity {
    Quantity(v.to_string())
}

/// Bytes in Kubernetes' canonical BinarySI form: the largest power-of-1024 suffix that
/// keeps the number whole (`42949672960` → `"40Gi"`, `1000` → `"1000"`).
pub fn bytes_binary(v: i64) -> Quantity {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    for (suffix, shift) in SUFFIXES {
        let unit = 1i64 << shift;
        if v != 0 && v % unit == 0 {
            return Quantity(format!("{}{suffix}", v / unit));
        }
    }
    Quantity(v.to_string())
}

/// A cpu quantity from milli-cores in canonical form (`"2"`, `"1500m"`).
pub fn cpu_from_milli(m: i64) -> Quantity {
    if m % 1000 == 0 {
        Quantity((m / 1000).to_string())
    } else {
        Quantity(format!("{m}m"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_form() {
        for (v, want) in [
            (40i64 << 30, "40Gi"),
            (1000, "1000"),
            (1536, "1536"),
            (3072, "3Ki"),
            (0, "0"),
            (3 << 19, "1536Ki"),
        ] {
            assert_eq!(bytes_binary(v).0, want, "{v}");
        }
    }

    #[test]
    fn parses_table() {
        let cases: &[(&str, i64, i64)] = &[
            ("1", 1, 1000),
            ("100m", 1, 100),
            ("1500m", 2, 1500),
            ("1.5", 2, 1500),
            ("0.1", 1, 100),
            ("2Gi", 2 << 30, (2i64 << 30) * 1000),
            ("1.5Gi", 3 << 29, (3i64 << 29) * 1000),
            ("500M", 500_000_000, 500_000_000_000),
            ("1k", 1000, 1_000_000),
            ("1e3", 1000, 1_000_000),
            ("1E3", 1000, 1_000_000),
            ("12e-1", 2, 1200),
            ("-1", -1, -1000),
            ("3200", 3200, 3_200_000),
            ("10u", 1, 1),
            ("1n", 1, 1),
            ("0", 0, 0),
            ("64Mi", 64 << 20, (64i64 << 20) * 1000),
        ];
        for (raw, v, m) in cases {
            assert_eq!(value(raw).unwrap(), *v, "value of {raw}");
            assert_eq!(milli(raw).unwrap(), *m, "milli of {raw}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for raw in [
            "", "abc", "1Xi", "1..2", "--1", "1e", "m", "1.2.3", "abc", "1 m", "0x10", "1Ki2", ".",
        ] {
            assert!(value(raw).is_err(), "{raw:?} should be rejected");
        }
        assert!(matches!(parse("abc"), Err(QuantityError::Format(_))));
        assert!(matches!(parse("1..2"), Err(QuantityError::Number(_))));
        assert!(matches!(parse("1Xi"), Err(QuantityError::Format(_))));
        assert!(matches!(parse("1mi"), Err(QuantityError::Suffix(..))));
    }

    #[test]
    fn huge_values_cap_and_tiny_ones_round_up_as_apimachinery() {
        for raw in [
            "1e400",
            "9999999999999999999Ei",
            "99999999999999999999999999",
            "1e99999999999999",
        ] {
            let p = parse(raw).unwrap();
            assert!(p.capped(), "{raw}");
            assert_eq!(value(raw).unwrap(), i64::MAX, "{raw}");
            assert_eq!(milli(raw).unwrap(), i64::MAX, "{raw}");
        }
        assert_eq!(value("-1e400").unwrap(), -i64::MAX);
        assert!(parse("-5").unwrap().is_negative());
        assert_eq!(milli("1e-400").unwrap(), 1, "rounds up to 1n, then to 1m");
        assert_eq!(milli("0.0000000001").unwrap(), 1);
        assert_eq!(milli("0e400").unwrap(), 0);
        assert_eq!(value("8Ei").unwrap(), i64::MAX, "2^63 is one past the cap");
        assert_eq!(value("7Ei").unwrap(), 7 << 60);
    }

    #[test]
    fn formats_cpu() {
        assert_eq!(cpu_from_milli(2000).0, "2");
        assert_eq!(cpu_from_milli(1500).0, "1500m");
        assert_eq!(from_int(3200).0, "3200");
    }
}
