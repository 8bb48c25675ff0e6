//! cpuburst's cfsQuotaBurst half (`pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go`): the CFS quota of a throttled LS
//! container grows ×1.2 per round up to `cfsQuotaBurstPercent` of its limit, and shrinks
//! ×0.8 back towards the limit when the node's CPU share pool runs hot or the container
//! has used up its burst budget (a token bucket over `cfsQuotaBurstPeriodSeconds`).
//! Pure decisions; `cpuburst::CpuBurst` reads the inputs and writes through the executor.

use crate::api::extension::qos::QoSClass;

/// How busy the share pool (CPUs not held by LSE/LSR pods) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeBurstState {
    /// usage ≥ threshold
    Overload,
    /// 0.9 × threshold ≤ usage < threshold
    Cooling,
    Idle,
    /// No node usage sample.
    Unknown,
}

/// A pod as the share pool sees it.
pub struct PoolPod {
    pub qos: QoSClass,
    pub request_milli: i64,
    /// Average CPU used over the window, in cores.
    pub usage: Option<f64>,
}

/// Share pool total = logical CPUs − LSE/LSR requests; used = node used − LSE/LSR/BE
/// usage (system usage stays in, to be conservative); ratio 1 when the pool is empty.
pub fn node_state(
    threshold_percent: i64,
    cpus: usize,
    node_used: Option<f64>,
    pods: &[PoolPod],
) -> NodeBurstState {
    let Some(used) = node_used else {
        return NodeBurstState::Unknown;
    };
    let pinned = |q: QoSClass| matches!(q, QoSClass::Lse | QoSClass::Lsr);
    let total = cpus as f64
        - pods
            .iter()
            .filter(|p| pinned(p.qos))
            .map(|p| p.request_milli as f64 / 1000.0)
            .sum::<f64>();
    let pool_used = used
        - pods
            .iter()
            .filter(|p| pinned(p.qos) || p.qos == QoSClass::Be)
            .filter_map(|p| p.usage)
            .sum::<f64>();
    let ratio = if total > 0.0 { pool_used / total } else { 1.0 };
    let threshold = threshold_percent as f64 / 100.0;
    if ratio >= threshold {
        NodeBurstState::Overload
    } else if ratio >= threshold * 0.9 {
        NodeBurstState::Cooling
    } else {
        NodeBurstState::Idle
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfsOp {
    ScaleUp,
    ScaleDown,
    Remain,
    Reset,
}

/// The container's own wish: reset when the policy has no quota burst, shrink when the
/// limiter says the budget is spent, grow when it was throttled last round.
pub fn container_op(quota_burst_on: bool, allowed: bool, throttled: Option<f64>) -> CfsOp {
    if !quota_burst_on {
        CfsOp::Reset
    } else if !allowed {
        CfsOp::ScaleDown
    } else if throttled.is_some_and(|t| t > 0.0) {
        CfsOp::ScaleUp
    } else {
        CfsOp::Remain
    }
}

/// The node overrules: an overloaded pool takes bursts back; a cooling or unknown one
/// allows no new growth.
pub fn by_node(state: NodeBurstState, op: CfsOp) -> CfsOp {
    match (state, op) {
        (NodeBurstState::Overload, CfsOp::ScaleUp | CfsOp::Remain) => CfsOp::ScaleDown,
        (NodeBurstState::Cooling | NodeBurstState::Unknown, CfsOp::ScaleUp) => CfsOp::Remain,
        (_, op) => op,
    }
}

/// The container's quota for its CPU limit (100 ms period).
pub fn base_quota(limit_milli: i64) -> i64 {
    limit_milli * 100
}

/// The most a container may get: `cfsQuotaBurstPercent` of its base (when above 100).
pub fn ceil_quota(base: i64, percent: Option<i64>) -> i64 {
    match percent {
        Some(p) if p > 100 => (base as f64 * p as f64 / 100.0) as i64,
        _ => base,
    }
}

/// The new quota, clamped to [base, ceil].
pub fn target_quota(current: i64, base: i64, ceil: i64, op: CfsOp) -> i64 {
    let t = match op {
        CfsOp::ScaleUp => (current as f64 * 1.2) as i64,
        CfsOp::ScaleDown => (current as f64 * 0.8) as i64,
        CfsOp::Remain => current,
        CfsOp::Reset => base,
    };
    t.min(ceil).max(base)
}

/// A container's burst budget: it earns tokens while using < 60 % of its limit and spends
/// them while above 100 %; bursting is allowed while the balance is positive.
#[derive(Debug, Clone, PartialEq)]
pub struct Limiter {
    capacity: i64,
    tokens: i64,
    last: f64,
    period: i64,
}

impl Limiter {
    /// `fill` ∈ [0, 0.5): the random initial share of the capacity (spreads containers
    /// that start together); `now` in seconds of a monotonic clock.
    pub fn new(period_s: i64, burst_percent: i64, fill: f64, now: f64) -> Limiter {
        let capacity = period_s * (burst_percent - 100);
        Limiter {
            capacity,
            tokens: (capacity as f64 * fill) as i64,
            last: now,
            period: period_s,
        }
    }

    /// Same settings as `period_s`/`burst_percent`? (otherwise the caller starts afresh)
    pub fn matches(&self, period_s: i64, burst_percent: i64) -> bool {
        self.capacity == period_s * (burst_percent - 100)
    }

    /// Accounts the time since the last call at `usage_percent` of the limit.
    pub fn allow(&mut self, now: f64, usage_percent: i64) -> bool {
        let secs = (now - self.last).max(0.0).trunc() as i64;
        if usage_percent >= 100 {
            self.tokens -= (usage_percent - 100) * secs;
        } else if usage_percent < 60 {
            self.tokens += (100 - usage_percent) * secs;
        }
        self.tokens = self.tokens.clamp(-self.capacity, self.capacity);
        self.last = now;
        self.tokens > 0
    }

    /// Unused for two periods: forget it.
    pub fn expired(&self, now: f64) -> bool {
        now - self.last > (2 * self.period) as f64
    }

    pub fn tokens(&self) -> i64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(qos: QoSClass, req: i64, usage: Option<f64>) -> PoolPod {
        PoolPod {
            qos,
            request_milli: req,
            usage,
        }
    }

    #[test]
    fn share_pool_states() {
        use NodeBurstState::*;
        // 8 CPUs, an LSR pod holds 2: pool = 6. Node uses 4 cores, of which LSR 2 and BE 1:
        // pool used 1 → ratio 1/6 = 0.17.
        let pods = [
            pod(QoSClass::Lsr, 2000, Some(2.0)),
            pod(QoSClass::Be, 0, Some(1.0)),
            pod(QoSClass::Ls, 1000, Some(1.0)),
        ];
        assert_eq!(node_state(50, 8, Some(4.0), &pods), Idle);
        // Pool used 3 → 0.5 ≥ 0.5: overload; 2.8 → 0.467 ∈ [0.45, 0.5): cooling.
        assert_eq!(node_state(50, 8, Some(6.0), &pods), Overload);
        assert_eq!(node_state(50, 8, Some(5.8), &pods), Cooling);
        assert_eq!(node_state(50, 8, None, &pods), Unknown);
        // Everything pinned: no pool, ratio 1.
        let all = [pod(QoSClass::Lse, 8000, Some(0.0))];
        assert_eq!(node_state(50, 8, Some(0.0), &all), Overload);
    }

    #[test]
    fn operations_and_node_overrides() {
        use CfsOp::*;
        assert_eq!(container_op(false, true, Some(0.5)), Reset);
        assert_eq!(container_op(true, false, Some(0.5)), ScaleDown);
        assert_eq!(container_op(true, true, Some(0.1)), ScaleUp);
        assert_eq!(container_op(true, true, Some(0.0)), Remain);
        assert_eq!(container_op(true, true, None), Remain, "no metric yet");
        use NodeBurstState::*;
        assert_eq!(by_node(Overload, ScaleUp), ScaleDown);
        assert_eq!(by_node(Overload, Remain), ScaleDown);
        assert_eq!(by_node(Overload, Reset), Reset);
        assert_eq!(by_node(Cooling, ScaleUp), Remain);
        assert_eq!(by_node(Unknown, ScaleUp), Remain);
        assert_eq!(by_node(Cooling, ScaleDown), ScaleDown);
        assert_eq!(by_node(Idle, ScaleUp), ScaleUp);
    }

    #[test]
    fn quota_steps_are_clamped() {
        // 2-core limit, 300 %: base 200000, ceil 600000.
        let (base, ceil) = (base_quota(2000), ceil_quota(base_quota(2000), Some(300)));
        assert_eq!((base, ceil), (200_000, 600_000));
        assert_eq!(target_quota(200_000, base, ceil, CfsOp::ScaleUp), 240_000);
        assert_eq!(target_quota(550_000, base, ceil, CfsOp::ScaleUp), 600_000);
        assert_eq!(target_quota(240_000, base, ceil, CfsOp::ScaleDown), 200_000);
        assert_eq!(target_quota(400_000, base, ceil, CfsOp::ScaleDown), 320_000);
        assert_eq!(target_quota(400_000, base, ceil, CfsOp::Reset), base);
        assert_eq!(target_quota(-1, base, ceil, CfsOp::Remain), base);
        assert_eq!(ceil_quota(base, Some(100)), base);
        assert_eq!(ceil_quota(base, None), base);
    }

    #[test]
    fn limiter_spends_and_earns() {
        // 10 s period at 300 %: capacity 2000, starts empty.
        let mut l = Limiter::new(10, 300, 0.0, 0.0);
        assert!(
            !l.allow(1.0, 80),
            "80 %: neither earns nor spends; 0 is not > 0"
        );
        assert!(l.allow(3.0, 50), "2 s at 50 % earn 100");
        assert_eq!(l.tokens(), 100);
        assert!(!l.allow(4.0, 250), "1 s at 250 % spends 150");
        assert_eq!(l.tokens(), -50);
        for t in 5..100 {
            l.allow(t as f64, 0);
        }
        assert_eq!(l.tokens(), 2000, "capped at capacity");
        assert!(l.matches(10, 300) && !l.matches(10, 200));
        assert!(!l.expired(119.0) && l.expired(120.5));
        assert_eq!(Limiter::new(10, 300, 0.49, 0.0).tokens(), 980);
    }
}
