//! Puffin files (<https://iceberg.apache.org/puffin-spec/>): blobs between two magics, then a
//! JSON footer that says where each blob is.
//!
//! ```text
//!  PFA1 | blob 0 | blob 1 | … | PFA1 | footer JSON | footer length (u32 LE) | flags (4 bytes) | PFA1
//! ```
//!
//! Written whole in memory: a statistics file holds one sketch of a few kilobytes per column.
//! Blobs are compressed with zstd, as Java's `compute_table_stats` writes them; the footer is
//! plain JSON (flag bit 0 clear). [`read_footer`] reads the footer back (uncompressed footers
//! only, which is what Java, Trino and Cryo write) and checks every offset against the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The four bytes that open and close a Puffin file and open its footer.
pub(crate) const MAGIC: [u8; 4] = *b"PFA1";
/// The codec name of a zstd-compressed blob.
pub(crate) const ZSTD: &str = "zstd";
/// The most a blob may inflate to when read (a deletion vector of a billion rows is ~130 MB).
#[cfg(test)]
const MAX_BLOB_BYTES: u64 = 1 << 30;

/// One blob as the footer describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct BlobEntry {
    /// Blob type (`apache-datasketches-theta-v1`, `deletion-vector-v1`).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// The field ids the blob is about.
    pub(crate) fields: Vec<i32>,
    /// The snapshot the blob was computed from.
    pub(crate) snapshot_id: i64,
    /// That snapshot's sequence number.
    pub(crate) sequence_number: i64,
    /// Offset of the blob's bytes in the file.
    pub(crate) offset: u64,
    /// Length of the blob's bytes (compressed).
    pub(crate) length: u64,
    /// `zstd` or `lz4`; absent: not compressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compression_codec: Option<String>,
    /// Blob properties (`ndv` for theta sketches).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) properties: BTreeMap<String, String>,
}

/// A Puffin file's footer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Footer {
    /// The blobs, in file order.
    pub(crate) blobs: Vec<BlobEntry>,
    /// File properties (`created-by`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) properties: BTreeMap<String, String>,
}

/// A blob to write.
#[derive(Debug, Clone)]
pub(crate) struct NewBlob {
    pub(crate) kind: String,
    pub(crate) fields: Vec<i32>,
    pub(crate) snapshot_id: i64,
    pub(crate) sequence_number: i64,
    pub(crate) properties: BTreeMap<String, String>,
    /// Uncompressed bytes.
    pub(crate) data: Vec<u8>,
    /// Compress with zstd (deletion vectors are stored as they are: readers fetch them by
    /// offset and length).
    pub(crate) compress: bool,
}

/// A Puffin file written in memory.
#[derive(Debug, Clone)]
pub(crate) struct PuffinFile {
    /// The whole file.
    pub(crate) bytes: Vec<u8>,
    /// The footer's size in bytes (magic to magic, as `file-footer-size-in-bytes` counts it).
    pub(crate) footer_size: u64,
    /// What the footer says.
    pub(crate) footer: Footer,
}

/// Write `blobs` (each compressed with zstd where it asks to be) and a footer naming
/// `created_by`.
pub(crate) fn write(blobs: Vec<NewBlob>, created_by: &str) -> Result<PuffinFile> {
    let mut bytes = MAGIC.to_vec();
    let mut footer = Footer {
        blobs: Vec::with_capacity(blobs.len()),
        properties: BTreeMap::from([("created-by".to_string(), created_by.to_string())]),
    };
    for blob in blobs {
        let stored = if blob.compress {
            zstd::bulk::compress(&blob.data, 3)
                .map_err(|e| Error::compute("compressing a Puffin blob", e))?
        } else {
            blob.data
        };
        footer.blobs.push(BlobEntry {
            kind: blob.kind,
            fields: blob.fields,
            snapshot_id: blob.snapshot_id,
            sequence_number: blob.sequence_number,
            offset: bytes.len() as u64,
            length: stored.len() as u64,
            compression_codec: blob.compress.then(|| ZSTD.to_string()),
            properties: blob.properties,
        });
        bytes.extend_from_slice(&stored);
    }
    let payload =
        serde_json::to_vec(&footer).map_err(|e| Error::Internal(format!("Puffin footer: {e}")))?;
    let payload_len = u32::try_from(payload.len())
        .map_err(|_| Error::Internal("Puffin footer over 4 GiB".to_string()))?;
    let footer_start = bytes.len();
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&payload);
    bytes.extend_from_slice(&payload_len.to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&MAGIC);
    Ok(PuffinFile {
        footer_size: (bytes.len() - footer_start) as u64,
        bytes,
        footer,
    })
}

