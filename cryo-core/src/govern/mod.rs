//! Governing: who may maintain a table now. Per-table locks ([`TableLocks`]) keep two workers
//! from maintaining the same table at once.

mod lock;

pub use lock::{LocalLocks, LockGuard, LockHolder, TableLocks};
