//! The pages of a Parquet file held whole in memory, handed to the Arrow decoder with one zstd
//! decompression context per thread.
//!
//! The Parquet crate (58) creates a zstd compressor and a decompressor for every column chunk
//! it opens, and copies every page once more after decompressing it. A compaction of small
//! files opens tens of thousands of column chunks (the benchmark: 3,328 files × 8 columns, and
//! as many delete files × 2), and paging them here took 8–13% off the benchmark's CPU in
//! alternating runs. Each page is decompressed straight into a buffer of its declared size,
//! with the thread's context.
//!
//! Only zstd and uncompressed chunks are paged here ([`supported`]); files with other codecs,
//! or whose chunk offsets do not fit the file, take the Parquet crate's own reader. Page headers
//! are read with the crate's Thrift definitions (`parquet::format`, deprecated in 58 and gone in
//! 59, where the decompression copy is also gone; revisit when `iceberg` moves on).
#![allow(deprecated)]

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::arrow_reader::RowGroups;
use parquet::basic::{Compression, Encoding};
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::format::{PageHeader, PageType};
use parquet::thrift::TSerializable;
use thrift::protocol::TCompactInputProtocol;

thread_local! {
    /// The thread's zstd decompression context (reused across pages, chunks and files).
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Whether every column chunk of `meta` can be paged here: zstd or uncompressed, and stored
/// within the file's `len` bytes.
pub(crate) fn supported(meta: &ParquetMetaData, len: usize) -> bool {
    meta.row_groups().iter().all(|rg| {
        rg.columns().iter().all(|c| {
            matches!(
                c.compression(),
                Compression::ZSTD(_) | Compression::UNCOMPRESSED
            ) && chunk_range(c, len).is_some()
        })
    })
}

/// The byte range of a column chunk (from its dictionary page, when it has one), if it lies
/// within the file.
fn chunk_range(
    c: &parquet::file::metadata::ColumnChunkMetaData,
    len: usize,
) -> Option<std::ops::Range<usize>> {
    let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
    let start = usize::try_from(start).ok()?;
    let size = usize::try_from(c.compressed_size()).ok()?;
    let end = start.checked_add(size)?;
    (end <= len).then_some(start..end)
}

/// A whole Parquet file in memory, as the row groups the Arrow decoder reads.
pub(crate) struct MemRowGroups {
    bytes: Bytes,
    meta: Arc<ParquetMetaData>,
}

impl MemRowGroups {
    /// `meta` must be the footer of `bytes` and [`supported`].
    pub(crate) fn new(bytes: Bytes, meta: Arc<ParquetMetaData>) -> Self {
        Self { bytes, meta }
    }
}

impl RowGroups for MemRowGroups {
    fn num_rows(&self) -> usize {
        self.meta
            .row_groups()
            .iter()
            .map(|rg| usize::try_from(rg.num_rows()).unwrap_or(0))
            .sum()
    }

    fn column_chunks(&self, i: usize) -> Result<Box<dyn PageIterator>> {
        let chunks =
            self.meta
                .row_groups()
                .iter()
                .map(|rg| {
                    let c = rg.columns().get(i).ok_or_else(|| {
                        ParquetError::General(format!("row group has no column {i}"))
                    })?;
                    let range = chunk_range(c, self.bytes.len()).ok_or_else(|| {
                        ParquetError::General(format!("column chunk {i} lies outside the file"))
                    })?;
                    let zstd = matches!(c.compression(), Compression::ZSTD(_));
                    Ok(Box::new(MemPages {
                        rest: self.bytes.slice(range),
                        zstd,
                        dictionary: false,
                    }) as Box<dyn PageReader>)
                })
                .collect::<Vec<_>>();
        Ok(Box::new(Chunks(chunks.into_iter())))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.meta.row_groups().iter())
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.meta
    }
}

/// One column's chunks, row group after row group.
struct Chunks(std::vec::IntoIter<Result<Box<dyn PageReader>>>);

