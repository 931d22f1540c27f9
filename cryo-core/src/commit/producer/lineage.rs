//! Row lineage (format v3): the `first_row_id` a carried-over data file inherited, made
//! explicit when its entry is written again.

use crate::error::Error;
use crate::error::Result;
use iceberg::spec::DataFile;
use iceberg::spec::DataFileBuilder;

/// `file` with its `first_row_id` set (upstream keeps `DataFile` fields crate-private, so it is
/// rebuilt field by field).
pub(super) fn with_first_row_id(
    table: &str,
    file: &DataFile,
    spec_id: i32,
    first_row_id: i64,
) -> Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(first_row_id))
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| {
        Error::compute(
            format!("{table}: cannot copy the metadata of {}", file.file_path()),
            e,
        )
    })
}
