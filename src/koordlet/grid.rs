//! One time grid for the koordlet's periodic work. Rounds that each slept their own
//! interval drifted apart, so a node's once-a-second work came as one wake-up per strategy
//! plus the collection pass; on a VM each wake-up starts cache-cold and costs several
//! times its warm price. On the grid, the collection pass starts at every multiple of its
//! interval from one anchor and the QoS rounds a moment later, together.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// QoS rounds start this long after the collection pass, so they read its samples.
pub const QOS_OFFSET: Duration = Duration::from_millis(200);

static ANCHOR: OnceLock<Instant> = OnceLock::new();

fn anchor() -> Instant {
    *ANCHOR.get_or_init(Instant::now)
}

/// The first point after `now` of the grid `anchor + offset + k·interval`.
pub fn next_after(anchor: Instant, now: Instant, interval: Duration, offset: Duration) -> Instant {
    let step = interval.max(Duration::from_millis(1)).as_nanos();
    let base = anchor + offset;
    let since = now.saturating_duration_since(base).as_nanos();
    let k = if now < base { 0 } else { since / step + 1 };
    let ahead = u64::try_from(k * step).unwrap_or(u64::MAX);
    base + Duration::from_nanos(ahead)
}

/// The next grid point for work every `interval`, `offset` after the collection pass.
pub fn next(interval: Duration, offset: Duration) -> Instant {
    next_after(anchor(), Instant::now(), interval, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_multiples_of_the_interval_from_the_anchor() {
        let a = Instant::now();
        let s = Duration::from_secs(1);
        let ms = Duration::from_millis;
        // Before the first offset point: that point.
        assert_eq!(next_after(a, a, s, ms(200)), a + ms(200));
        // Between points: the next one, never `now` itself.
        assert_eq!(next_after(a, a + ms(200), s, ms(200)), a + ms(1200));
        assert_eq!(next_after(a, a + ms(1700), s, ms(200)), a + ms(2200));
        assert_eq!(next_after(a, a + ms(1700), s, ms(0)), a + ms(2000));
        // Longer intervals share the grid's origin.
        let five = Duration::from_secs(5);
        assert_eq!(next_after(a, a + ms(7300), five, ms(200)), a + ms(10_200));
        // A zero interval still moves forward.
        assert!(next_after(a, a + ms(5), Duration::ZERO, ms(0)) > a + ms(5));
    }
}
