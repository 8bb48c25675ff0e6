//! Chunk encoding. Timestamps are stored as zig-zag varint delta-of-deltas (one byte for a
//! steady interval; in the decimal form a run of steady intervals is one zero and the run's
//! length, so a minute sampled every second costs a few bytes of time, not sixty). Values
//! take one of two forms, whichever the chunk allows:
//! - decimal (`FORMAT_DECIMAL_VALUE_RUNS`; `FORMAT_DECIMAL_RUNS`, one byte per repeated
//!   value, and `FORMAT_DECIMAL`, one byte per steady interval too, are still read): every
//!   value is a whole number of 10^-k (k = 0, 3 or 6) — bytes, or usage the store kept to
//!   a milli-core — stored as zig-zag varint deltas of those integers, a run of repeats as
//!   one zero and the run's length: 1–2 bytes a value for a noisy CPU series, a few bytes
//!   a minute for an idle container's;
//! - binary (`FORMAT`, Gorilla-style at byte granularity): the XOR with the previous
//!   value's bits, trimmed to its non-zero bytes (one byte when a value repeats; up to 9
//!   for a noisy float).
//!
//! Both are lossless: the decimal form is chosen only when every value reads back
//! bit-for-bit.

use super::aggregate::Point;

/// First byte of a chunk of binary values.
pub const FORMAT: u8 = 0xA1;
/// First byte of a chunk of decimal values.
pub const FORMAT_DECIMAL: u8 = 0xA2;
/// First byte of a chunk of decimal values whose steady intervals are run-length coded.
pub const FORMAT_DECIMAL_RUNS: u8 = 0xA3;
/// First byte of a chunk of decimal values whose steady intervals and repeated values are
/// both run-length coded.
pub const FORMAT_DECIMAL_VALUE_RUNS: u8 = 0xA4;
/// The most points a chunk with value runs may claim (an hour at 1 s is 3,600): there a
/// point may take less than a byte, so a corrupt count is refused by this instead.
const MAX_RUN_POINTS: u64 = 1 << 20;
/// The decimal scales tried, fewest digits first.
const SCALES: [i32; 3] = [0, 3, 6];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CodecError {
    #[error("chunk: unknown format byte {0:#x}")]
    Format(u8),
    #[error("chunk: truncated")]
    Truncated,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The values as whole multiples of 10^-k, for the smallest k that reads every value back
/// exactly.
fn decimal(points: &[Point]) -> Option<(i32, Vec<i64>)> {
    SCALES.iter().find_map(|&k| {
        let f = 10f64.powi(k);
        points
            .iter()
            .map(|p| {
                let i = (p.value * f).round();
                // Beyond 2^53 integers are no longer exact in a float.
                let exact =
                    i.abs() < 9.0e15 && ((i as i64) as f64 / f).to_bits() == p.value.to_bits();
                exact.then_some(i as i64)
            })
            .collect::<Option<Vec<i64>>>()
            .map(|ints| (k, ints))
    })
}

/// Timestamps as zig-zag varint delta-of-deltas; a zero is followed by how many more
/// zeros come after it.
fn put_times(out: &mut Vec<u8>, points: &[Point]) {
    let Some(first) = points.first() else {
        return;
    };
    put_varint(out, zigzag(first.ts));
    let mut prev_delta = 0i64;
    put_runs(
        out,
        points.windows(2).map(|w| {
            let delta = w[1].ts.wrapping_sub(w[0].ts);
            let dod = delta.wrapping_sub(prev_delta);
            prev_delta = delta;
            dod
        }),
    );
}

/// Zig-zag varints; a zero is followed by how many more zeros come after it.
fn put_runs(out: &mut Vec<u8>, values: impl Iterator<Item = i64>) {
    let mut zeros = 0u64;
    for v in values {
        if v == 0 {
            zeros += 1;
            continue;
        }
        put_zeros(out, zeros);
        zeros = 0;
        put_varint(out, zigzag(v));
    }
    put_zeros(out, zeros);
}

fn put_zeros(out: &mut Vec<u8>, zeros: u64) {
    if zeros > 0 {
        put_varint(out, 0);
        put_varint(out, zeros - 1);
    }
}

/// Encodes points sorted by time.
pub fn encode(points: &[Point]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + points.len() * 4);
    if let Some((k, ints)) = decimal(points) {
        out.push(FORMAT_DECIMAL_VALUE_RUNS);
        put_varint(&mut out, points.len() as u64);
        out.push(k as u8);
        put_times(&mut out, points);
        let mut prev = 0i64;
        let deltas = ints.into_iter().map(|i| {
            let d = i.wrapping_sub(prev);
            prev = i;
            d
        });
        put_runs(&mut out, deltas);
        return out;
    }
    out.push(FORMAT);
    put_varint(&mut out, points.len() as u64);
    let (mut prev_ts, mut prev_delta, mut prev_bits) = (0i64, 0i64, 0u64);
    for (i, p) in points.iter().enumerate() {
        let bits = p.value.to_bits();
        if i == 0 {
            put_varint(&mut out, zigzag(p.ts));
            out.extend_from_slice(&bits.to_le_bytes());
        } else {
            let delta = p.ts.wrapping_sub(prev_ts);
            put_varint(&mut out, zigzag(delta.wrapping_sub(prev_delta)));
            put_xor(&mut out, bits ^ prev_bits);
            prev_delta = delta;
        }
        prev_ts = p.ts;
        prev_bits = bits;
    }
    out
}

