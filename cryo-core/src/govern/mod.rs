//! Governing: who may maintain a table now.
//!
//! ```text
//! TableState + Probe (LoadSnapshot | ProbeFailure) + now ──Governor::decide──▶ Decision
//!     Admit { slot } ─▶ run ─▶ Governor::release(slot)
//!     Defer { reason, retry_after_ms } ─▶ ask again after that instant
//!     PastDeadline ─▶ skip the table in this run
//! ```
//!
//! - [`Governor`]: the admission policy (pure and deterministic; [`DeferReason`] says why not),
//!   per-destination [`Limits`], the slots Cryo holds and round-robin across coordinators.
//! - Per-table locks ([`TableLocks`]) keep two workers from maintaining the same table at once.

mod lock;
mod policy;

pub use lock::{LocalLocks, LockGuard, LockHolder, TableLocks};
pub use policy::{
    CoordinatorLoad, Decision, DeferReason, Governor, Limits, LoadSnapshot, Probe, ProbeFailure,
    Slot, TableState,
};

#[cfg(test)]
mod tests;
