//! A minimal reader for the Avro files Cryo reads by the thousand (manifest lists, manifests):
//! it walks the records with the file's own (writer) schema and hands out the fields a caller
//! asks for, borrowed from the block, skipping the rest without allocating.
//!
//! Upstream's reader builds every value of every record (partition summaries, column metrics)
//! and spends most of its time in the allocator: on a table of 3000 fast appends, whose manifest
//! lists hold 4.5 million entries in all, it was the whole cost of an expiry. Anything this
//! reader does not know (a codec other than `null`/`deflate`, a schema it cannot follow, a
//! block that does not add up) is an error, and the caller falls back to upstream's reader.
//! Manifest lists ([`super::manifest_list`]) and manifests ([`super::manifest`]) are read
//! through it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

type R<T> = std::result::Result<T, String>;

/// A writer schema, as far as skipping and reading needs it.
#[derive(Debug, Clone)]
pub(crate) enum Schema {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum,
    Array(Arc<Schema>),
    Map(Arc<Schema>),
    Union(Arc<Vec<Schema>>),
    Record(Arc<Vec<Field>>),
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: String,
    pub id: Option<i64>,
    pub schema: Schema,
}

fn parse_schema(v: &serde_json::Value, names: &mut HashMap<String, Schema>) -> R<Schema> {
    use serde_json::Value as J;
    match v {
        J::String(s) => primitive(s)
            .or_else(|| names.get(s.as_str()).cloned())
            .ok_or_else(|| format!("unknown type `{s}`")),
        J::Array(branches) => Ok(Schema::Union(Arc::new(
            branches
                .iter()
                .map(|b| parse_schema(b, names))
                .collect::<R<_>>()?,
        ))),
        J::Object(o) => {
            let t = o.get("type").ok_or("a schema object without `type`")?;
            // Named types (records, enums, fixed) must have a name, as the spec (and
            // upstream's parser) require.
            let register = |s: Schema, names: &mut HashMap<String, Schema>| -> R<Schema> {
                let n = o
                    .get("name")
                    .and_then(J::as_str)
                    .ok_or("a named type without a name")?;
                names.insert(n.to_string(), s.clone());
                if let Some(ns) = o.get("namespace").and_then(J::as_str) {
                    names.insert(format!("{ns}.{n}"), s.clone());
                }
                Ok(s)
            };
            match t.as_str() {
                Some("record" | "error") => {
                    let fields = o
                        .get("fields")
                        .and_then(J::as_array)
                        .ok_or("a record without fields")?;
                    let mut out = Vec::with_capacity(fields.len());
                    for f in fields {
                        out.push(Field {
                            name: f
                                .get("name")
                                .and_then(J::as_str)
                                .ok_or("a field without a name")?
                                .to_string(),
                            id: f.get("field-id").and_then(J::as_i64),
                            schema: parse_schema(
                                f.get("type").ok_or("a field without a type")?,
                                names,
                            )?,
                        });
                    }
                    // Fields are found by id and name: a record that repeats either is
                    // corrupt, and which field is meant cannot be known.
                    let mut ids = std::collections::HashSet::new();
                    let mut seen = std::collections::HashSet::new();
                    for f in &out {
                        if f.id.is_some_and(|i| !ids.insert(i)) || !seen.insert(f.name.as_str()) {
                            return Err(format!(
                                "a record repeats the field `{}` or its id",
                                f.name
                            ));
                        }
                    }
                    register(Schema::Record(Arc::new(out)), names)
                }
                Some("enum") => register(Schema::Enum, names),
                Some("fixed") => {
                    let size = o
                        .get("size")
                        .and_then(J::as_u64)
                        .ok_or("a fixed without a size")?;
                    register(Schema::Fixed(size as usize), names)
                }
                Some("array") => Ok(Schema::Array(Arc::new(parse_schema(
                    o.get("items").ok_or("an array without items")?,
                    names,
                )?))),
                Some("map") => Ok(Schema::Map(Arc::new(parse_schema(
                    o.get("values").ok_or("a map without values")?,
                    names,
                )?))),
                // A primitive with attributes (logical types are read as their primitive).
                _ => parse_schema(t, names),
            }
        }
        other => Err(format!("not a schema: {other}")),
    }
}

fn primitive(s: &str) -> Option<Schema> {
    Some(match s {
        "null" => Schema::Null,
        "boolean" => Schema::Boolean,
        "int" => Schema::Int,
        "long" => Schema::Long,
        "float" => Schema::Float,
        "double" => Schema::Double,
        "bytes" => Schema::Bytes,
        "string" => Schema::String,
        _ => return None,
    })
}