/// Header byte: trailing zero bytes in the high nibble, kept bytes (1..=8) in the low one;
/// 0 means "same value".
fn put_xor(out: &mut Vec<u8>, xor: u64) {
    if xor == 0 {
        out.push(0);
        return;
    }
    let trail = xor.trailing_zeros() / 8;
    let lead = xor.leading_zeros() / 8;
    let len = 8 - lead - trail;
    out.push(((trail as u8) << 4) | len as u8);
    let kept = (xor >> (trail * 8)).to_le_bytes();
    out.extend_from_slice(&kept[..len as usize]);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, CodecError> {
        let b = *self.bytes.get(self.at).ok_or(CodecError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(CodecError::Truncated)
    }

    fn le(&mut self, len: usize) -> Result<u64, CodecError> {
        let end = self.at.checked_add(len).ok_or(CodecError::Truncated)?;
        let raw = self.bytes.get(self.at..end).ok_or(CodecError::Truncated)?;
        self.at = end;
        let mut buf = [0u8; 8];
        buf[..len].copy_from_slice(raw);
        Ok(u64::from_le_bytes(buf))
    }

    fn xor(&mut self) -> Result<u64, CodecError> {
        let h = self.byte()?;
        if h == 0 {
            return Ok(0);
        }
        let (trail, len) = (u32::from(h >> 4), usize::from(h & 0x0f));
        if len == 0 || len > 8 || trail as usize + len > 8 {
            return Err(CodecError::Truncated);
        }
        Ok(self.le(len)? << (trail * 8))
    }
}

/// Decodes a chunk written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Vec<Point>, CodecError> {
    let mut r = Reader { bytes, at: 0 };
    match r.byte()? {
        FORMAT => decode_binary(r, bytes.len()),
        f @ (FORMAT_DECIMAL | FORMAT_DECIMAL_RUNS | FORMAT_DECIMAL_VALUE_RUNS) => {
            decode_decimal(r, bytes.len(), f)
        }
        f => Err(CodecError::Format(f)),
    }
}

/// Reads what `put_runs` wrote (`on`), or plain zig-zag varints.
struct Runs {
    on: bool,
    zeros: u64,
}

impl Runs {
    fn next(&mut self, r: &mut Reader<'_>) -> Result<i64, CodecError> {
        if self.zeros > 0 {
            self.zeros -= 1;
            return Ok(0);
        }
        let v = unzigzag(r.varint()?);
        if self.on && v == 0 {
            self.zeros = r.varint()?;
        }
        Ok(v)
    }
}

fn decode_decimal(mut r: Reader<'_>, len: usize, format: u8) -> Result<Vec<Point>, CodecError> {
    let n = r.varint()?;
    let k = r.byte()?;
    if !SCALES.contains(&i32::from(k)) {
        return Err(CodecError::Format(k));
    }
    let f = 10f64.powi(i32::from(k));
    let mut dods = Runs {
        on: format != FORMAT_DECIMAL,
        zeros: 0,
    };
    let mut deltas = Runs {
        on: format == FORMAT_DECIMAL_VALUE_RUNS,
        zeros: 0,
    };
    // Without value runs every point takes at least one byte (its value): a corrupt count
    // cannot make us loop or allocate much.
    let most = if deltas.on {
        MAX_RUN_POINTS
    } else {
        len as u64
    };
    if n > most {
        return Err(CodecError::Truncated);
    }
    let mut times = Vec::with_capacity((n as usize).min(len.saturating_mul(8)));
    let (mut ts, mut delta) = (0i64, 0i64);
    for i in 0..n {
        if i == 0 {
            ts = unzigzag(r.varint()?);
        } else {
            delta = delta.wrapping_add(dods.next(&mut r)?);
            ts = ts.wrapping_add(delta);
        }
        times.push(ts);
    }
    let mut value = 0i64;
    let mut out = Vec::with_capacity(times.len());
    for ts in times {
        value = value.wrapping_add(deltas.next(&mut r)?);
        out.push(Point {
            ts,
            value: value as f64 / f,
        });
    }
    Ok(out)
}