impl Iterator for Chunks {
    type Item = Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl PageIterator for Chunks {}

/// The pages of one column chunk.
struct MemPages {
    /// The chunk's bytes not read yet.
    rest: Bytes,
    zstd: bool,
    /// Whether the chunk's dictionary page has been read (a dictionary-encoded data page
    /// without one would make the Parquet crate's decoder panic).
    dictionary: bool,
}

impl MemPages {
    /// The next page's header and its length, without consuming it; `None` at the chunk's end.
    fn header(&self) -> Result<Option<(PageHeader, usize)>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let mut input: &[u8] = &self.rest;
        let header = {
            let mut protocol = TCompactInputProtocol::new(&mut input);
            PageHeader::read_from_in_protocol(&mut protocol)
                .map_err(|e| ParquetError::General(format!("page header: {e}")))?
        };
        let header_len = self.rest.len() - input.len();
        let size = usize::try_from(header.compressed_page_size)
            .ok()
            .filter(|s| *s <= input.len())
            .ok_or_else(|| {
                ParquetError::General(format!(
                    "page of {} bytes runs past its column chunk",
                    header.compressed_page_size
                ))
            })?;
        if header.uncompressed_page_size < 0 {
            return Err(ParquetError::General("negative page size".into()));
        }
        Ok(Some((header, header_len + size)))
    }

    /// A data page's encoding; dictionary encodings only after the dictionary page.
    fn data_encoding(&self, e: parquet::format::Encoding) -> Result<Encoding> {
        let e = encoding(e)?;
        if matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY) && !self.dictionary {
            return Err(ParquetError::General(
                "dictionary-encoded page before any dictionary page".into(),
            ));
        }
        Ok(e)
    }

    /// The page's values, decompressed (after the first `keep` bytes, which are stored
    /// uncompressed: a v2 page's levels).
    fn values(
        &self,
        data: Bytes,
        uncompressed: usize,
        keep: usize,
        compressed: bool,
    ) -> Result<Bytes> {
        if !self.zstd || !compressed {
            return Ok(data);
        }
        if keep > data.len() || keep > uncompressed {
            return Err(ParquetError::General("invalid page header".into()));
        }
        let src = &data[keep..];
        let (out, written) = if keep == 0 {
            // Straight into the buffer's spare capacity, nothing copied or zeroed.
            let mut out = Vec::with_capacity(uncompressed);
            let written = with_zstd(|ctx| ctx.decompress_to_buffer(src, &mut out));
            (out, written)
        } else {
            // A v2 page: its levels first, as stored, then the values decompressed after them.
            let mut out = vec![0; uncompressed];
            out[..keep].copy_from_slice(&data[..keep]);
            let written = if uncompressed > keep {
                with_zstd(|ctx| ctx.decompress_to_buffer(src, &mut out[keep..]))
            } else {
                Ok(0)
            };
            (out, written.map(|w| w + keep))
        };
        let written = written.map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        if written != uncompressed || out.len() != uncompressed {
            return Err(ParquetError::General(format!(
                "page decompressed to {written} bytes, its header says {uncompressed}"
            )));
        }
        Ok(Bytes::from(out))
    }
}

/// `f` with the thread's zstd decompression context.
fn with_zstd<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    ZSTD.with(|slot| {
        let mut slot = slot.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        f(ctx)
    })
}

fn count(v: i32, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| ParquetError::General(format!("negative {what} in page header")))
}

fn encoding(e: parquet::format::Encoding) -> Result<Encoding> {
    Ok(match e.0 {
        0 => Encoding::PLAIN,
        2 => Encoding::PLAIN_DICTIONARY,
        3 => Encoding::RLE,
        4 => Encoding::BIT_PACKED,
        5 => Encoding::DELTA_BINARY_PACKED,
        6 => Encoding::DELTA_LENGTH_BYTE_ARRAY,
        7 => Encoding::DELTA_BYTE_ARRAY,
        8 => Encoding::RLE_DICTIONARY,
        9 => Encoding::BYTE_STREAM_SPLIT,
        other => {
            return Err(ParquetError::General(format!(
                "unknown page encoding {other}"
            )));
        }
    })
}

