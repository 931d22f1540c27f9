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

    #[inline]
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

    #[inline]
    fn long(&mut self) -> R<i64> {
        // Most varints (counts, lengths, branches, ids) are one byte.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            let v = u64::from(b);
            return Ok((v >> 1) as i64 ^ -((v & 1) as i64));
        }
        self.long_slow()
    }

    fn long_slow(&mut self) -> R<i64> {
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
    #[inline]
    fn skip_varint(&mut self) -> R<()> {
        if self.buf.get(self.pos).is_some_and(|b| b & 0x80 == 0) {
            self.pos += 1;
            return Ok(());
        }
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

    #[inline]
    fn len(&mut self) -> R<usize> {
        usize::try_from(self.long()?).map_err(|_| "negative length".to_string())
    }

    #[inline]
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

/// A writer schema compiled for stepping over values: records flattened into their fields,
/// runs of varints and of fixed-width bytes merged, and arrays whose items are varints only
/// (Iceberg's `map<int, long>` column metrics, written as arrays of key-value records) stepped
/// over whole. Hot readers plan their fields once per file and skip through this, not through
/// [`Cursor::skip`], which follows the schema tree value by value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Skip {
    /// This many varints (`int`, `long`, `enum`).
    Varints(usize),
    /// This many bytes (`boolean`, `float`, `double`, `fixed`).
    Fixed(usize),
    /// A length, then that many bytes (`bytes`, `string`).
    Bytes,
    Seq(Box<[Skip]>),
    Union(Box<[Skip]>),
    /// An array whose items are this many varints each.
    VarintArray(usize),
    /// An array whose items are a varint, then a length and that many bytes (Iceberg's
    /// `map<int, binary>` bounds).
    KeyBytesArray,
    Array(Box<Skip>),
    /// A map: each item a string key, then a value.
    Map(Box<Skip>),
}

/// How many steps a compiled schema may have: a header whose named types nest each other
/// (`a` of two `b`s, `b` of two `c`s, ...) would otherwise compile to exponentially many.
const SKIP_BUDGET: usize = 1 << 16;

impl Skip {
    /// Nothing to step over (a `null`).
    pub(crate) const NOTHING: Skip = Skip::Fixed(0);

    /// `s`, compiled; an error when it is too large to compile.
    pub(crate) fn of(s: &Schema) -> R<Skip> {
        let mut budget = SKIP_BUDGET;
        Self::compile(s, &mut budget)
    }

    fn compile(s: &Schema, budget: &mut usize) -> R<Skip> {
        let mut seq = Vec::new();
        push(s, &mut seq, budget)?;
        Ok(Self::from_seq(seq))
    }

    fn from_seq(mut seq: Vec<Skip>) -> Skip {
        match seq.len() {
            0 => Skip::NOTHING,
            1 => seq.pop().unwrap_or(Skip::NOTHING),
            _ => Skip::Seq(seq.into()),
        }
    }

    /// `self` then `next`, runs merged.
    pub(crate) fn then(self, next: Skip) -> Skip {
        let mut seq = match self {
            Skip::Seq(s) => s.into_vec(),
            Skip::Fixed(0) => Vec::new(),
            other => vec![other],
        };
        match next {
            Skip::Seq(s) => {
                for step in s.into_vec() {
                    append(&mut seq, step);
                }
            }
            other => append(&mut seq, other),
        }
        Self::from_seq(seq)
    }
}

/// Append `step` to `seq`, merging it into a run of its kind.
fn append(seq: &mut Vec<Skip>, step: Skip) {
    match (seq.last_mut(), step) {
        (_, Skip::Fixed(0)) => {}
        (Some(Skip::Varints(n)), Skip::Varints(m)) | (Some(Skip::Fixed(n)), Skip::Fixed(m)) => {
            *n += m;
        }
        (_, step) => seq.push(step),
    }
}

fn push(s: &Schema, seq: &mut Vec<Skip>, budget: &mut usize) -> R<()> {
    *budget = budget
        .checked_sub(1)
        .ok_or("a schema too large to compile")?;
    let step = match s {
        Schema::Null => return Ok(()),
        Schema::Boolean => Skip::Fixed(1),
        Schema::Int | Schema::Long | Schema::Enum => Skip::Varints(1),
        Schema::Float => Skip::Fixed(4),
        Schema::Double => Skip::Fixed(8),
        Schema::Bytes | Schema::String => Skip::Bytes,
        Schema::Fixed(n) => Skip::Fixed(*n),
        Schema::Record(fields) => {
            for f in fields.iter() {
                push(&f.schema, seq, budget)?;
            }
            return Ok(());
        }
        Schema::Union(branches) => Skip::Union(
            branches
                .iter()
                .map(|b| Skip::compile(b, budget))
                .collect::<R<_>>()?,
        ),
        Schema::Array(item) => match Skip::compile(item, budget)? {
            Skip::Varints(k) => Skip::VarintArray(k),
            // Items of nothing: a block's count says nothing about where it ends.
            Skip::NOTHING => Skip::VarintArray(0),
            Skip::Seq(items) if *items == [Skip::Varints(1), Skip::Bytes] => Skip::KeyBytesArray,
            other => Skip::Array(Box::new(other)),
        },
        Schema::Map(value) => Skip::Map(Box::new(Skip::compile(value, budget)?)),
    };
    append(seq, step);
    Ok(())
}

impl Cursor<'_> {
    /// One step of a record's plan (see [`plan`]): steps over what it skips, and gives the
    /// role and field index of what it reads, the cursor left on that field.
    #[inline]
    pub(crate) fn step<'p, T>(&mut self, step: &'p Step<T>) -> R<Option<(&'p T, usize)>> {
        match step {
            Step::Pass(skip) => {
                self.pass(skip)?;
                Ok(None)
            }
            Step::Take(role, i) => Ok(Some((role, *i))),
        }
    }

    /// Step over one value compiled into `s`.
    pub(crate) fn pass(&mut self, s: &Skip) -> R<()> {
        match s {
            Skip::Seq(steps) => {
                for step in steps {
                    self.pass_one(step)?;
                }
                Ok(())
            }
            other => self.pass_one(other),
        }
    }

    /// One step of a compiled skip: the leaves inline (most of a record's steps), the rest
    /// through [`Self::pass`].
    #[inline]
    fn pass_one(&mut self, s: &Skip) -> R<()> {
        match s {
            Skip::Varints(1) => self.skip_varint()?,
            Skip::Varints(n) => self.skip_varints(*n)?,
            Skip::Fixed(n) => {
                self.take(*n)?;
            }
            Skip::Bytes => {
                self.bytes()?;
            }
            Skip::Seq(steps) => {
                for step in steps {
                    self.pass(step)?;
                }
            }
            Skip::Union(branches) => {
                let i = usize::try_from(self.long()?).map_err(|_| "negative union branch")?;
                self.pass(branches.get(i).ok_or("union branch out of range")?)?;
            }
            Skip::VarintArray(k) => loop {
                let count = self.long()?;
                if count == 0 {
                    break;
                }
                if count < 0 {
                    let size = self.len()?;
                    self.take(size)?;
                } else {
                    let n = usize::try_from(count)
                        .ok()
                        .and_then(|c| c.checked_mul(*k))
                        .ok_or("a block with an impossible count")?;
                    self.skip_varints(n)?;
                }
            },
            Skip::KeyBytesArray => self.skip_blocks(|c| {
                c.skip_varint()?;
                c.bytes().map(drop)
            })?,
            Skip::Array(item) => self.skip_blocks(|c| c.pass(item))?,
            Skip::Map(value) => self.skip_blocks(|c| {
                c.bytes()?;
                c.pass(value)
            })?,
        }
        Ok(())
    }

    /// Step over `n` varints, eight bytes at a time: a varint ends at each byte whose high bit
    /// is clear, so the varints a word ends are the clear high bits in it. What [`Self::long`]
    /// refuses (a varint of more than 10 bytes, or cut short) is refused here too.
    fn skip_varints(&mut self, mut n: usize) -> R<()> {
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let buf = self.buf;
        let mut i = self.pos;
        // Continuation bytes since the last varint ended.
        let mut run = 0usize;
        while n >= 8 {
            let Some(word) = buf.get(i..i + 8) else { break };
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            let ends = !u64::from_le_bytes(w) & HIGH;
            let count = ends.count_ones() as usize;
            if count == 0 {
                run += 8;
                if run >= 10 {
                    return Err("varint too long".into());
                }
            } else {
                // The bytes before the first end continue the running varint; the bytes after
                // the last end begin the next.
                if run + (ends.trailing_zeros() as usize) / 8 >= 10 {
                    return Err("varint too long".into());
                }
                run = (ends.leading_zeros() as usize) / 8;
            }
            // At most 7 of the 8 may end a varint where fewer than 8 are wanted; 8 at most.
            n -= count;
            i += 8;
        }
        while n > 0 {
            let b = *buf.get(i).ok_or("truncated varint")?;
            i += 1;
            if b & 0x80 == 0 {
                n -= 1;
                run = 0;
            } else {
                run += 1;
                if run >= 10 {
                    return Err("varint too long".into());
                }
            }
        }
        self.pos = i;
        Ok(())
    }
}

