//! The exception hierarchy: one Python class per `cryo_core::Error` variant, under `CryoError`.
//!
//! Classes are keyed on [`cryo_core::Error::code`], so a new variant in core falls back to the
//! base class until it gets its own. Messages are cryo-core's `Display`, which never carries a
//! credential (catalog and storage code redact configured secrets); the source chain is not
//! appended because it is not redacted.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyModule;

pyo3::create_exception!(
    cryo,
    CryoError,
    PyException,
    "Base class of every error Cryo raises. `code` is cryo-core's stable error code, `retryable` says whether trying again may succeed."
);
pyo3::create_exception!(
    cryo,
    ConfigError,
    CryoError,
    "A configuration value is missing, malformed or contradictory."
);
pyo3::create_exception!(
    cryo,
    ValidationError,
    CryoError,
    "Input (options, a plan, a policy) failed validation."
);
pyo3::create_exception!(
    cryo,
    PolicyError,
    ConfigError,
    "A policy file is invalid. `problems` lists every problem found: dicts with `file`, `line`, `column`, `field` and `message`."
);
pyo3::create_exception!(
    cryo,
    CatalogError,
    CryoError,
    "The catalog refused or failed a request."
);
pyo3::create_exception!(
    cryo,
    NotFoundError,
    CryoError,
    "A namespace or table does not exist."
);
pyo3::create_exception!(
    cryo,
    StorageError,
    CryoError,
    "Reading or writing storage failed."
);
pyo3::create_exception!(
    cryo,
    MetadataError,
    CryoError,
    "Table metadata is corrupt or violates the Iceberg spec."
);
pyo3::create_exception!(
    cryo,
    UnsupportedError,
    CryoError,
    "The table uses something Cryo does not support (yet)."
);
pyo3::create_exception!(
    cryo,
    RenderError,
    CryoError,
    "A plan cannot be rendered for an engine."
);
pyo3::create_exception!(
    cryo,
    CommitConflictError,
    CryoError,
    "Another writer committed first and the change could not be retried."
);
pyo3::create_exception!(
    cryo,
    RefusedError,
    CryoError,
    "A destructive operation refused to run because it could lose data; nothing was changed."
);
pyo3::create_exception!(
    cryo,
    EngineError,
    CryoError,
    "An engine Cryo submitted work to (Trino, Spark) failed or could not be reached."
);
pyo3::create_exception!(
    cryo,
    InternalError,
    CryoError,
    "A bug in Cryo; please report it."
);

/// The Python exception for a cryo-core error, with `code` and `retryable` attributes.
pub(crate) fn to_py(py: Python<'_>, err: &cryo_core::Error) -> PyErr {
    let message = err.to_string();
    let exc = match err.code() {
        "config" => ConfigError::new_err(message),
        "validation" => ValidationError::new_err(message),
        "policy" => PolicyError::new_err(message),
        "catalog" => CatalogError::new_err(message),
        "not_found" => NotFoundError::new_err(message),
        "storage" => StorageError::new_err(message),
        "metadata" => MetadataError::new_err(message),
        "unsupported" => UnsupportedError::new_err(message),
        "render" => RenderError::new_err(message),
        "commit_conflict" => CommitConflictError::new_err(message),
        "refused" => RefusedError::new_err(message),
        "engine" => EngineError::new_err(message),
        "internal" => InternalError::new_err(message),
        _ => CryoError::new_err(message),
    };
    let value = exc.value(py);
    // Setting attributes on a fresh exception instance cannot fail short of memory exhaustion;
    // the exception is still the right one without them.
    let _ = value.setattr("code", err.code());
    let _ = value.setattr("retryable", err.is_retryable());
    if let cryo_core::Error::Policy { problems } = err
        && let Ok(problems) = crate::convert::to_python(py, problems)
    {
        let _ = value.setattr("problems", problems);
    }
    exc
}

/// A `ValidationError` for input the binding itself rejects (an unknown option, a bad type).
pub(crate) fn validation(message: impl Into<String>) -> PyErr {
    let err = cryo_core::Error::Validation {
        message: message.into(),
    };
    Python::attach(|py| to_py(py, &err))
}

/// An `InternalError` (a bug in the binding).
pub(crate) fn internal(message: impl std::fmt::Display) -> PyErr {
    let err = cryo_core::Error::Internal(message.to_string());
    Python::attach(|py| to_py(py, &err))
}

/// Convert a cryo-core result.
pub(crate) fn check<T>(result: cryo_core::Result<T>) -> PyResult<T> {
    result.map_err(|e| Python::attach(|py| to_py(py, &e)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CryoError", py.get_type::<CryoError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ValidationError", py.get_type::<ValidationError>())?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("CatalogError", py.get_type::<CatalogError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("MetadataError", py.get_type::<MetadataError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("RenderError", py.get_type::<RenderError>())?;
    m.add("CommitConflictError", py.get_type::<CommitConflictError>())?;
    m.add("EngineError", py.get_type::<EngineError>())?;
    m.add("RefusedError", py.get_type::<RefusedError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
