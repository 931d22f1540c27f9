//! One error type for the whole pipeline, a variant per stage.
//!
//! Callers branch on the variant (a [`Error::CommitConflict`] is retried or reported, a
//! [`Error::Config`] is fixed by a human) and on [`Error::is_retryable`]; messages are for people.
//! No variant ever carries a credential: catalog and storage code scrub configured secrets out of
//! every message they build (see [`crate::catalog::CatalogConfig::redact`]).

use std::fmt;

/// Boxed source error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Cryo.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is missing, malformed or contradictory.
    #[error("invalid configuration: {message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },

    /// Input to a pure stage (options, a plan, a policy) failed validation.
    #[error("invalid input: {message}")]
    Validation {
        /// What is wrong and how to fix it.
        message: String,
    },

    /// A policy file is invalid: every problem found, each with its file, line and field.
    #[error("invalid policy: {}", policy_problems(problems))]
    Policy {
        /// What is wrong, where.
        problems: Vec<crate::policy::PolicyProblem>,
    },

    /// The catalog refused or failed a request.
    #[error("catalog `{catalog}`: {message}")]
    Catalog {
        /// Catalog name.
        catalog: String,
        /// What happened.
        message: String,
        /// Underlying error.
        #[source]
        source: Option<BoxError>,
        /// Whether trying again may succeed.
        retryable: bool,
    },

    /// A namespace or table does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// The namespace or table that is missing.
        what: String,
    },

    /// Reading or writing storage failed.
    #[error("storage: {message} ({path})")]
    Storage {
        /// Path that was accessed.
        path: String,
        /// What happened.
        message: String,
        /// Underlying error.
        #[source]
        source: Option<BoxError>,
        /// Whether trying again may succeed.
        retryable: bool,
    },

    /// Table metadata (metadata.json, manifest list, manifest) is corrupt or violates the spec.
    #[error("invalid metadata for {table}: {message} ({location})")]
    Metadata {
        /// Table identifier, or the metadata path for path-loaded tables.
        table: String,
        /// File that could not be read or understood.
        location: String,
        /// What is wrong.
        message: String,
        /// Underlying error.
        #[source]
        source: Option<BoxError>,
    },

    /// The table uses something Cryo does not support (yet).
    #[error("unsupported: {message}")]
    Unsupported {
        /// What is unsupported.
        message: String,
    },

    /// Rendering a plan for an engine failed (for example an operation the engine lacks).
    #[error("render ({dialect}): {message}")]
    Render {
        /// Target dialect.
        dialect: String,
        /// What cannot be rendered.
        message: String,
    },

    /// Another writer committed first and validation found the change incompatible.
    #[error("commit conflict on {table}: {message}")]
    CommitConflict {
        /// Table identifier.
        table: String,
        /// Why the commit could not be made.
        message: String,
        /// Whether an attempt on the reloaded head may succeed: false when validation found the
        /// conflict final (the table was replaced, or has no snapshot left to build on).
        retryable: bool,
    },

    /// A destructive operation refused to run because it could lose data: a location shared
    /// with another table, a retention window under the safety floor, garbage collection turned
    /// off by the table. Nothing was changed; a person has to decide.
    #[error("refused on {table}: {reason}")]
    Refused {
        /// Table the operation was asked to clean.
        table: String,
        /// Why, naming what is at risk (the other table, the window, the property).
        reason: String,
    },

    /// An engine Cryo submitted work to (Trino, Spark) failed or could not be reached.
    #[error("{engine}{}: {message}", code.as_deref().map(|c| format!(" {c}")).unwrap_or_default())]
    Engine {
        /// Engine kind and where (`trino http://coordinator:8080`, `spark <app id>`; never with
        /// credentials).
        engine: String,
        /// The engine's query id, when it got that far.
        query_id: Option<String>,
        /// The engine's error name (`ICEBERG_COMMIT_ERROR`, …).
        code: Option<String>,
        /// What happened.
        message: String,
        /// Whether submitting again may succeed.
        retryable: bool,
    },

    /// A bug in Cryo.
    #[error("internal error: {0} (this is a bug in Cryo; please report it)")]
    Internal(String),

    /// Arrow, Parquet, a JSON encoder or one of Cryo's own tasks failed on data Cryo read or
    /// produced: a bug or a limit of the machine, not something the input can fix. Its code is
    /// `internal`, like [`Error::Internal`]'s; the underlying error is its source.
    #[error("{context}: {source}")]
    Compute {
        /// What Cryo was doing (and on which table or file).
        context: String,
        /// The failure.
        #[source]
        source: BoxError,
    },
}

fn policy_problems(problems: &[crate::policy::PolicyProblem]) -> String {
    match problems {
        [one] => one.to_string(),
        many => {
            let lines: Vec<String> = many.iter().map(|p| format!("\n  {p}")).collect();
            format!("{} problems:{}", many.len(), lines.concat())
        }
    }
}