/// One step of a record's plan (see [`plan`]).
pub(crate) enum Step<T> {
    /// Read the field at this index of the record, in this role.
    Take(T, usize),
    /// Step over fields the caller does not read.
    Pass(Skip),
}

/// Plan the reading of a record of `fields` once per file: `role` names the fields the caller
/// reads (or refuses the schema), and each run of the others is compiled into one [`Skip`].
pub(crate) fn plan<T>(
    fields: &[Field],
    mut role: impl FnMut(&Field) -> R<Option<T>>,
) -> R<Vec<Step<T>>> {
    let mut steps = Vec::new();
    let mut pass: Option<Skip> = None;
    for (i, f) in fields.iter().enumerate() {
        if let Some(t) = role(f)? {
            if let Some(p) = pass.take() {
                steps.push(Step::Pass(p));
            }
            steps.push(Step::Take(t, i));
        } else {
            let s = Skip::of(&f.schema)?;
            pass = Some(match pass.take() {
                Some(p) => p.then(s),
                None => s,
            });
        }
    }
    if let Some(p) = pass {
        steps.push(Step::Pass(p));
    }
    Ok(steps)
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

/// A raw deflate stream, inflated whole (libdeflate: a block is inflated in one call, into a
/// buffer kept per thread and grown until the block fits, then copied out at its size). Bytes
/// after the end of the stream are ignored, as a reader of the stream would.
fn inflate(data: &[u8]) -> R<Vec<u8>> {
    /// Deflate cannot expand more than this (258 bytes of output per code of 2 bits).
    const MAX_RATIO: usize = 1032;
    thread_local! {
        static SCRATCH: std::cell::RefCell<(libdeflater::Decompressor, Vec<u8>)> =
            std::cell::RefCell::new((libdeflater::Decompressor::new(), Vec::new()));
    }
    SCRATCH.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (d, buf) = &mut *guard;
        let limit = data.len().saturating_mul(MAX_RATIO).max(1024);
        // Manifest blocks inflate to 3-4x; the buffer is only zeroed when it grows.
        let mut want = data.len().saturating_mul(6).max(64 << 10).min(limit);
        let out = loop {
            if buf.len() < want {
                buf.resize(want, 0);
            }
            match d.deflate_decompress(data, buf) {
                Ok(n) => break Ok(buf[..n].to_vec()),
                Err(libdeflater::DecompressionError::InsufficientSpace) if buf.len() < limit => {
                    want = buf.len().saturating_mul(2).min(limit);
                }
                Err(libdeflater::DecompressionError::InsufficientSpace) => {
                    break Err("deflate: a block that inflates beyond what deflate can".into());
                }
                Err(libdeflater::DecompressionError::BadData) => {
                    break Err("deflate: corrupt data".into());
                }
            }
        };
        // A thread does not keep an odd file's huge block.
        if buf.len() > 16 << 20 {
            *buf = Vec::new();
        }
        out
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn schema() -> impl Strategy<Value = Schema> {
        let leaf = prop_oneof![
            Just(Schema::Null),
            Just(Schema::Boolean),
            Just(Schema::Int),
            Just(Schema::Long),
            Just(Schema::Float),
            Just(Schema::Double),
            Just(Schema::Bytes),
            Just(Schema::String),
            (0usize..5).prop_map(Schema::Fixed),
            Just(Schema::Enum),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|s| Schema::Array(Arc::new(s))),
                inner.clone().prop_map(|s| Schema::Map(Arc::new(s))),
                prop::collection::vec(inner.clone(), 1..4).prop_map(|b| Schema::Union(Arc::new(b))),
                prop::collection::vec(inner, 0..5).prop_map(|fs| {
                    Schema::Record(Arc::new(
                        fs.into_iter()
                            .enumerate()
                            .map(|(i, schema)| Field {
                                name: format!("f{i}"),
                                id: None,
                                schema,
                            })
                            .collect(),
                    ))
                }),
            ]
        })
    }

    /// Bytes that often make sense as Avro (small counts, lengths and branches), sometimes not.
    fn data() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop_oneof![4 => 0u8..6, 1 => any::<u8>()], 0..160)
    }

    proptest! {
        /// A compiled skip stops where the schema walk stops, and fails where it fails.
        #[test]
        fn compiled_skip_agrees_with_the_schema_walk(s in schema(), bytes in data()) {
            let compiled = Skip::of(&s).unwrap();
            let (mut a, mut b) = (Cursor::new(&bytes), Cursor::new(&bytes));
            let (walked, passed) = (a.skip(&s), b.pass(&compiled));
            prop_assert_eq!(walked.is_ok(), passed.is_ok(), "{:?} / {:?}", s, compiled);
            if walked.is_ok() {
                prop_assert_eq!(a.pos, b.pos);
            }
        }
    }

    /// Runs of varints of every length (and one too long) at every offset within a word.
    #[test]
    fn varint_runs_agree_with_one_at_a_time() {
        let encode = |len: usize| -> Vec<u8> {
            let mut v = vec![0x80u8; len - 1];
            v.push(0x01);
            v
        };
        for lead in 0..8 {
            for lens in [
                vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
                vec![10, 1, 10, 2, 9, 3, 8, 1, 1],
                vec![5, 5, 5, 5, 5, 5, 5, 5, 5],
                vec![1, 2, 3, 11, 1, 1, 1, 1, 1],
                vec![1, 1, 1, 1, 1, 1, 1, 1, 12],
                vec![9, 9, 9, 9, 9, 9, 9, 9, 10],
            ] {
                let mut bytes = vec![0u8; lead];
                for len in &lens {
                    bytes.extend(encode(*len));
                }
                for cut in [bytes.len(), bytes.len() - 1] {
                    let bytes = &bytes[..cut];
                    let mut one = Cursor::new(bytes);
                    one.pos = lead;
                    let walked = (0..lens.len()).try_for_each(|_| one.skip(&Schema::Long));
                    let mut run = Cursor::new(bytes);
                    run.pos = lead;
                    let passed = run.pass(&Skip::Varints(lens.len()));
                    assert_eq!(walked, passed, "{lead} {lens:?} {cut}");
                    if walked.is_ok() {
                        assert_eq!(one.pos, run.pos);
                    }
                }
            }
        }
    }

    /// Named types that nest each other compile within a budget, or not at all.
    #[test]
    fn a_schema_too_large_to_compile_is_refused() {
        let mut s = Schema::Long;
        for _ in 0..40 {
            let field = |name: &str| Field {
                name: name.into(),
                id: None,
                schema: s.clone(),
            };
            s = Schema::Record(Arc::new(vec![field("a"), field("b")]));
        }
        assert!(Skip::of(&s).is_err());
    }
}
