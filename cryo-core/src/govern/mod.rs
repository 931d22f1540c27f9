//! Governing: who may maintain a table now.
//!
//! ```text
//! TableState + Probe (LoadSnapshot | ProbeFailure) + now ──Governor::decide──▶ Decision
//!     Admit { slot } ─▶ run ─▶ Governor::release(slot), Governor::record(slot, Outcome)
//!     Defer { reason, retry_after_ms } ─▶ ask again after that instant
//!     PastDeadline ─▶ skip the table in this run
//! ```
//!
//! - [`Governor`]: the admission policy (pure and deterministic; [`DeferReason`] says why not),
//!   per-destination [`Limits`], the slots Cryo holds and round-robin across coordinators.
//! - [`Bandit`]: optional, per destination; learns the running-query threshold from
//!   [`Outcome`]s and falls back to the static limits while it has too few.
//! - Per-table locks ([`TableLocks`]) keep two workers from maintaining the same table at once:
//!   on one machine ([`LocalLocks`]) or across machines, in the catalog's database
//!   ([`CatalogLocks`]) or on object storage ([`ObjectLocks`]); [`open_locks`] picks one.
//! - The commit fence ([`CommitFence`]) keeps Cryo's commits and cooperating writers'
//!   operations from overlapping.

mod bandit;
pub(crate) mod lease;
pub(crate) mod lock;
mod lock_catalog;
mod lock_objects;
mod policy;

pub use crate::commit::{CommitFence, FenceGuard};
pub use bandit::{Arm, Bandit, BanditConfig, Context, Outcome, Tuned, TuningSource};
pub use lock::{LocalLocks, LockGuard, LockHolder, TableLocks, open_locks};
pub use lock_catalog::CatalogLocks;
pub use lock_objects::{DEFAULT_LEASE_MS, ObjectLocks};
pub use policy::{
    CoordinatorLoad, Decision, DeferReason, Governor, Limits, LoadSnapshot, Probe, ProbeFailure,
    Slot, TableState,
};

#[cfg(test)]
mod tests;
