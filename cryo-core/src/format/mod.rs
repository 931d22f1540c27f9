//! Iceberg's own files, read and written in one place: `metadata.json`, manifest lists and
//! manifests, Puffin files.
//!
//! Everything else in Cryo reads these files through this module, so the spec's rules are
//! written once:
//!
//! ```text
//!  metadata.json ── metadata::read_table_metadata ──▶ TableMetadata (typed errors; v1–v3)
//!  manifest list ── manifest_list::read ──▶ ManifestFile entries        (upstream's reader)
//!                └─ manifest_list::read_paths ──▶ paths, lengths, counts (fast path ▸ upstream)
//!  manifest ─────── manifest::read ──▶ entries with what they inherit from their list entry
//!                └─ manifest::for_each_live ──▶ (path, content, size) of live entries
//!                └─ manifest::for_each_deleted ──▶ the same of DELETED ones, with their snapshot
//!                └─ summary::for_each_summary ──▶ what a scan folds of every entry
//!                                                                       (fast path ▸ upstream)
//!  entries ──────── manifest_write::ManifestOut ──▶ manifest bytes (fast encoder ▸ upstream)
//!  blobs ────────── puffin::write ──▶ a Puffin file (statistics); puffin::read_footer ◀── back
//! ```
//!
//! - **One inheritance rule** (`manifest::Inheritance`): an entry without a snapshot id takes
//!   its manifest's `added_snapshot_id`; an `ADDED` entry (or any entry of a manifest of
//!   sequence number 0, written before sequence numbers existed) without data or file sequence
//!   numbers takes the manifest's; on format v3 a data file without a `first_row_id` takes the
//!   manifest's `first_row_id` plus the record counts of the entries before it that had none.
//! - **Fast paths with upstream behind them**: `avro` walks records with the file's own
//!   writer schema, borrowing from the block. A reader that meets anything it does not expect
//!   (a codec, a schema, a byte) gives up on the whole file and upstream's reader parses it, so
//!   errors on bad input stay upstream's. [`check_fast_readers`] (the fuzz target
//!   `expire_readers`, and the property tests) holds the fast paths to upstream's answers.
//! - **No panic on user data**: upstream's Avro reader can panic on a corrupt header and can
//!   reserve gigabytes for a corrupt length; both are contained here ([`MAX_AVRO_ALLOCATION`]).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, Result};
use crate::io::ObjectStorage;

pub(crate) mod avro;
#[cfg(any(test, feature = "fuzz"))]
mod check;
pub(crate) mod manifest;
pub(crate) mod manifest_list;
pub(crate) mod manifest_write;
mod metadata;
pub(crate) mod puffin;
pub(crate) mod summary;

#[cfg(test)]
#[cfg(not(feature = "fuzz"))]
pub(crate) use check::check_fast_readers;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub use check::check_fast_readers;
pub use manifest::parse_manifest;
pub use manifest_list::parse_manifest_list;
pub(crate) use metadata::refs as table_refs;
pub(crate) use metadata::snapshots;
pub use metadata::{SUPPORTED_FORMAT_VERSIONS, parse_table_metadata, read_table_metadata};

/// The bytes of one of `table`'s metadata files (`what`: "metadata file", "manifest list",
/// "manifest"); a storage failure is a metadata error naming the file.
pub(crate) async fn read_file(
    storage: &ObjectStorage,
    table: &str,
    location: &str,
    what: &str,
) -> Result<bytes::Bytes> {
    storage.read_all(location).await.map_err(|e| match e {
        // A file the metadata names and that is not there is the table's fault; a store that
        // refuses or fails is the store's (credentials, network), and stays a storage error.
        Error::Storage {
            message,
            source,
            retryable: false,
            ..
        } if source
            .as_deref()
            .is_some_and(<dyn std::error::Error + Send + Sync>::is::<object_store::Error>) =>
        {
            Error::Metadata {
                table: table.to_string(),
                location: location.to_string(),
                message: format!("cannot read {what}: {message}"),
                source,
            }
        }
        other => other,
    })
}

/// The longest string, byte array, array or map a manifest or list may declare, in bytes or
/// elements (apache-avro's default is 512 Mi: a corrupt map length then reserves tens of GB
/// before the first entry is read, and the process aborts; found by fuzzing). 16 Mi is far above
/// anything an Iceberg writer produces (the largest values are header schemas of a few MB).
pub const MAX_AVRO_ALLOCATION: usize = 16 << 20;

/// Apply [`MAX_AVRO_ALLOCATION`] to apache-avro's process-wide limit. The limit is set once per
/// process; an application that set its own first keeps it.
pub(crate) fn limit_avro_allocations() {
    apache_avro::util::max_allocation_bytes(MAX_AVRO_ALLOCATION);
}

pub(crate) fn guarded<T>(
    parse: impl FnOnce() -> iceberg::Result<T>,
) -> std::result::Result<T, String> {
    limit_avro_allocations();
    match catch_unwind(AssertUnwindSafe(parse)) {
        Ok(Ok(parsed)) => Ok(parsed),
        Ok(Err(e)) => Err(e.message().to_string()),
        Err(panic) => Err(format!(
            "the Avro reader failed on it: {}",
            panic_message(panic.as_ref())
        )),
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "a panic without a message".to_string())
}