impl Error {
    /// An [`Error::Compute`]: `context` says what Cryo was doing, `source` what failed.
    pub(crate) fn compute(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Compute {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Whether trying the same call again may succeed (transient I/O, catalog throttling).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Catalog { retryable, .. }
            | Error::Storage { retryable, .. }
            | Error::Engine { retryable, .. }
            | Error::CommitConflict { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// A stable, machine-readable code for the variant (bindings map it to exception classes).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Config { .. } => "config",
            Error::Validation { .. } => "validation",
            Error::Policy { .. } => "policy",
            Error::Catalog { .. } => "catalog",
            Error::NotFound { .. } => "not_found",
            Error::Storage { .. } => "storage",
            Error::Metadata { .. } => "metadata",
            Error::Unsupported { .. } => "unsupported",
            Error::Render { .. } => "render",
            Error::CommitConflict { .. } => "commit_conflict",
            Error::Refused { .. } => "refused",
            Error::Engine { .. } => "engine",
            Error::Internal(_) | Error::Compute { .. } => "internal",
        }
    }

    /// The message, prefixed with `table` unless it names the table already: for outcomes
    /// that carry a failure as text (a compaction group's), which must say whose it is.
    pub(crate) fn message_for(&self, table: &impl fmt::Display) -> String {
        let message = self.to_string();
        let table = table.to_string();
        if message.contains(&table) {
            message
        } else {
            format!("{table}: {message}")
        }
    }

    /// The same error with `table` named in its message when it does not name it already: for
    /// errors built where only a property map or a path is at hand.
    pub(crate) fn in_table(self, table: &impl fmt::Display) -> Self {
        let table = table.to_string();
        let named = |message: String| {
            if message.contains(&table) {
                message
            } else {
                format!("{table}: {message}")
            }
        };
        match self {
            Error::Config { message } => Error::Config {
                message: named(message),
            },
            Error::Validation { message } => Error::Validation {
                message: named(message),
            },
            Error::Unsupported { message } => Error::Unsupported {
                message: named(message),
            },
            other => other,
        }
    }

    pub(crate) fn config(message: impl fmt::Display) -> Self {
        Error::Config {
            message: message.to_string(),
        }
    }

    pub(crate) fn validation(message: impl fmt::Display) -> Self {
        Error::Validation {
            message: message.to_string(),
        }
    }

    pub(crate) fn unsupported(message: impl fmt::Display) -> Self {
        Error::Unsupported {
            message: message.to_string(),
        }
    }

    /// A failed operation on one of Cryo's own local files (lock, fence, receipt log): not
    /// retried, the path and the I/O error kept.
    pub(crate) fn local_file(
        path: &std::path::Path,
        message: impl fmt::Display,
        e: std::io::Error,
    ) -> Self {
        Error::Storage {
            path: path.display().to_string(),
            message: message.to_string(),
            source: Some(Box::new(e)),
            retryable: false,
        }
    }

    pub(crate) fn metadata(
        table: impl fmt::Display,
        location: impl fmt::Display,
        message: impl fmt::Display,
    ) -> Self {
        Error::Metadata {
            table: table.to_string(),
            location: location.to_string(),
            message: message.to_string(),
            source: None,
        }
    }
}

/// Upstream's error met on `table` (empty when the caller does not know it) while doing `what`:
/// the one mapping of `iceberg::Error`, which [`From`] uses too.
///
/// Storage failures reach us through our own adapter as `Unexpected` with a retryable flag;
/// `DataInvalid` means the input (files, schema, metadata change) does not fit the table.
/// Whatever is not one of the kinds below keeps upstream's error as its source.
pub(crate) fn iceberg_error(
    table: impl std::fmt::Display,
    what: &str,
    err: iceberg::Error,
) -> Error {
    use iceberg::ErrorKind as K;
    let table = table.to_string();
    let context = if table.is_empty() {
        what.to_string()
    } else {
        format!("{table}: {what}")
    };
    match err.kind() {
        K::CatalogCommitConflicts => Error::CommitConflict {
            table,
            message: format!("{what}: {}", err.message()),
            retryable: true,
        },
        K::DataInvalid | K::PreconditionFailed => {
            Error::validation(format!("{context}: {}", err.message()))
        }
        K::FeatureUnsupported => Error::unsupported(format!("{context}: {}", err.message())),
        K::TableNotFound | K::NamespaceNotFound => Error::NotFound {
            what: if table.is_empty() {
                err.message().to_string()
            } else {
                table
            },
        },
        _ => {
            let retryable = err.retryable();
            Error::Storage {
                path: table,
                message: format!("{what}: {}", err.message()),
                source: Some(Box::new(err)),
                retryable,
            }
        }
    }
}

impl From<iceberg::Error> for Error {
    fn from(err: iceberg::Error) -> Self {
        iceberg_error("", "iceberg", err)
    }
}
