//! Tabular results as Arrow, handed over through the Arrow `PyCapsule` interface
//! (`__arrow_c_stream__`), so `pyarrow.table(x)`, `polars.from_arrow(x)` and `DuckDB` read them
//! without a copy through Python objects.

use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// Rows Cryo produced (a receipt log, per-partition statistics, a file listing), readable by
/// any Arrow consumer: `pyarrow.table(result)`, `polars.from_arrow(result)`, `duckdb.sql("from result")`.
#[pyclass(frozen, module = "cryo._cryo", name = "ArrowResult")]
pub struct ArrowResult {
    name: String,
    schema: SchemaRef,
    batches: Arc<Vec<RecordBatch>>,
}

impl ArrowResult {
    pub(crate) fn new(name: impl Into<String>, batch: RecordBatch) -> Self {
        Self {
            name: name.into(),
            schema: batch.schema(),
            batches: Arc::new(vec![batch]),
        }
    }

    /// Rows in several batches of `schema`.
    pub(crate) fn from_batches(
        name: impl Into<String>,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Self {
        Self {
            name: name.into(),
            schema,
            batches: Arc::new(batches),
        }
    }
}

#[pymethods]
impl ArrowResult {
    /// Export the rows as an Arrow C stream (the Arrow `PyCapsule` interface). A requested schema
    /// is not applied: consumers get Cryo's schema, which the interface allows.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches: Vec<RecordBatch> = self.batches.as_ref().clone();
        let reader =
            RecordBatchIterator::new(batches.into_iter().map(Ok), Arc::clone(&self.schema));
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// What the rows are (`receipts`, `partitions`, `orphan_files`, …).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Column names, in order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Number of rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    fn __len__(&self) -> usize {
        self.num_rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "ArrowResult({}: {} rows; columns: {})",
            self.name,
            self.num_rows(),
            self.column_names().join(", ")
        )
    }
}
