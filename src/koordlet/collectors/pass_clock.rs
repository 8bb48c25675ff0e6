//! The time a collection pass stamps on its samples: the wall-clock time of the interval's
//! scheduled tick, so a series collected every second has timestamps exactly a second
//! apart. Stamping the moment the pass woke instead adds the scheduler's jitter (a few
//! milliseconds) to every point, and the store then spends a byte a point on time that
//! a steady series stores in a few bytes a minute (`store::codec`'s run-length time).

use std::time::Instant;

/// How far a stamp may be from the wall clock before the grid is laid again from the wall
/// clock (a late pass, or the clock stepped by NTP).
pub const MAX_SKEW_MS: i64 = 250;

/// Maps scheduled ticks to wall-clock milliseconds.
#[derive(Default)]
pub struct PassClock {
    /// A scheduled tick and its wall-clock time.
    anchor: Option<(Instant, i64)>,
}

impl PassClock {
    /// The stamp of the pass scheduled at `at` that woke at `now`, when the wall clock read
    /// `wall`: the grid's time while it is within `MAX_SKEW_MS` of the wall clock, else the
    /// wall clock itself (and the grid starts again there).
    pub fn stamp(&mut self, at: Instant, now: Instant, wall: i64) -> i64 {
        if let Some((tick0, wall0)) = self.anchor {
            let grid = wall0 + millis(at.saturating_duration_since(tick0));
            if (grid - wall).abs() <= MAX_SKEW_MS {
                return grid;
            }
        }
        // The scheduled tick's own wall time, so on-time passes after a late one land on
        // the grid again.
        self.anchor = Some((at, wall - millis(now.saturating_duration_since(at))));
        wall
    }
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ticks_a_second_apart_stamp_a_second_apart_whatever_the_wake_up_jitter() {
        let t0 = Instant::now();
        let mut clock = PassClock::default();
        let wall0 = 1_700_000_000_000;
        let stamps: Vec<i64> = [0u64, 3, 1, 7, 2]
            .iter()
            .enumerate()
            .map(|(n, jitter)| {
                let at = t0 + Duration::from_secs(n as u64);
                let now = at + Duration::from_millis(*jitter);
                clock.stamp(at, now, wall0 + n as i64 * 1000 + *jitter as i64)
            })
            .collect();
        assert_eq!(
            stamps,
            [0, 1, 2, 3, 4].map(|n| wall0 + n * 1000),
            "the grid, not the jitter"
        );
    }

    #[test]
    fn a_late_pass_is_stamped_when_it_ran_and_the_next_ones_are_back_on_the_grid() {
        let t0 = Instant::now();
        let mut clock = PassClock::default();
        let wall0 = 1_000_000;
        assert_eq!(clock.stamp(t0, t0, wall0), wall0);
        let at = t0 + Duration::from_secs(1);
        let late = at + Duration::from_millis(900);
        assert_eq!(
            clock.stamp(at, late, wall0 + 1900),
            wall0 + 1900,
            "the real time"
        );
        let next = t0 + Duration::from_secs(2);
        assert_eq!(
            clock.stamp(next, next + Duration::from_millis(2), wall0 + 2002),
            wall0 + 2000
        );
    }

    #[test]
    fn a_stepped_wall_clock_lays_the_grid_again() {
        let t0 = Instant::now();
        let mut clock = PassClock::default();
        assert_eq!(clock.stamp(t0, t0, 10_000), 10_000);
        let at = t0 + Duration::from_secs(1);
        // NTP moved the wall clock back five seconds.
        assert_eq!(clock.stamp(at, at, 6_000), 6_000);
        let next = t0 + Duration::from_secs(2);
        assert_eq!(clock.stamp(next, next, 7_001), 7_000);
        // Drift within the tolerance keeps the grid.
        let later = t0 + Duration::from_secs(3);
        assert_eq!(clock.stamp(later, later, 8_000 + MAX_SKEW_MS), 8_000);
    }
}