/// The footer of the Puffin file `bytes` (`path` names it in errors): magics, lengths and
/// every blob's extent checked against the file.
#[cfg(test)]
pub(crate) fn read_footer(path: &str, bytes: &[u8]) -> Result<Footer> {
    let bad = |message: String| Error::Storage {
        path: path.to_string(),
        message: format!("not a Puffin file: {message}"),
        source: None,
        retryable: false,
    };
    // Magic, footer magic, payload length, flags, magic.
    if bytes.len() < 4 + 4 + 4 + 4 + 4 || bytes[..4] != MAGIC || bytes[bytes.len() - 4..] != MAGIC {
        return Err(bad("no PFA1 magic at both ends".to_string()));
    }
    let end = bytes.len();
    let flags = &bytes[end - 8..end - 4];
    if flags[0] & 1 != 0 {
        return Err(bad(
            "the footer is compressed (lz4), which Cryo does not read".to_string(),
        ));
    }
    let payload_len = u32::from_le_bytes([
        bytes[end - 12],
        bytes[end - 11],
        bytes[end - 10],
        bytes[end - 9],
    ]) as usize;
    let payload_end = end - 12;
    let Some(payload_start) = payload_end.checked_sub(payload_len) else {
        return Err(bad(format!("footer length {payload_len} exceeds the file")));
    };
    if payload_start < 8 || bytes[payload_start - 4..payload_start] != MAGIC {
        return Err(bad("no footer magic before the footer".to_string()));
    }
    let footer: Footer = serde_json::from_slice(&bytes[payload_start..payload_end])
        .map_err(|e| bad(format!("footer: {e}")))?;
    let blobs_end = (payload_start - 4) as u64;
    for b in &footer.blobs {
        if b.offset < 4 || b.offset.checked_add(b.length).is_none_or(|e| e > blobs_end) {
            return Err(bad(format!(
                "blob at {} of {} bytes lies outside the blobs",
                b.offset, b.length
            )));
        }
    }
    Ok(footer)
}

/// The uncompressed bytes of `blob` in the Puffin file `bytes`.
#[cfg(test)]
pub(crate) fn read_blob(path: &str, bytes: &[u8], blob: &BlobEntry) -> Result<Vec<u8>> {
    let bad = |message: String| Error::Storage {
        path: path.to_string(),
        message,
        source: None,
        retryable: false,
    };
    let start = usize::try_from(blob.offset).map_err(|_| bad("blob offset".to_string()))?;
    let len = usize::try_from(blob.length).map_err(|_| bad("blob length".to_string()))?;
    let raw = bytes
        .get(start..start.saturating_add(len))
        .ok_or_else(|| bad(format!("blob at {start} of {len} bytes is past the end")))?;
    match blob.compression_codec.as_deref() {
        None => Ok(raw.to_vec()),
        Some(ZSTD) => {
            // Not trusted: a frame may claim any size, so what it inflates to is capped.
            use std::io::Read;
            let mut out = Vec::new();
            zstd::stream::read::Decoder::new(raw)
                .and_then(|d| d.take(MAX_BLOB_BYTES + 1).read_to_end(&mut out))
                .map_err(|e| bad(format!("zstd blob: {e}")))?;
            if out.len() as u64 > MAX_BLOB_BYTES {
                return Err(bad(format!("blob inflates past {MAX_BLOB_BYTES} bytes")));
            }
            Ok(out)
        }
        Some(other) => Err(bad(format!("blob codec {other} is not supported"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(kind: &str, field: i32, data: &[u8]) -> NewBlob {
        NewBlob {
            kind: kind.to_string(),
            fields: vec![field],
            snapshot_id: 7,
            sequence_number: 3,
            properties: BTreeMap::from([("ndv".to_string(), "2".to_string())]),
            data: data.to_vec(),
            compress: field != 2,
        }
    }

    #[test]
    fn written_files_read_back() {
        let f = write(
            vec![blob("a", 1, b"hello hello"), blob("b", 2, &[0u8; 100])],
            "Cryo test",
        )
        .unwrap();
        assert_eq!(&f.bytes[..4], b"PFA1");
        assert_eq!(&f.bytes[f.bytes.len() - 4..], b"PFA1");
        let footer = read_footer("x", &f.bytes).unwrap();
        assert_eq!(footer, f.footer);
        assert_eq!(footer.properties["created-by"], "Cryo test");
        assert_eq!(
            read_blob("x", &f.bytes, &footer.blobs[0]).unwrap(),
            b"hello hello"
        );
        assert_eq!(
            read_blob("x", &f.bytes, &footer.blobs[1]).unwrap(),
            vec![0u8; 100]
        );
        // The footer size counts from its magic to the file's last byte.
        let start = f.bytes.len() - f.footer_size as usize;
        assert_eq!(&f.bytes[start..start + 4], b"PFA1");
        assert_eq!(footer.blobs[0].offset, 4);
        // A blob stored as it is (a deletion vector) has no codec and its bytes in place.
        let stored = &footer.blobs[1];
        assert_eq!(
            (stored.compression_codec.as_deref(), stored.length),
            (None, 100)
        );
        assert_eq!(footer.blobs[0].compression_codec.as_deref(), Some("zstd"));
    }

    #[test]
    fn damaged_files_are_errors() {
        let f = write(vec![blob("a", 1, b"x")], "t").unwrap();
        for cut in [0, 3, 8, f.bytes.len() - 1] {
            assert!(read_footer("x", &f.bytes[..cut]).is_err(), "{cut}");
        }
        let mut wrong_len = f.bytes.clone();
        let n = wrong_len.len();
        wrong_len[n - 12..n - 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_footer("x", &wrong_len).is_err());
        let mut junk = f.bytes.clone();
        let start = junk.len() - f.footer_size as usize + 4;
        junk[start] = b'!';
        assert!(read_footer("x", &junk).is_err());
        // A blob pointing past the blobs.
        let mut footer = f.footer.clone();
        footer.blobs[0].length = 1 << 40;
        let mut forged = MAGIC.to_vec();
        forged.extend_from_slice(&f.bytes[4..f.footer.blobs[0].length as usize + 4]);
        let payload = serde_json::to_vec(&footer).unwrap();
        forged.extend_from_slice(&MAGIC);
        forged.extend_from_slice(&payload);
        forged.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        forged.extend_from_slice(&[0; 4]);
        forged.extend_from_slice(&MAGIC);
        assert!(read_footer("x", &forged).is_err());
    }
}
