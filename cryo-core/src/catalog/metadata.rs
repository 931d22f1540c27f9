//! Reading `metadata.json` with typed errors: missing, corrupt, compressed, unknown versions.

use std::io::Read;
use std::sync::Arc;

use iceberg::spec::{TableMetadata, TableMetadataRef};

use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// Format versions Cryo understands.
pub const SUPPORTED_FORMAT_VERSIONS: [u64; 3] = [1, 2, 3];

/// Read and parse a table's `metadata.json` (plain or gzip-compressed).
pub async fn read_table_metadata(
    storage: &ObjectStorage,
    table: &str,
    location: &str,
) -> Result<TableMetadataRef> {
    let bytes = storage.read_all(location).await.map_err(|e| match e {
        Error::Storage {
            message, source, ..
        } => Error::Metadata {
            table: table.to_string(),
            location: location.to_string(),
            message: format!("cannot read metadata file: {message}"),
            source,
        },
        other => other,
    })?;
    parse_table_metadata(table, location, &bytes).map(Arc::new)
}

/// Parse `metadata.json` bytes.
pub fn parse_table_metadata(table: &str, location: &str, bytes: &[u8]) -> Result<TableMetadata> {
    let decompressed;
    let json: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::metadata(table, location, format!("corrupt gzip: {e}")))?;
        decompressed = out;
        &decompressed
    } else {
        bytes
    };
    // Look at the format version before the full parse so an unknown version gets its own error
    // instead of a serde message about enum variants.
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| Error::metadata(table, location, format!("not valid JSON: {e}")))?;
    let version = value
        .get("format-version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| Error::metadata(table, location, "no numeric `format-version`"))?;
    if !SUPPORTED_FORMAT_VERSIONS.contains(&version) {
        return Err(Error::Unsupported {
            message: format!(
                "{table}: table format version {version} (Cryo supports 1, 2 and 3) in {location}"
            ),
        });
    }
    serde_json::from_value(value).map_err(|e| {
        Error::metadata(
            table,
            location,
            format!("does not match the Iceberg spec: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_errors_for_bad_metadata() {
        let e = parse_table_metadata("t", "m.json", b"{not json").unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", br#"{"format-version": 9}"#).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("format version 9"));
        let e = parse_table_metadata("t", "m.json", br#"{"format-version": 2}"#).unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", b"").unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", &[0x1f, 0x8b, 0, 1]).unwrap_err();
        assert!(e.to_string().contains("gzip"), "{e}");
    }
}
