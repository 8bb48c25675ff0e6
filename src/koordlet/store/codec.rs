//! Chunk encoding: Gorilla-style compression at byte granularity. Timestamps are stored
//! as zig-zag varint delta-of-deltas (one byte for a steady interval), values as the XOR
//! with the previous value's bits, trimmed to their non-zero bytes (one byte when a value
//! repeats). A steady 1 s series takes 2–9 bytes a point instead of 16, so sled holds and
//! caches several times more history in the same memory.

use super::aggregate::Point;

/// First byte of every encoded chunk.
pub const FORMAT: u8 = 0xA1;

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

/// Encodes points sorted by time.
pub fn encode(points: &[Point]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + points.len() * 4);
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
    let f = r.byte()?;
    if f != FORMAT {
        return Err(CodecError::Format(f));
    }
    let n = r.varint()?;
    // Every point takes at least two bytes: a corrupt count cannot make us allocate much.
    let mut out = Vec::with_capacity((n as usize).min(bytes.len() / 2));
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
    fn rejects_foreign_and_truncated_bytes() {
        assert_eq!(decode(&[]), Err(CodecError::Truncated));
        assert_eq!(decode(&[7, 1]), Err(CodecError::Format(7)));
        let enc = encode(&pts(&[(1, 1.0), (2, 3.0)]));
        for cut in 1..enc.len() {
            assert!(decode(&enc[..cut]).is_err(), "cut at {cut}");
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
            let mut bytes = vec![FORMAT];
            bytes.extend(v);
            let _ = decode(&bytes);
        }
    }
}
