//! Why NodeNUMAResource cannot place a pod on a node, worded as Koordinator's reasons.

pub const ERR_NOT_ENOUGH_CPUS: &str = "not enough cpus available to satisfy request";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumaError {
    #[error("{}", ERR_NOT_ENOUGH_CPUS)]
    NotEnoughCpus,
    #[error("failed to allocate cpus")]
    AllocFailed,
    /// A NUMA node set that cannot hold the request's cpu or memory.
    #[error("Insufficient NUMA {0}")]
    InsufficientNuma(&'static str),
    /// A resource with no NUMA hint under a policy that needs one.
    #[error("Unsatisfied NUMA {0}")]
    Unsatisfied(String),
    /// No preferred hint across these resources (joined as the topology manager does).
    #[error("Unaligned NUMA Hint cause {0}")]
    Unaligned(String),
    #[error("unknown CPU bind policy {0:?}")]
    UnknownBindPolicy(String),
}
