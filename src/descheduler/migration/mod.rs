//! MigrationController: the descheduler's evictor. Plugins' evictions become
//! PodMigrationJobs; this controller arbitrates them and drives each through its phases —
//! `EvictDirectly` (evict, done) or `ReservationFirst` (reserve room on another node, evict,
//! wait for the replacement to take the reservation).

pub mod arbitration;
pub mod args;
pub mod controller;
pub mod filter;
pub mod job;
pub mod refusal;

pub const PASSED_ARBITRATION: &str = "descheduler.koordinator.sh/passed-arbitration";
pub const ANNOTATION_EVICT_REASON: &str = "koordinator.sh/evict-reason";
pub const ANNOTATION_EVICT_TRIGGER: &str = "koordinator.sh/evict-trigger";
pub const ANNOTATION_JOB_CREATED_BY: &str = "koordinator.sh/job-created-by";
pub const LABEL_CREATED_BY: &str = "app.kubernetes.io/created-by";
pub const CREATOR: &str = "koord-descheduler";
/// Per-pod (or per-job label) override of `evictionPolicy`.
pub const LABEL_EVICT_POLICY: &str = crate::api::extension::keys::LABEL_EVICT_POLICY;
