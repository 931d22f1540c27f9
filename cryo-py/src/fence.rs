//! The commit fence (cryo-core's `govern::CommitFence`) for writers and for Cryo's options.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use cryo_core::TableId;
use cryo_core::govern::{CommitFence as CoreFence, FenceGuard};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::check;
use crate::runtime::blocking;

/// A commit fence shared by writers and Cryo: pass it as ``commit_fence=`` to ``compact``,
/// ``rewrite_position_deletes``, ``rewrite_manifests``, ``expire_snapshots``, ``run`` and
/// ``run_fleet``, and wrap every writer operation
/// (read to commit) in ``with fence.writer(catalog_name, table):``. Cryo's commits and those
/// operations never overlap, so a merge-on-read writer never fails on files a compaction just
/// replaced. Local: OS file locks under ``dir``, for processes on one host; across machines:
/// ``database=`` a PostgreSQL URI (the SQL catalog's own database, say), advisory locks there,
/// or ``location=`` a location on object storage (``s3://bucket/cryo/fence``), lease objects
/// there, reached with ``properties`` (PyIceberg's names, e.g. the catalog's ``s3.*``).
#[pyclass(frozen, module = "cryo._cryo", name = "CommitFence")]
pub struct CommitFence {
    inner: CoreFence,
}

#[pymethods]
impl CommitFence {
    /// ``wait_ms``: longest a commit of Cryo's waits for writers in flight (default 60 s).
    /// ``database``: a PostgreSQL URI; the fence is advisory locks there (``dir`` unused).
    /// ``location``: a location on object storage; the fence is lease objects there, reached
    /// with ``properties`` (without them, Cryo's commits use the table's storage and writers
    /// their environment's defaults); ``lease_ms``: how long a killed holder keeps the others
    /// out (default 60 s).
    #[new]
    #[pyo3(signature = (dir = None, *, wait_ms = None, database = None, location = None, properties = None, lease_ms = None))]
    fn new(
        dir: Option<PathBuf>,
        wait_ms: Option<u64>,
        database: Option<String>,
        location: Option<String>,
        properties: Option<BTreeMap<String, String>>,
        lease_ms: Option<u64>,
    ) -> PyResult<Self> {
        let dir = dir.unwrap_or_default();
        if dir.to_str().is_none() {
            return Err(crate::errors::validation(format!(
                "commit fence directory {} is not valid UTF-8",
                dir.display()
            )));
        }
        let mut inner = CoreFence::new(dir);
        inner.database = database;
        inner.location = location;
        inner.properties = properties.unwrap_or_default();
        if let Some(w) = wait_ms {
            inner.wait_ms = w;
        }
        if let Some(l) = lease_ms {
            inner.lease_ms = l;
        }
        check(inner.validate())?;
        Ok(Self { inner })
    }

    #[getter]
    fn dir(&self) -> String {
        self.inner.dir.display().to_string()
    }

    #[getter]
    fn wait_ms(&self) -> u64 {
        self.inner.wait_ms
    }

    /// Whether the fence is in a database (its URI is never shown: it may hold a password).
    #[getter]
    fn in_database(&self) -> bool {
        self.inner.database.is_some()
    }

    /// The location of the fence's objects on object storage, if it is there.
    #[getter]
    fn location(&self) -> Option<String> {
        self.inner.location.clone()
    }

    /// A context manager holding the fence for one writer operation on ``catalog``.``table``
    /// (``catalog``: the name given to :class:`cryo.Catalog`).
    fn writer(&self, catalog: String, table: &str) -> PyResult<WriterFence> {
        Ok(WriterFence {
            fence: self.inner.clone(),
            catalog,
            table: check(TableId::parse(table))?,
            guard: Mutex::new(None),
        })
    }

    /// The option cryo-core reads (``{"dir": ..., "wait_ms": ...}``).
    fn _option<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("dir", self.dir())?;
        d.set_item("wait_ms", self.inner.wait_ms)?;
        if let Some(db) = &self.inner.database {
            d.set_item("database", db)?;
        }
        if let Some(location) = &self.inner.location {
            d.set_item("location", location)?;
            d.set_item("properties", &self.inner.properties)?;
            d.set_item("lease_ms", self.inner.lease_ms)?;
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        if self.inner.database.is_some() {
            return format!(
                "CommitFence(database=<set>, wait_ms={})",
                self.inner.wait_ms
            );
        }
        if let Some(location) = &self.inner.location {
            return format!(
                "CommitFence(location={location:?}, wait_ms={}, lease_ms={})",
                self.inner.wait_ms, self.inner.lease_ms
            );
        }
        format!(
            "CommitFence({:?}, wait_ms={})",
            self.inner.dir.display().to_string(),
            self.inner.wait_ms
        )
    }
}

/// The fence held for one writer operation: ``with fence.writer("lake", "db.events"): ...``.
#[pyclass(frozen, module = "cryo._cryo", name = "WriterFence")]
pub struct WriterFence {
    fence: CoreFence,
    catalog: String,
    table: TableId,
    guard: Mutex<Option<FenceGuard>>,
}

#[pymethods]
impl WriterFence {
    /// Waits (without the GIL) while a commit of Cryo's on the table is in progress.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let me = slf.get();
        let py = slf.py();
        let guard = blocking(py, || me.fence.enter_writer(&me.catalog, &me.table))?;
        *me.guard.lock().unwrap_or_else(PoisonError::into_inner) = Some(guard);
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        false
    }
}