/// A position in a buffer of Avro binary data.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Skip one value of schema `s`, returning its encoding.
    pub(crate) fn raw(&mut self, s: &Schema) -> R<&'a [u8]> {
        let start = self.pos;
        self.skip(s)?;
        Ok(&self.buf[start..self.pos])
    }

    fn done(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated data")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn long(&mut self) -> R<i64> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err("varint too long".into())
    }

    /// Step over a varint without decoding it (what [`Self::long`] accepts: at most 10 bytes).
    fn skip_varint(&mut self) -> R<()> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match rest.iter().take(10).position(|b| b & 0x80 == 0) {
            Some(i) => {
                self.pos += i + 1;
                Ok(())
            }
            None if rest.len() < 10 => Err("truncated varint".into()),
            None => Err("varint too long".into()),
        }
    }

    fn len(&mut self) -> R<usize> {
        usize::try_from(self.long()?).map_err(|_| "negative length".to_string())
    }

    fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn fixed<const N: usize>(&mut self) -> R<[u8; N]> {
        self.take(N)?
            .try_into()
            .map_err(|_| "a fixed of another size".to_string())
    }

    /// Read an array's (or a map's) items, block by block.
    pub(crate) fn items(&mut self, mut item: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        loop {
            let mut count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                count = count
                    .checked_neg()
                    .ok_or("a block with an impossible count")?;
                self.len()?; // the block's size in bytes
            }
            for _ in 0..count {
                item(self)?;
            }
        }
    }

    pub(crate) fn skip(&mut self, s: &Schema) -> R<()> {
        match s {
            Schema::Null => {}
            Schema::Boolean => {
                self.take(1)?;
            }
            Schema::Int | Schema::Long | Schema::Enum => self.skip_varint()?,
            Schema::Float => {
                self.take(4)?;
            }
            Schema::Double => {
                self.take(8)?;
            }
            Schema::Bytes | Schema::String => {
                self.bytes()?;
            }
            Schema::Fixed(n) => {
                self.take(*n)?;
            }
            Schema::Array(item) => self.skip_blocks(|c| c.skip(item))?,
            Schema::Map(value) => self.skip_blocks(|c| {
                c.bytes()?;
                c.skip(value)
            })?,
            Schema::Union(branches) => {
                let b = self.branch(branches)?;
                self.skip(b)?;
            }
            Schema::Record(fields) => {
                for f in fields.iter() {
                    self.skip(&f.schema)?;
                }
            }
        }
        Ok(())
    }

    fn skip_blocks(&mut self, mut item: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        loop {
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                // A negative count is followed by the block's size in bytes: jump over it.
                let size = self.len()?;
                self.take(size)?;
            } else {
                for _ in 0..count {
                    item(self)?;
                }
            }
        }
    }

    pub(crate) fn branch<'s>(&mut self, branches: &'s [Schema]) -> R<&'s Schema> {
        let i = usize::try_from(self.long()?).map_err(|_| "negative union branch")?;
        branches
            .get(i)
            .ok_or_else(|| "union branch out of range".into())
    }

    /// A primitive value or null (through unions).
    pub(crate) fn leaf(&mut self, s: &Schema) -> R<Leaf<'a>> {
        Ok(match s {
            Schema::Int | Schema::Long => Leaf::Long(self.long()?),
            Schema::String | Schema::Bytes => Leaf::Bytes(self.bytes()?),
            Schema::Null => Leaf::Null,
            Schema::Boolean => match self.fixed::<1>()? {
                [0] => Leaf::Boolean(false),
                [1] => Leaf::Boolean(true),
                _ => return Err("a boolean that is neither 0 nor 1".into()),
            },
            Schema::Float => Leaf::Float(f32::from_le_bytes(self.fixed()?)),
            Schema::Double => Leaf::Double(f64::from_le_bytes(self.fixed()?)),
            Schema::Union(branches) => {
                let b = self.branch(branches)?;
                return self.leaf(b);
            }
            other => return Err(format!("expected a primitive, found {other:?}")),
        })
    }

    /// Walk one record of `fields`, calling `visit` for each field with the cursor on it.
    /// `visit` returns whether it consumed the field; unconsumed fields are skipped.
    pub(crate) fn record(
        &mut self,
        fields: &[Field],
        mut visit: impl FnMut(&Field, &mut Self) -> R<bool>,
    ) -> R<()> {
        for f in fields {
            if !visit(f, self)? {
                self.skip(&f.schema)?;
            }
        }
        Ok(())
    }
}

