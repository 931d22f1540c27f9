//! cryo-core errors as JavaScript errors.
//!
//! napi-rs turns an [`napi::Error`] into a JS `Error` whose `code` is the napi status, so the
//! Cryo code and the retryable flag travel in a prefix of the message, `[cryo:<code>]` or
//! `[cryo:<code>:retryable]`, which the package's `errors.js` strips when it rebuilds the error as
//! the matching class (`NotFoundError`, `CommitConflictError`, …). The source chain becomes the
//! `cause` chain. cryo-core's messages never carry a credential; the source chain is not scrubbed
//! by core, so every link passes through the catalog's `redact` (configured secrets, URI
//! passwords) before it leaves.

use std::error::Error as _;

use cryo_core::CatalogConfig;

/// How many `cause` links are kept (source chains are short; this bounds a pathological one).
const MAX_CAUSES: usize = 8;

/// Marker that starts every message of an error Cryo raised (read by `errors.js`).
const PREFIX: &str = "[cryo:";

/// A cryo-core error as a napi error: prefixed message, redacted cause chain.
pub(crate) fn to_napi(err: &cryo_core::Error, config: Option<&CatalogConfig>) -> napi::Error {
    let scrub = |message: &str| match config {
        Some(c) => c.redact(message),
        // No catalog involved: still take passwords out of any URI in the message.
        None => CatalogConfig::new("", std::iter::empty::<(String, String)>()).redact(message),
    };
    let retryable = if err.is_retryable() { ":retryable" } else { "" };
    let message = format!(
        "{PREFIX}{}{retryable}] {}",
        err.code(),
        scrub(&err.to_string())
    );
    let mut causes = Vec::new();
    let mut source = err.source();
    while let Some(s) = source {
        if causes.len() == MAX_CAUSES {
            break;
        }
        causes.push(scrub(&s.to_string()));
        source = s.source();
    }
    // Build from the innermost cause outwards.
    let mut chain: Option<napi::Error> = None;
    for message in causes.into_iter().rev() {
        let mut link = napi::Error::from_reason(message);
        if let Some(inner) = chain.take() {
            link.set_cause(inner);
        }
        chain = Some(link);
    }
    let mut error = napi::Error::from_reason(message);
    if let Some(cause) = chain {
        error.set_cause(cause);
    }
    error
}

/// A `ValidationError` for input the binding itself rejects (an unknown option, a bad value).
pub(crate) fn validation(message: impl Into<String>) -> napi::Error {
    to_napi(
        &cryo_core::Error::Validation {
            message: message.into(),
        },
        None,
    )
}

/// An `InternalError` (a bug in the binding).
pub(crate) fn internal(message: impl std::fmt::Display) -> napi::Error {
    to_napi(&cryo_core::Error::Internal(message.to_string()), None)
}

/// Convert a cryo-core result (no catalog involved).
pub(crate) fn check<T>(result: cryo_core::Result<T>) -> napi::Result<T> {
    result.map_err(|e| to_napi(&e, None))
}
