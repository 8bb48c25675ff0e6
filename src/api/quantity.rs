//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) as exact integers.
//!
//! Koordinator writes `kubernetes.io/batch-cpu` as an integer number of milli-cores and
//! memory as bytes, so every calculation works on integers. Parsing follows
//! apimachinery's `resource.Quantity`: `Value()` and `MilliValue()` round up.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?} is empty")]
    Empty(String),
    #[error("quantity {0:?} has an invalid number")]
    Number(String),
    #[error("quantity {0:?} has an unknown suffix {1:?}")]
    Suffix(String, String),
    #[error("quantity {0:?} is out of range")]
    Range(String),
}

/// A parsed quantity: `num / den` exactly, with `den` a power of ten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    num: i128,
    den: i128,
}

impl Parsed {
    fn ceil_scaled(self, scale: i128) -> Result<i64, ()> {
        let n = self.num.checked_mul(scale).ok_or(())?;
        let q = n.div_euclid(self.den);
        let r = n.rem_euclid(self.den);
        let v = if r != 0 { q + 1 } else { q };
        i64::try_from(v).map_err(|_| ())
    }
}

fn split_suffix(s: &str) -> (&str, &str) {
    let idx = s
        .char_indices()
        .find(|(i, c)| {
            c.is_ascii_alphabetic()
                && !(matches!(c, 'e' | 'E')
                    && s[i + 1..]
                        .chars()
                        .next()
                        .is_some_and(|n| n.is_ascii_digit() || n == '-' || n == '+'))
        })
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (&s[..idx], &s[idx..])
}

/// (multiplier numerator, denominator) for a suffix.
fn suffix_scale(suffix: &str) -> Option<(i128, i128)> {
    let bin = |p: u32| Some((1i128 << (10 * p), 1));
    let dec = |p: u32| Some((10i128.pow(p), 1));
    match suffix {
        "" => Some((1, 1)),
        "n" => Some((1, 1_000_000_000)),
        "u" => Some((1, 1_000_000)),
        "m" => Some((1, 1000)),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(1),
        "Mi" => bin(2),
        "Gi" => bin(3),
        "Ti" => bin(4),
        "Pi" => bin(5),
        "Ei" => bin(6),
        _ => None,
    }
}

fn parse_decimal(raw: &str, number: &str) -> Result<Parsed, QuantityError> {
    let bad = || QuantityError::Number(raw.to_string());
    let (mantissa, exp) = match number.find(['e', 'E']) {
        Some(i) => (
            &number[..i],
            number[i + 1..].parse::<i32>().map_err(|_| bad())?,
        ),
        None => (number, 0),
    };
    let (neg, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad());
    }
    if !int_part
        .chars()
        .chain(frac_part.chars())
        .all(|c| c.is_ascii_digit())
    {
        return Err(bad());
    }
    let all = format!("{int_part}{frac_part}");
    let mut num: i128 = all.parse().map_err(|_| QuantityError::Range(raw.into()))?;
    let mut scale = frac_part.len() as i32 - exp;
    if !(-30..=30).contains(&scale) {
        return Err(QuantityError::Range(raw.into()));
    }
    while scale < 0 {
        num = num
            .checked_mul(10)
            .ok_or_else(|| QuantityError::Range(raw.into()))?;
        scale += 1;
    }
    let den = 10i128.pow(scale as u32);
    Ok(Parsed {
        num: if neg { -num } else { num },
        den,
    })
}

/// Parses a quantity string.
pub fn parse(raw: &str) -> Result<Parsed, QuantityError> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty(raw.to_string()));
    }
    let (number, suffix) = split_suffix(s);
    let (mul, div) = suffix_scale(suffix)
        .ok_or_else(|| QuantityError::Suffix(raw.to_string(), suffix.to_string()))?;
    let p = parse_decimal(raw, number)?;
    let num = p
        .num
        .checked_mul(mul)
        .ok_or_else(|| QuantityError::Range(raw.into()))?;
    let den = p
        .den
        .checked_mul(div)
        .ok_or_else(|| QuantityError::Range(raw.into()))?;
    Ok(Parsed { num, den })
}

/// `MilliValue()`: the quantity × 1000, rounded up.
pub fn milli(raw: &str) -> Result<i64, QuantityError> {
    parse(raw)?
        .ceil_scaled(1000)
        .map_err(|_| QuantityError::Range(raw.into()))
}

/// `Value()`: the quantity rounded up to an integer.
pub fn value(raw: &str) -> Result<i64, QuantityError> {
    parse(raw)?
        .ceil_scaled(1)
        .map_err(|_| QuantityError::Range(raw.into()))
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
            "",
            "abc",
            "1Xi",
            "1..2",
            "--1",
            "1e",
            "m",
            "1.2.3",
            "99999999999999999999999999Ei",
        ] {
            assert!(value(raw).is_err(), "{raw:?} should be rejected");
        }
    }

    #[test]
    fn formats_cpu() {
        assert_eq!(cpu_from_milli(2000).0, "2");
        assert_eq!(cpu_from_milli(1500).0, "1500m");
        assert_eq!(from_int(3200).0, "3200");
    }
}