/// A field value reachability reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Leaf<'a> {
    Null,
    Long(i64),
    Bytes(&'a [u8]),
    Boolean(bool),
    Float(f32),
    Double(f64),
}

impl<'a> Leaf<'a> {
    pub(crate) fn long(self) -> Option<i64> {
        match self {
            Leaf::Long(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn str(self) -> R<&'a str> {
        match self {
            Leaf::Bytes(b) => std::str::from_utf8(b).map_err(|_| "a path that is not UTF-8".into()),
            _ => Err("expected a string".into()),
        }
    }
}

/// An Avro object container file: its schema and its records' blocks, decompressed.
pub(crate) struct Container<'a> {
    pub schema: Schema,
    pub blocks: Vec<(usize, Cow<'a, [u8]>)>,
    /// The header's metadata (`avro.schema`, `avro.codec`, and the writer's own keys).
    pub meta: HashMap<&'a [u8], &'a [u8]>,
}

impl Container<'_> {
    /// Visit every record (the top-level schema must be a record); checks that each block
    /// holds exactly its count of records.
    pub(crate) fn for_each<'c>(
        &'c self,
        mut visit: impl FnMut(&mut Cursor<'c>, &'c [Field]) -> R<()>,
    ) -> R<()> {
        let Schema::Record(fields) = &self.schema else {
            return Err("the file's schema is not a record".into());
        };
        for (count, data) in &self.blocks {
            let mut c = Cursor::new(data);
            for _ in 0..*count {
                visit(&mut c, fields)?;
            }
            if !c.done() {
                return Err("a block holds more than its records".into());
            }
        }
        Ok(())
    }
}

pub(crate) fn open(bytes: &[u8]) -> R<Container<'_>> {
    let mut c = Cursor::new(bytes);
    if c.take(4)? != b"Obj\x01" {
        return Err("not an Avro object container file".into());
    }
    let mut meta: HashMap<&[u8], &[u8]> = HashMap::new();
    loop {
        let mut count = c.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = count
                .checked_neg()
                .ok_or("a header map block with an impossible count")?;
            c.long()?;
        }
        for _ in 0..count {
            let k = c.bytes()?;
            let v = c.bytes()?;
            meta.insert(k, v);
        }
    }
    let sync = c.take(16)?;
    let schema_json: serde_json::Value =
        serde_json::from_slice(meta.get(&b"avro.schema"[..]).ok_or("no avro.schema")?)
            .map_err(|e| format!("avro.schema is not JSON: {e}"))?;
    let schema = parse_schema(&schema_json, &mut HashMap::new())?;
    let codec = meta.get(&b"avro.codec"[..]).copied().unwrap_or(b"null");
    let mut blocks = Vec::new();
    while !c.done() {
        let count = c.len()?;
        let data = c.bytes()?;
        if c.take(16)? != sync {
            return Err("sync marker mismatch".into());
        }
        let data = match codec {
            b"null" => Cow::Borrowed(data),
            b"deflate" => Cow::Owned(inflate(data)?),
            other => {
                return Err(format!(
                    "codec `{}` (read by upstream instead)",
                    String::from_utf8_lossy(other)
                ));
            }
        };
        blocks.push((count, data));
    }
    Ok(Container {
        schema,
        blocks,
        meta,
    })
}

/// A raw deflate stream, inflated into a buffer that grows as it fills (and is never zeroed
/// first). Bytes after the end of the stream are ignored, as a reader of the stream would.
fn inflate(data: &[u8]) -> R<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).max(1024));
    let mut d = flate2::Decompress::new(false);
    loop {
        let (consumed, produced) = (d.total_in() as usize, out.len());
        let input = data.get(consumed..).unwrap_or_default();
        let status = d
            .decompress_vec(input, &mut out, flate2::FlushDecompress::Finish)
            .map_err(|e| format!("deflate: {e}"))?;
        if status == flate2::Status::StreamEnd {
            return Ok(out);
        }
        if out.len() == out.capacity() {
            out.reserve(out.capacity());
        } else if d.total_in() as usize == consumed && out.len() == produced {
            return Err("deflate: the stream ends early".into());
        }
    }
}

/// Whether `f` is the field with this id and one of these names. A field that has the id
/// but another name, or the name but another id, is an error: upstream's reader goes by
/// name, Java's by id, and the caller falls back to upstream's rather than guess.
pub(crate) fn is(f: &Field, id: i64, names: &[&str]) -> R<bool> {
    let by_name = names.contains(&f.name.as_str());
    match f.id {
        Some(i) if (i == id) != by_name => Err(format!(
            "field `{}` has id {i}: its name and id disagree",
            f.name
        )),
        _ => Ok(by_name),
    }
}
