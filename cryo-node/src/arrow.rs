//! Tabular results as Arrow IPC stream bytes: `tableFromIPC(buffer)` in `apache-arrow` reads them.

use arrow_array::RecordBatch;
use arrow_ipc::writer::StreamWriter;
use napi::bindgen_prelude::Buffer;

use crate::errors;

/// One record batch as an Arrow IPC stream (schema, the batch, end-of-stream marker).
pub(crate) fn ipc(batch: &RecordBatch) -> napi::Result<Buffer> {
    ipc_batches(&batch.schema(), std::slice::from_ref(batch))
}

/// Batches of `schema` as one IPC stream.
pub(crate) fn ipc_batches(
    schema: &arrow_schema::SchemaRef,
    batches: &[RecordBatch],
) -> napi::Result<Buffer> {
    let mut bytes = Vec::new();
    {
        let mut writer = StreamWriter::try_new(&mut bytes, schema).map_err(errors::internal)?;
        for batch in batches {
            writer.write(batch).map_err(errors::internal)?;
        }
        writer.finish().map_err(errors::internal)?;
    }
    Ok(bytes.into())
}

/// A cryo-core result that is a record batch, as IPC bytes.
pub(crate) fn ipc_result(batch: cryo_core::Result<RecordBatch>) -> napi::Result<Buffer> {
    ipc(&errors::check(batch)?)
}