impl Iterator for MemPages {
    type Item = Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl PageReader for MemPages {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        loop {
            let Some((header, len)) = self.header()? else {
                return Ok(None);
            };
            let page = self.rest.split_to(len);
            let data = page.slice(len - header.compressed_page_size as usize..);
            let uncompressed = header.uncompressed_page_size as usize;
            let missing =
                |what: &str| ParquetError::General(format!("page without its {what} header"));
            return Ok(Some(match header.type_ {
                PageType::DICTIONARY_PAGE => {
                    let h = header
                        .dictionary_page_header
                        .ok_or_else(|| missing("dictionary page"))?;
                    self.dictionary = true;
                    Page::DictionaryPage {
                        buf: self.values(data, uncompressed, 0, true)?,
                        num_values: count(h.num_values, "value count")?,
                        encoding: encoding(h.encoding)?,
                        is_sorted: h.is_sorted.unwrap_or(false),
                    }
                }
                PageType::DATA_PAGE => {
                    let h = header
                        .data_page_header
                        .ok_or_else(|| missing("data page"))?;
                    Page::DataPage {
                        buf: self.values(data, uncompressed, 0, true)?,
                        num_values: count(h.num_values, "value count")?,
                        encoding: self.data_encoding(h.encoding)?,
                        def_level_encoding: encoding(h.definition_level_encoding)?,
                        rep_level_encoding: encoding(h.repetition_level_encoding)?,
                        statistics: None,
                    }
                }
                PageType::DATA_PAGE_V2 => {
                    let h = header
                        .data_page_header_v2
                        .ok_or_else(|| missing("data page v2"))?;
                    let def = count(h.definition_levels_byte_length, "level length")?;
                    let rep = count(h.repetition_levels_byte_length, "level length")?;
                    let keep = def as usize + rep as usize;
                    let compressed = h.is_compressed.unwrap_or(true);
                    Page::DataPageV2 {
                        buf: self.values(data, uncompressed, keep, compressed)?,
                        num_values: count(h.num_values, "value count")?,
                        encoding: self.data_encoding(h.encoding)?,
                        num_nulls: count(h.num_nulls, "null count")?,
                        num_rows: count(h.num_rows, "row count")?,
                        def_levels_byte_len: def,
                        rep_levels_byte_len: rep,
                        is_compressed: compressed,
                        statistics: None,
                    }
                }
                // Index pages (never written in practice) and unknown kinds carry no values.
                _ => continue,
            }));
        }
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        loop {
            let Some((header, len)) = self.header()? else {
                return Ok(None);
            };
            return Ok(Some(match header.type_ {
                PageType::DICTIONARY_PAGE => PageMetadata {
                    num_rows: None,
                    num_levels: None,
                    is_dict: true,
                },
                PageType::DATA_PAGE => PageMetadata {
                    num_rows: None,
                    num_levels: header
                        .data_page_header
                        .map(|h| usize::try_from(h.num_values).unwrap_or(0)),
                    is_dict: false,
                },
                PageType::DATA_PAGE_V2 => {
                    let h = header.data_page_header_v2;
                    PageMetadata {
                        num_rows: h.as_ref().map(|h| usize::try_from(h.num_rows).unwrap_or(0)),
                        num_levels: h.map(|h| usize::try_from(h.num_values).unwrap_or(0)),
                        is_dict: false,
                    }
                }
                _ => {
                    let _ = self.rest.split_to(len);
                    continue;
                }
            }));
        }
    }

