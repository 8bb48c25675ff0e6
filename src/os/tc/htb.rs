//! HTB's netlink options (`linux/pkt_sched.h`: `tc_htb_glob`, `tc_htb_opt`), which
//! netlink-packet-route does not type: the bytes the kernel reads, and the class
//! parameters read back from a dump.

use netlink_packet_core::{DefaultNla, Nla, NlasIterator};

const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
/// `TC_LINKLAYER_ETHERNET`: with it the kernel computes the rate itself and needs no
/// rate table (which only old `tc` binaries send).
const LINKLAYER_ETHERNET: u8 = 1;
/// iproute2's default MTU for a class's burst.
const MTU: u64 = 1600;
/// One psched tick is 64 ns (`PSCHED_SHIFT`).
const NS_PER_TICK: u64 = 64;

/// One HTB class: rates in bytes per second, as the kernel keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtbClass {
    pub rate: u64,
    pub ceil: u64,
    pub prio: u32,
}

/// The qdisc's options: version 3, `r2q` 10 (tc's defaults), unclassified traffic to `defcls`.
pub fn qdisc_options(defcls: u32) -> Vec<DefaultNla> {
    let mut glob = Vec::with_capacity(20);
    for v in [3u32, 10, defcls, 0, 0] {
        glob.extend_from_slice(&v.to_ne_bytes());
    }
    vec![DefaultNla::new(TCA_HTB_INIT, glob)]
}

/// A class's options; rates above `u32::MAX` go in the 64-bit attributes as `tc` sends them.
pub fn class_options(c: &HtbClass) -> Vec<DefaultNla> {
    let (rate, ceil) = (c.rate.max(1), c.ceil.max(c.rate).max(1));
    let mut opt = Vec::with_capacity(44);
    opt.extend_from_slice(&ratespec(rate));
    opt.extend_from_slice(&ratespec(ceil));
    for v in [burst_ticks(rate), burst_ticks(ceil), 0, 0, c.prio] {
        opt.extend_from_slice(&v.to_ne_bytes());
    }
    let mut out = vec![DefaultNla::new(TCA_HTB_PARMS, opt)];
    if rate > u64::from(u32::MAX) {
        out.push(DefaultNla::new(TCA_HTB_RATE64, rate.to_ne_bytes().to_vec()));
    }
    if ceil > u64::from(u32::MAX) {
        out.push(DefaultNla::new(TCA_HTB_CEIL64, ceil.to_ne_bytes().to_vec()));
    }
    out
}

/// `tc_ratespec`: cell_log, linklayer, overhead, cell_align, mpu, rate (clamped to u32).
fn ratespec(rate: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[1] = LINKLAYER_ETHERNET;
    b[8..12].copy_from_slice(&(rate.min(u64::from(u32::MAX)) as u32).to_ne_bytes());
    b
}

/// tc's default burst (rate / HZ + MTU bytes, HZ being 1e9 on hrtimer kernels) as the
/// time it takes at `rate`, in psched ticks.
fn burst_ticks(rate: u64) -> u32 {
    let bytes = rate / 1_000_000_000 + MTU;
    let ns = u128::from(bytes) * 1_000_000_000 / u128::from(rate.max(1));
    (ns / u128::from(NS_PER_TICK)).min(u128::from(u32::MAX)) as u32
}

/// The class read back from a dump's `TCA_OPTIONS` payload (nested HTB attributes).
pub fn parse_class(options: &[u8]) -> Option<HtbClass> {
    let (mut parms, mut rate64, mut ceil64) = (None, None, None);
    for nla in NlasIterator::new(options) {
        let nla = nla.ok()?;
        let v = nla.value();
        match nla.kind() & 0x3fff {
            TCA_HTB_PARMS if v.len() >= 44 => parms = Some(v.to_vec()),
            TCA_HTB_RATE64 if v.len() >= 8 => rate64 = Some(u64_at(v, 0)),
            TCA_HTB_CEIL64 if v.len() >= 8 => ceil64 = Some(u64_at(v, 0)),
            _ => {}
        }
    }
    let p = parms?;
    Some(HtbClass {
        rate: rate64.unwrap_or_else(|| u64::from(u32_at(&p, 8))),
        ceil: ceil64.unwrap_or_else(|| u64::from(u32_at(&p, 20))),
        prio: u32_at(&p, 40),
    })
}

/// The bytes of an attribute the crate keeps whole.
pub fn nla_value(nla: &DefaultNla) -> Vec<u8> {
    let mut v = vec![0; nla.value_len()];
    nla.emit_value(&mut v);
    v
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    /// Emits options as the kernel nests them under `TCA_OPTIONS`.
    fn nested(nlas: &[DefaultNla]) -> Vec<u8> {
        let mut buf = vec![0; nlas.buffer_len()];
        nlas.emit(&mut buf);
        buf
    }

    #[test]
    fn a_class_reads_back_as_written() {
        let c = HtbClass {
            rate: 12_500_000,
            ceil: 125_000_000,
            prio: 2,
        };
        let opts = class_options(&c);
        assert_eq!(opts.len(), 1, "no 64-bit attributes under u32::MAX");
        assert_eq!(nla_value(&opts[0]).len(), 44, "sizeof(struct tc_htb_opt)");
        assert_eq!(parse_class(&nested(&opts)), Some(c));
    }

    #[test]
    fn rates_past_u32_use_the_64_bit_attributes() {
        let c = HtbClass {
            rate: 5_000_000_000,
            ceil: 6_000_000_000,
            prio: 1,
        };
        let opts = class_options(&c);
        assert_eq!(opts.len(), 3);
        assert_eq!(parse_class(&nested(&opts)), Some(c));
    }

    #[test]
    fn zero_rates_become_the_smallest_the_kernel_takes() {
        let c = HtbClass {
            rate: 0,
            ceil: 0,
            prio: 3,
        };
        let back = parse_class(&nested(&class_options(&c))).unwrap();
        assert_eq!((back.rate, back.ceil), (1, 1), "the kernel refuses rate 0");
    }

    #[test]
    fn the_burst_is_an_mtu_at_the_rate() {
        // 1600 bytes at 1,600,000 B/s is 1 ms = 15,625 ticks of 64 ns.
        assert_eq!(burst_ticks(1_600_000), 15_625);
        assert_eq!(u32_at(&nla_value(&qdisc_options(2)[0]), 8), 2, "defcls");
    }
}