fn decode_binary(mut r: Reader<'_>, len: usize) -> Result<Vec<Point>, CodecError> {
    let n = r.varint()?;
    let mut out = Vec::with_capacity((n as usize).min(len / 2));
    let (mut ts, mut delta, mut bits) = (0i64, 0i64, 0u64);
    for i in 0..n {
        if i == 0 {
            ts = unzigzag(r.varint()?);
            bits = r.le(8)?;
        } else {
            delta = delta.wrapping_add(unzigzag(r.varint()?));
            ts = ts.wrapping_add(delta);
            bits ^= r.xor()?;
        }
        out.push(Point {
            ts,
            value: f64::from_bits(bits),
        });
    }
    Ok(out)
}

/// The first store format: 16 raw bytes a point (read once, when an old store is migrated).
pub fn decode_raw(bytes: &[u8]) -> Vec<Point> {
    bytes
        .chunks_exact(16)
        .filter_map(|c| {
            Some(Point {
                ts: i64::from_le_bytes(c[..8].try_into().ok()?),
                value: f64::from_le_bytes(c[8..].try_into().ok()?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pts(v: &[(i64, f64)]) -> Vec<Point> {
        v.iter().map(|&(ts, value)| Point { ts, value }).collect()
    }

    #[test]
    fn round_trips_and_compresses_steady_series() {
        let steady: Vec<Point> = (0..60)
            .map(|i| Point {
                ts: 1_700_000_000_000 + i * 1000,
                value: 2.5,
            })
            .collect();
        let enc = encode(&steady);
        assert_eq!(decode(&enc).unwrap(), steady);
        assert!(enc.len() < 60 * 3, "{} bytes", enc.len());
        for case in [
            pts(&[]),
            pts(&[(-5, -0.0)]),
            pts(&[
                (1, 1.0),
                (3, f64::MAX),
                (2, f64::MIN_POSITIVE),
                (i64::MAX, 0.1),
            ]),
            pts(&[(i64::MIN, 1e300), (i64::MAX, -1e-300)]),
        ] {
            assert_eq!(decode(&encode(&case)).unwrap(), case);
        }
    }

    #[test]
    fn decimal_values_take_a_few_bytes_and_read_back_exactly() {
        // A noisy CPU series kept to a micro-core, and memory in bytes.
        let cpu: Vec<Point> = (0..60)
            .map(|i| Point {
                ts: 1_700_000_000_000 + i * 1000,
                value: (52_341 + (i * 7919) % 20_000) as f64 / 1e6,
            })
            .collect();
        let enc = encode(&cpu);
        assert_eq!(enc[0], FORMAT_DECIMAL_VALUE_RUNS);
        assert_eq!(decode(&enc).unwrap(), cpu);
        assert!(enc.len() < 60 * 3, "{} bytes for 60 points", enc.len());
        let mem: Vec<Point> = (0..60)
            .map(|i| Point {
                ts: i * 1000,
                value: (1u64 << 30) as f64 + (i * 4096) as f64,
            })
            .collect();
        let enc = encode(&mem);
        assert_eq!(
            (enc[0], enc[2]),
            (FORMAT_DECIMAL_VALUE_RUNS, 0),
            "whole bytes: scale 0"
        );
        assert_eq!(decode(&enc).unwrap(), mem);
        // One value with more digits sends the chunk to the binary form, still exact.
        let mut odd = cpu.clone();
        odd[3].value = 0.1 + 0.2;
        let enc = encode(&odd);
        assert_eq!(enc[0], FORMAT);
        assert_eq!(decode(&enc).unwrap(), odd);
        // -0.0 and huge values are not decimal either.
        for v in [-0.0, 1e300] {
            let p = [Point { ts: 0, value: v }];
            assert_eq!(decode(&encode(&p)).unwrap()[0].value.to_bits(), v.to_bits());
        }
    }

    #[test]
    fn steady_seconds_cost_no_byte_of_time_and_older_chunks_still_read() {
        let mut minute: Vec<Point> = (0..60)
            .map(|i| Point {
                ts: 1_700_000_000_000 + i * 1000,
                value: 7.0,
            })
            .collect();
        let enc = encode(&minute);
        assert!(
            enc.len() <= 16,
            "{} bytes: header, the first time and value, two runs",
            enc.len()
        );
        assert_eq!(decode(&enc).unwrap(), minute);
        // Runs of repeats between changes, as an idle container's usage reads.
        let mut idle = minute.clone();
        for (i, p) in idle.iter_mut().enumerate() {
            p.value = [0.0, 0.001, 0.0][i / 20];
        }
        let enc = encode(&idle);
        assert!(enc.len() <= 24, "{} bytes", enc.len());
        assert_eq!(decode(&enc).unwrap(), idle);
        // A late sample and a missed one break the run and start another.
        minute[10].ts += 300;
        minute.remove(40);
        assert_eq!(decode(&encode(&minute)).unwrap(), minute);
        // A chunk written before runs (one zero byte per steady interval): (1, 1.0), (2, 3.0).
        let old = [FORMAT_DECIMAL, 2, 0, 2, 2, 2, 4];
        assert_eq!(decode(&old).unwrap(), pts(&[(1, 1.0), (2, 3.0)]));
        // One written before value runs: three points, two steady intervals (a zero and one
        // more), a value byte each: 5, 5, 6.
        let old = [FORMAT_DECIMAL_RUNS, 3, 0, 2, 2, 0, 0, 10, 0, 2];
        assert_eq!(decode(&old).unwrap(), pts(&[(1, 5.0), (2, 5.0), (3, 6.0)]));
        // A count no chunk of this length can hold is refused, not looped over.
        let huge = [
            FORMAT_DECIMAL_VALUE_RUNS,
            0xff,
            0xff,
            0xff,
            0xff,
            0x7f,
            0,
            0,
            0,
            0xff,
            0x7f,
        ];
        assert_eq!(decode(&huge), Err(CodecError::Truncated));
        assert_eq!(
            decode(&[
                FORMAT_DECIMAL_RUNS,
                0xff,
                0xff,
                0xff,
                0x7f,
                0,
                2,
                0,
                0xff,
                0xff,
                0x7f
            ]),
            Err(CodecError::Truncated)
        );
    }

    #[test]
    fn rejects_foreign_and_truncated_bytes() {
        assert_eq!(decode(&[]), Err(CodecError::Truncated));
        assert_eq!(decode(&[7, 1]), Err(CodecError::Format(7)));
        for case in [pts(&[(1, 1.0), (2, 3.0)]), pts(&[(1, 0.1 + 0.2), (2, 3.0)])] {
            let enc = encode(&case);
            for cut in 1..enc.len() {
                assert!(decode(&enc[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    proptest! {
        #[test]
        fn any_points_round_trip(v in proptest::collection::vec((any::<i64>(), any::<u64>()), 0..50)) {
            let points: Vec<Point> = v.iter().map(|&(ts, b)| Point { ts, value: f64::from_bits(b) }).collect();
            let back = decode(&encode(&points)).unwrap();
            prop_assert_eq!(back.len(), points.len());
            for (a, b) in back.iter().zip(&points) {
                prop_assert_eq!(a.ts, b.ts);
                prop_assert_eq!(a.value.to_bits(), b.value.to_bits());
            }
        }

        #[test]
        fn any_bytes_never_panic(v in proptest::collection::vec(any::<u8>(), 0..64)) {
            for f in [FORMAT, FORMAT_DECIMAL, FORMAT_DECIMAL_RUNS, FORMAT_DECIMAL_VALUE_RUNS] {
                let mut bytes = vec![f];
                bytes.extend(v.iter().copied());
                let _ = decode(&bytes);
            }
        }

        #[test]
        fn any_decimal_points_round_trip(v in proptest::collection::vec((any::<i64>(), -1_000_000_000_000i64..1_000_000_000_000), 0..50)) {
            let points: Vec<Point> = v.iter().map(|&(ts, u)| Point { ts, value: u as f64 / 1e6 }).collect();
            let back = decode(&encode(&points)).unwrap();
            for (a, b) in back.iter().zip(&points) {
                prop_assert_eq!((a.ts, a.value.to_bits()), (b.ts, b.value.to_bits()));
            }
        }
    }
}