    fn skip_next_page(&mut self) -> Result<()> {
        if let Some((_, len)) = self.header()? {
            let _ = self.rest.split_to(len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::builder::{Int32Builder, ListBuilder};
    use arrow_array::{
        ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, StructArray,
    };
    use arrow_schema::{DataType, Field};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::{
        ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    };
    use parquet::basic::ZstdLevel;
    use parquet::file::properties::{WriterProperties, WriterVersion};

    use super::*;

    /// Rows with nulls, repeated and nested values, dictionary-friendly and unique strings.
    fn batch(rows: usize) -> RecordBatch {
        let ids: Int64Array = (0..rows)
            .map(|i| (i % 7 != 0).then_some(i as i64 * 31))
            .collect();
        let cats = StringArray::from_iter_values((0..rows).map(|i| format!("c{}", i % 5)));
        let uniq: StringArray = (0..rows)
            .map(|i| (i % 11 != 3).then(|| format!("payload-{i}-{}", "x".repeat(i % 40))))
            .collect();
        let flags: BooleanArray = (0..rows)
            .map(|i| (i % 3 != 0).then_some(i % 2 == 0))
            .collect();
        let mut list = ListBuilder::new(Int32Builder::new());
        for i in 0..rows {
            if i % 13 == 0 {
                list.append_null();
            } else {
                for j in 0..(i % 4) {
                    list.values()
                        .append_option((j != 2).then_some((i * j) as i32));
                }
                list.append(true);
            }
        }
        let amounts: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (0..rows).map(|i| i as f64 / 3.0),
        ));
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("amount", DataType::Float64, false)),
            amounts,
        )]);
        RecordBatch::try_from_iter([
            ("id", Arc::new(ids) as ArrayRef),
            ("cat", Arc::new(cats)),
            ("uniq", Arc::new(uniq)),
            ("flag", Arc::new(flags)),
            ("list", Arc::new(list.finish())),
            ("inner", Arc::new(inner)),
        ])
        .expect("batch")
    }

    fn write(props: WriterProperties, rows: usize) -> Bytes {
        let b = batch(rows);
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, b.schema(), Some(props)).expect("writer");
        w.write(&b).expect("write");
        w.close().expect("close");
        Bytes::from(out)
    }

    fn read(bytes: &Bytes, ours: bool) -> Result<Vec<RecordBatch>> {
        let meta = ArrowReaderMetadata::load(bytes, ArrowReaderOptions::default())?;
        let mask = ProjectionMask::all();
        if ours {
            assert!(supported(meta.metadata(), bytes.len()));
            crate::compact::read::decode(bytes.clone(), meta, mask)?
                .map(|b| b.map_err(|e| ParquetError::General(e.to_string())))
                .collect()
        } else {
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta)
                .with_batch_size(crate::compact::read::READ_BATCH_ROWS)
                .build()?
                .map(|b| b.map_err(|e| ParquetError::General(e.to_string())))
                .collect()
        }
    }

    fn variants() -> Vec<(&'static str, WriterProperties)> {
        let zstd = Compression::ZSTD(ZstdLevel::try_new(3).expect("level"));
        let small_pages = |v: WriterVersion, c: Compression| {
            WriterProperties::builder()
                .set_writer_version(v)
                .set_compression(c)
                .set_data_page_size_limit(512)
                .set_data_page_row_count_limit(100)
                .set_write_batch_size(64)
                .set_max_row_group_row_count(Some(1500))
                .build()
        };
        vec![
            ("zstd v1", small_pages(WriterVersion::PARQUET_1_0, zstd)),
            ("zstd v2", small_pages(WriterVersion::PARQUET_2_0, zstd)),
            (
                "plain v1",
                small_pages(WriterVersion::PARQUET_1_0, Compression::UNCOMPRESSED),
            ),
            (
                "plain v2",
                small_pages(WriterVersion::PARQUET_2_0, Compression::UNCOMPRESSED),
            ),
            (
                "zstd, no dictionary",
                WriterProperties::builder()
                    .set_compression(zstd)
                    .set_dictionary_enabled(false)
                    .build(),
            ),
        ]
    }

    #[test]
    fn pages_decode_as_the_parquet_crate_does() {
        for (name, props) in variants() {
            let bytes = write(props, 4000);
            let ours = read(&bytes, true).expect(name);
            let theirs = read(&bytes, false).expect(name);
            assert_eq!(ours, theirs, "{name}");
            let rows: usize = ours.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, 4000, "{name}");
        }
    }

    #[test]
    fn other_codecs_are_left_to_the_parquet_crate() {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let bytes = write(props, 100);
        let meta =
            ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::default()).expect("footer");
        assert!(!supported(meta.metadata(), bytes.len()));
        // A file cut short: its chunks no longer fit.
        let (name, props) = variants().remove(0);
        let bytes = write(props, 100);
        let meta = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::default()).expect(name);
        assert!(supported(meta.metadata(), bytes.len()));
        assert!(!supported(meta.metadata(), 100));
    }

    /// A corrupted byte of the first column chunk never makes this reader panic where the
    /// Parquet crate's does not (its decoder panics on a dictionary-encoded page without a
    /// dictionary, which a corrupted page type produces: refused here); where both readers
    /// return rows, the same rows.
    #[test]
    fn corrupt_pages_are_errors_not_panics() {
        for (name, props) in variants().into_iter().take(2) {
            let bytes = write(props, 300);
            let meta =
                ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::default()).expect(name);
            let end = meta.metadata().row_groups()[0].columns()[0].compressed_size() as usize + 4;
            for at in 4..end.min(bytes.len()) {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut bad = bytes.to_vec();
                    bad[at] ^= flip;
                    let bad = Bytes::from(bad);
                    let run = |ours| {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&bad, ours)))
                    };
                    // Corrupt values can make the crate's own decoders panic: not this layer's
                    // to fix, and the same for both readers.
                    let Ok(theirs) = run(false) else { continue };
                    let ours = run(true).unwrap_or_else(|_| {
                        panic!("{name}: byte {at} ^ {flip:#x}: a panic where the Parquet crate has none")
                    });
                    if let (Ok(a), Ok(b)) = (ours, theirs) {
                        assert_eq!(a, b, "{name}: byte {at} ^ {flip:#x}");
                    }
                }
            }
        }
    }
}
