"""Cryo's exceptions: one class per kind of failure, all under :class:`CryoError`.

Every exception carries ``code`` (cryo-core's stable error code, e.g. ``"commit_conflict"``) and
``retryable`` (whether the same call may succeed if tried again). Messages never contain
credentials: cryo-core removes configured secrets and URI passwords from everything it reports.

The classes are created by the native module (so Rust errors map onto them directly) and
re-exported here.
"""

from ._cryo import (
    CatalogError,
    CommitConflictError,
    ConfigError,
    CryoError,
    EngineError,
    InternalError,
    MetadataError,
    NotFoundError,
    PolicyError,
    RefusedError,
    RenderError,
    StorageError,
    UnsupportedError,
    ValidationError,
)

__all__ = [
    "CatalogError",
    "CommitConflictError",
    "ConfigError",
    "CryoError",
    "EngineError",
    "InternalError",
    "MetadataError",
    "NotFoundError",
    "PolicyError",
    "RefusedError",
    "RenderError",
    "StorageError",
    "UnsupportedError",
    "ValidationError",
]
