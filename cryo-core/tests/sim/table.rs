//! The simulated table, its exact model of the rows, and the writers that change both.
//!
//! Rows are `(id, part, v)`: `part` is `id % 3` (the identity partition), `v` names the row's
//! version (`"<id>.<n>"`), so one version of a row exists in exactly one place. Writers do what
//! real ones do — append, delete by equality, upsert (an equality delete and the new row in one
//! commit, as Flink does), delete by position after reading the file (as Spark's merge-on-read
//! does: position delete files on v2, a deletion vector merged with the file's live one on v3),
//! overwrite a partition (copy-on-write), compact a partition and expire snapshots — each through
//! Cryo's public commit API, with
//! the validation real writers make: a commit is made on the head its reads came from, and a
//! moved head means reading again. The model changes only when a writer's commit landed.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use cryo_core::clock::Clock;
use cryo_core::commit::{
    SnapshotProducer, live_files, write_data_files, write_deletion_vectors, write_equality_deletes,
    write_position_deletes,
};
use cryo_core::{Catalog, Error, LoadedTable, TableId};
use futures::TryStreamExt;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, NestedField, PrimitiveType, Schema, Transform, Type,
    UnboundPartitionSpec,
};

use super::world::Rng;

pub const PARTS: i64 = 3;

pub fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "part", Type::Primitive(PrimitiveType::Int)).into(),
            NestedField::optional(3, "v", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .expect("schema")
}

pub fn spec() -> UnboundPartitionSpec {
    UnboundPartitionSpec::builder()
        .add_partition_field(2, "part", Transform::Identity)
        .expect("partition field")
        .build()
}

/// A row of a data file as the reader by hand finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandRow {
    pub id: i64,
    pub v: String,
    /// Not deleted by any live delete file or deletion vector.
    pub live: bool,
    /// Format v3: the row's `_row_id` and `_last_updated_sequence_number`, stored in the file
    /// or inherited (the file's `first_row_id` plus the row's position; its data sequence number).
    pub lineage: Option<(i64, i64)>,
}

/// A data file's rows in file order, by its path.
pub type FileRows = (String, Vec<HandRow>);

/// A row: id → (part, version).
pub type Rows = BTreeMap<i64, (i32, String)>;

fn arrow_schema() -> Arc<ArrowSchema> {
    Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Int32, false),
        Field::new("v", DataType::Utf8, true),
    ]))
}

pub fn part_of(id: i64) -> i32 {
    (id % PARTS) as i32
}

/// The column a writer adds (schema evolution).
pub const NOTE: &str = "note";

/// Whether the table's current schema has the added column.
fn has_note(table: &LoadedTable) -> bool {
    table
        .metadata
        .current_schema()
        .field_by_name(NOTE)
        .is_some()
}

/// The `note` a row version holds: its version, for versions written with one (marked `+n`),
/// else null (written before the column existed, or without a value).
pub fn note_of(v: &str) -> Option<String> {
    v.ends_with("+n").then(|| v.to_string())
}

/// Row `i` of a batch (`id`, version `v`) must hold the note its version was written with.
fn check_note(id: i64, v: &str, notes: Option<&StringArray>, i: usize) -> Result<(), String> {
    let note = notes
        .filter(|c| c.is_valid(i))
        .map(|c| c.value(i).to_string());
    if note == note_of(v) {
        Ok(())
    } else {
        Err(format!(
            "row {id} version {v} holds note {note:?}, it was written with {:?}",
            note_of(v)
        ))
    }
}

/// Rows in the table's current schema (with `note` once the column exists).
fn batch(table: &LoadedTable, rows: &[(i64, String)]) -> RecordBatch {
    let mut fields = arrow_schema().fields().to_vec();
    let mut columns = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| part_of(r.0)),
        )),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.1.clone()))
                .collect::<StringArray>(),
        ),
    ];
    if has_note(table) {
        fields.push(Arc::new(Field::new(NOTE, DataType::Utf8, true)));
        columns.push(Arc::new(
            rows.iter().map(|r| note_of(&r.1)).collect::<StringArray>(),
        ));
    }
    RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns).expect("batch")
}

fn keys(ids: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("part", DataType::Int32, false),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.iter().copied())) as ArrayRef,
            Arc::new(Int32Array::from_iter_values(
                ids.iter().map(|i| part_of(*i)),
            )),
        ],
    )
    .expect("keys")
}

/// Rows of record batches.
pub fn rows_of(batches: &[RecordBatch]) -> Result<Vec<(i64, i32, String)>, String> {
    let mut out = Vec::new();
    for b in batches {
        let col = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| format!("no column {name}"))
        };
        let ids = col("id")?
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("id is not a long")?;
        let parts = col("part")?
            .as_any()
            .downcast_ref::<Int32Array>()
            .ok_or("part is not an int")?;
        let vs = col("v")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("v is not a string")?;
        let notes = b
            .column_by_name(NOTE)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
        for i in 0..b.num_rows() {
            let v = vs.value(i).to_string();
            check_note(ids.value(i), &v, notes.as_ref(), i)?;
            out.push((ids.value(i), parts.value(i), v));
        }
    }
    out.sort();
    Ok(out)
}

/// The table's rows as upstream's reader returns them (deletes applied).
pub async fn read_table(table: &LoadedTable) -> Result<Vec<(i64, i32, String)>, String> {
    let scan = table
        .to_iceberg()
        .map_err(|e| e.to_string())?
        .scan()
        .select_all()
        .build()
        .map_err(|e| e.to_string())?;
    let batches: Vec<RecordBatch> = scan
        .to_arrow()
        .await
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    rows_of(&batches)
}

/// The model as sorted rows.
pub fn model_rows(model: &Rows) -> Vec<(i64, i32, String)> {
    model
        .iter()
        .map(|(id, (p, v))| (*id, *p, v.clone()))
        .collect()
}

/// What one writer action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Committed,
    /// Gave up (too many conflicts, or what it wanted to change is gone): nothing landed.
    GaveUp(String),
}

/// A writer: its own generator, the shared model, the clock.
pub struct Writer {
    pub index: usize,
    pub rng: Rng,
    pub catalog: Arc<Catalog>,
    pub table: TableId,
    pub clock: Arc<dyn Clock>,
}

/// A change a committed writer action made, applied to the model in commit order.
#[derive(Debug, Clone)]
pub enum Change {
    Insert(i64, String),
    /// An equality delete: every older row with the id.
    DeleteId(i64),
    /// A position delete of one version (a no-op if the row is no longer that version).
    DeleteVersion(i64, String),
    /// A copy-on-write rewrite of one version into another.
    Replace(i64, String, String),
}

/// The writers' model of the rows. Writers record their changes with their commit's sequence
/// number; [`Model::settle`] applies them in that order (two writers' model updates may come
/// in either order, their commits cannot).
#[derive(Debug, Default)]
pub struct Model {
    pub rows: Rows,
    pub next_id: i64,
    pub next_version: u64,
    pending: Vec<(i64, Vec<Change>)>,
}

impl Model {
    fn version(&mut self, id: i64) -> String {
        self.next_version += 1;
        format!("{id}.{}", self.next_version)
    }

    fn record(&mut self, sequence_number: i64, changes: Vec<Change>) {
        self.pending.push((sequence_number, changes));
    }

    /// Apply every recorded change in commit order.
    pub fn settle(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(|(seq, _)| *seq);
        for (_, changes) in pending {
            for c in changes {
                match c {
                    Change::Insert(id, v) => {
                        self.rows.insert(id, (part_of(id), v));
                    }
                    Change::DeleteId(id) => {
                        self.rows.remove(&id);
                    }
                    Change::DeleteVersion(id, v) => {
                        if self.rows.get(&id).is_some_and(|(_, cur)| *cur == v) {
                            self.rows.remove(&id);
                        }
                    }
                    Change::Replace(id, old, new) => {
                        if self.rows.get(&id).is_some_and(|(_, cur)| *cur == old) {
                            self.rows.insert(id, (part_of(id), new));
                        }
                    }
                }
            }
        }
    }
}

const ATTEMPTS: usize = 6;

fn conflict(e: &Error) -> bool {
    matches!(e, Error::CommitConflict { .. })
}

impl Writer {
    async fn head(&self) -> Result<LoadedTable, Error> {
        self.catalog.load_table(&self.table).await
    }

    /// One action, chosen by the writer's generator.
    pub async fn act(&mut self, model: &tokio::sync::Mutex<Model>) -> Result<Done, Error> {
        let action = self.rng.below(14);
        let name = [
            "append",
            "append",
            "append",
            "append",
            "delete by equality",
            "upsert",
            "delete by position",
            "delete by position",
            "overwrite a partition",
            "overwrite a partition",
            "compact a partition",
            "expire",
            "drop the partitioning",
            "add a column",
        ][action];
        let done = match action {
            0..=3 => self.append(model).await,
            4 => self.delete_by_equality(model, false).await,
            5 => self.delete_by_equality(model, true).await,
            6 | 7 => self.delete_by_position(model).await,
            8 | 9 => self.overwrite_partition(model).await,
            10 => self.compact_partition().await,
            11 => self.expire().await,
            12 => self.drop_partitioning().await,
            _ => self.add_column().await,
        };
        if std::env::var_os("CRYO_SIM_VERBOSE").is_some() {
            eprintln!("writer {} {name}: {done:?}", self.index);
        }
        done
    }

    /// New versions written on `head` hold a note (most of them) once the column exists.
    fn mark(&mut self, head: &LoadedTable, rows: Vec<(i64, String)>) -> Vec<(i64, String)> {
        if !has_note(head) {
            return rows;
        }
        rows.into_iter()
            .map(|(id, v)| {
                if self.rng.chance(0.7) {
                    (id, format!("{v}+n"))
                } else {
                    (id, v)
                }
            })
            .collect()
    }

    /// Schema evolution: an optional `note` column is added (`ALTER TABLE ... ADD COLUMN`);
    /// files written before have none, and read it as null.
    async fn add_column(&mut self) -> Result<Done, Error> {
        use iceberg::{TableRequirement, TableUpdate};
        let head = self.head().await?;
        if has_note(&head) || !self.rng.chance(0.5) {
            return Ok(Done::GaveUp("schema kept".into()));
        }
        let md = head.metadata.as_ref();
        let current = md.current_schema();
        let mut fields: Vec<_> = current.as_struct().fields().to_vec();
        let id = md.last_column_id() + 1;
        fields.push(NestedField::optional(id, NOTE, Type::Primitive(PrimitiveType::String)).into());
        let schema = Schema::builder()
            .with_schema_id(current.schema_id() + 1)
            .with_fields(fields)
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let requirement = TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: current.schema_id(),
        };
        let updates = vec![
            TableUpdate::AddSchema { schema },
            TableUpdate::SetCurrentSchema { schema_id: -1 },
        ];
        self.change_metadata(&head, requirement, updates).await
    }

    /// Partition evolution: the default spec becomes unpartitioned (as `ALTER TABLE ... DROP
    /// PARTITION FIELD` does); the files written before keep theirs. Equality deletes written
    /// after it are global, so they still reach every row of an id.
    async fn drop_partitioning(&mut self) -> Result<Done, Error> {
        use iceberg::{TableRequirement, TableUpdate};
        let head = self.head().await?;
        let md = head.metadata.as_ref();
        if md.default_partition_spec().is_unpartitioned() || !self.rng.chance(0.5) {
            return Ok(Done::GaveUp("partitioning kept".into()));
        }
        let requirement = TableRequirement::DefaultSpecIdMatch {
            default_spec_id: md.default_partition_spec_id(),
        };
        let updates = vec![
            TableUpdate::AddSpec {
                spec: UnboundPartitionSpec::builder().build(),
            },
            TableUpdate::SetDefaultSpec { spec_id: -1 },
        ];
        self.change_metadata(&head, requirement, updates).await
    }

    /// Commit metadata changes (schema or spec) on `head`, given it still meets `requirement`.
    async fn change_metadata(
        &self,
        head: &LoadedTable,
        requirement: iceberg::TableRequirement,
        updates: Vec<iceberg::TableUpdate>,
    ) -> Result<Done, Error> {
        let changes = cryo_core::commit::TableChanges::new(vec![requirement], updates);
        match self.catalog.committer()?.commit(head, changes).await {
            Ok(_) => Ok(Done::Committed),
            Err(e) if conflict(&e) => Ok(Done::GaveUp("metadata change: conflict".into())),
            Err(e) => Err(e),
        }
    }

    /// The writer's own compaction, as an engine's rewrite does it: a partition's live rows
    /// into one file, its data files replaced, committed on the head read (the rows do not
    /// change). On v3 a writer keeps row lineage only through Cryo's compaction, so there it
    /// runs that one: two maintainers on one table.
    async fn compact_partition(&mut self) -> Result<Done, Error> {
        let part = self.rng.below(PARTS as usize) as i32;
        for _ in 0..ATTEMPTS {
            let head = self.head().await?;
            if head.metadata.format_version() >= iceberg::spec::FormatVersion::V3 {
                let out = cryo_core::compact::Compaction::new(&self.catalog, self.table.clone())
                    .with_options(cryo_core::compact::CompactOptions {
                        target_file_size_bytes: Some(1 << 20),
                        min_input_files: 2,
                        ..cryo_core::compact::CompactOptions::default()
                    })
                    .with_clock(Arc::clone(&self.clock))
                    .execute()
                    .await?;
                return Ok(Done::GaveUp(format!(
                    "compacted with Cryo: {} groups",
                    out.groups.len()
                )));
            }
            let files = read_by_hand(&head).await?;
            let old = holding(&files, part);
            if old.len() < 2 {
                return Ok(Done::GaveUp("nothing to compact".into()));
            }
            let rows: Vec<(i64, String)> = live_of(&old)
                .into_iter()
                .map(|(id, _, v)| (id, v))
                .collect();
            let mut producer = SnapshotProducer::replace(&head)
                .delete_data_files(old.iter().map(|(p, _)| p.clone()))
                .with_clock(Arc::clone(&self.clock));
            if !rows.is_empty() {
                producer = producer
                    .add_data_files(write_data_files(&head, [batch(&head, &rows)]).await?.files);
            }
            match producer.commit(self.catalog.committer()?.as_ref()).await {
                Ok(_) => return Ok(Done::Committed),
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Done::GaveUp("compaction: conflicts".into()))
    }

    /// The writer's own expiry (an engine's `expire_snapshots`, beside Cryo's).
    async fn expire(&mut self) -> Result<Done, Error> {
        use cryo_core::maintain::{ExpireOptions, ExpireSnapshots};
        let out = ExpireSnapshots::new(&self.catalog, self.table.clone())
            .with_options(ExpireOptions {
                dry_run: false,
                older_than_ms: Some(self.clock.now_ms()),
                retain_last: Some(1 + self.rng.below(3) as u32),
                ..ExpireOptions::default()
            })
            .with_clock(Arc::clone(&self.clock))
            .execute()
            .await?;
        Ok(if out.expired_snapshot_ids.is_empty() {
            Done::GaveUp("nothing to expire".into())
        } else {
            Done::Committed
        })
    }

    async fn append(&mut self, model: &tokio::sync::Mutex<Model>) -> Result<Done, Error> {
        let n = 1 + self.rng.below(12) as i64;
        let rows: Vec<(i64, String)> = {
            let mut m = model.lock().await;
            let first = m.next_id;
            m.next_id += n;
            (first..first + n).map(|id| (id, m.version(id))).collect()
        };
        let head = self.head().await?;
        let rows = self.mark(&head, rows);
        let files = write_data_files(&head, [batch(&head, &rows)]).await?.files;
        let changes = rows
            .into_iter()
            .map(|(id, v)| Change::Insert(id, v))
            .collect();
        self.commit_on_any_head(head, model, changes, "append", |head| {
            SnapshotProducer::new(head).add_data_files(files.clone())
        })
        .await
    }

    /// Commit what `producer` stages on the head, staged again on the new head after a
    /// conflict (appends and equality deletes need no validation), and record `changes` with
    /// the commit's sequence number.
    async fn commit_on_any_head(
        &self,
        mut head: LoadedTable,
        model: &tokio::sync::Mutex<Model>,
        changes: Vec<Change>,
        what: &str,
        producer: impl Fn(&LoadedTable) -> SnapshotProducer,
    ) -> Result<Done, Error> {
        for _ in 0..ATTEMPTS {
            let r = producer(&head)
                .with_clock(Arc::clone(&self.clock))
                .commit(self.catalog.committer()?.as_ref())
                .await;
            match r {
                Ok(c) => {
                    model.lock().await.record(c.sequence_number, changes);
                    return Ok(Done::Committed);
                }
                Err(e) if conflict(&e) => head = self.head().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(Done::GaveUp(format!("{what}: conflicts")))
    }

    /// Delete some live ids by equality; with `upsert`, write their new versions in the same
    /// commit.
    async fn delete_by_equality(
        &mut self,
        model: &tokio::sync::Mutex<Model>,
        upsert: bool,
    ) -> Result<Done, Error> {
        let (ids, new_rows) = {
            let mut m = model.lock().await;
            let live: Vec<i64> = m.rows.keys().copied().collect();
            if live.is_empty() {
                return Ok(Done::GaveUp("nothing to delete".into()));
            }
            let mut ids: Vec<i64> = (0..=self.rng.below(4))
                .filter_map(|_| self.rng.pick(&live).copied())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let new_rows: Vec<(i64, String)> = if upsert {
                ids.iter().map(|id| (*id, m.version(*id))).collect()
            } else {
                Vec::new()
            };
            (ids, new_rows)
        };
        let head = self.head().await?;
        let new_rows = self.mark(&head, new_rows);
        let deletes = write_equality_deletes(&head, &["id"], [keys(&ids)])
            .await?
            .files;
        let data = if upsert {
            write_data_files(&head, [batch(&head, &new_rows)])
                .await?
                .files
        } else {
            Vec::new()
        };
        // The delete applies to every older row with these ids, whatever happened to them
        // meanwhile; the upserted versions are as new as the delete.
        let mut changes: Vec<Change> = ids.iter().map(|id| Change::DeleteId(*id)).collect();
        changes.extend(new_rows.into_iter().map(|(id, v)| Change::Insert(id, v)));
        self.commit_on_any_head(head, model, changes, "equality delete", |head| {
            SnapshotProducer::new(head)
                .add_delete_files(deletes.clone())
                .add_data_files(data.clone())
        })
        .await
    }

    /// Read a live data file, pick rows that are the model's current versions, and delete them
    /// by position; committed on the head the file was read from (a moved head: read again).
    async fn delete_by_position(
        &mut self,
        model: &tokio::sync::Mutex<Model>,
    ) -> Result<Done, Error> {
        for _ in 0..ATTEMPTS {
            let head = self.head().await?;
            let v3 = head.metadata.format_version() >= iceberg::spec::FormatVersion::V3;
            let files = read_by_hand(&head).await?;
            let Some((path, rows)) = self.rng.pick(&files).cloned() else {
                return Ok(Done::GaveUp("no data file".into()));
            };
            let mut positions = Vec::new();
            let mut gone = Vec::new();
            for (pos, row) in rows.iter().enumerate() {
                if row.live && self.rng.chance(0.4) {
                    positions.push(pos as i64);
                    gone.push(Change::DeleteVersion(row.id, row.v.clone()));
                }
            }
            if positions.is_empty() {
                return Ok(Done::GaveUp("no live row picked".into()));
            }
            // v3: a deletion vector, merged with the file's live one (which it supersedes).
            let deletes = [(path, positions)];
            let producer = if v3 {
                SnapshotProducer::new(&head)
                    .add_deletion_vectors(write_deletion_vectors(&head, &deletes).await?)
            } else {
                SnapshotProducer::new(&head)
                    .add_delete_files(write_position_deletes(&head, &deletes).await?.files)
            };
            let r = producer
                .with_clock(Arc::clone(&self.clock))
                .commit(self.catalog.committer()?.as_ref())
                .await;
            match r {
                Ok(c) => {
                    model.lock().await.record(c.sequence_number, gone);
                    return Ok(Done::Committed);
                }
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Done::GaveUp("position delete: conflicts".into()))
    }

    /// Copy-on-write: read a partition's rows, write them again with new versions (some
    /// dropped), remove every data file of the partition; committed on the head read.
    async fn overwrite_partition(
        &mut self,
        model: &tokio::sync::Mutex<Model>,
    ) -> Result<Done, Error> {
        let part = self.rng.below(PARTS as usize) as i32;
        for _ in 0..ATTEMPTS {
            let head = self.head().await?;
            let files = read_by_hand(&head).await?;
            // The files holding rows of the partition (after a change to an unpartitioned spec
            // they hold other rows too: those are written again, as new versions).
            let touched = holding(&files, part);
            if touched.is_empty() {
                return Ok(Done::GaveUp("empty partition".into()));
            }
            let old: Vec<String> = touched.iter().map(|(p, _)| p.clone()).collect();
            let rows = live_of(&touched);
            let (kept, changes) = {
                let mut m = model.lock().await;
                let mut kept = Vec::new();
                let mut changes = Vec::new();
                for (id, p, v) in &rows {
                    if *p == part && self.rng.chance(0.2) {
                        changes.push(Change::DeleteVersion(*id, v.clone()));
                    } else {
                        let mut new = m.version(*id);
                        if has_note(&head) && self.rng.chance(0.7) {
                            new.push_str("+n");
                        }
                        changes.push(Change::Replace(*id, v.clone(), new.clone()));
                        kept.push((*id, new));
                    }
                }
                (kept, changes)
            };
            let mut producer = SnapshotProducer::new(&head)
                .delete_data_files(old)
                .with_clock(Arc::clone(&self.clock));
            if !kept.is_empty() {
                producer = producer
                    .add_data_files(write_data_files(&head, [batch(&head, &kept)]).await?.files);
            }
            match producer.commit(self.catalog.committer()?.as_ref()).await {
                Ok(c) => {
                    model.lock().await.record(c.sequence_number, changes);
                    return Ok(Done::Committed);
                }
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Done::GaveUp("overwrite: conflicts".into()))
    }
}

/// Where an equality delete applies: `None` everywhere (an unpartitioned spec's), else the spec
/// and partition of the data files.
type Scope = Option<(i32, iceberg::spec::Struct)>;

/// The data files with a live row of partition `part`.
fn holding(files: &[FileRows], part: i32) -> Vec<FileRows> {
    files
        .iter()
        .filter(|(_, rows)| rows.iter().any(|r| r.live && part_of(r.id) == part))
        .cloned()
        .collect()
}

/// The live rows of `head`, read by hand from its files (Parquet data, position delete and
/// equality delete files, deletion vectors in Puffin files, with the spec's sequence-number
/// rules): a second reader beside upstream's, and the writers' (it spawns nothing outside the
/// schedule). Per data file, its rows in file order with whether each is live and, on v3, its
/// lineage.
pub async fn read_by_hand(head: &LoadedTable) -> Result<Vec<FileRows>, Error> {
    use std::collections::{HashMap, HashSet};
    let v3 = head.metadata.format_version() >= iceberg::spec::FormatVersion::V3;
    let files = live_files(head).await?;
    let read = |path: String| async move { head.storage.read_all(&path).await };
    // (data file, position) → newest delete sequence number; id → equality deletes: their
    // sequence number and scope (`None`: global, from an unpartitioned spec; else the spec and
    // partition of the data files they apply to).
    let mut positions: HashMap<(String, i64), i64> = HashMap::new();
    let mut equality: HashMap<i64, Vec<(i64, Scope)>> = HashMap::new();
    let mut vectors: HashSet<String> = HashSet::new();
    for f in &files {
        let seq = f.sequence_number.unwrap_or(0);
        let mut delete = |path: String, pos: i64| {
            let e = positions.entry((path, pos)).or_insert(seq);
            *e = (*e).max(seq);
        };
        match f.file.content_type() {
            DataContentType::PositionDeletes if f.file.file_format() == DataFileFormat::Puffin => {
                let bytes = read(f.file.file_path().to_string()).await?;
                let (data, set) = deletion_vector(&f.file, &bytes).map_err(Error::Internal)?;
                if !vectors.insert(data.clone()) {
                    return Err(Error::Internal(format!(
                        "{data} has two live deletion vectors"
                    )));
                }
                for pos in set {
                    delete(data.clone(), pos);
                }
            }
            DataContentType::PositionDeletes => {
                let bytes = read(f.file.file_path().to_string()).await?;
                for (path, pos) in parquet_positions(bytes).map_err(Error::Internal)? {
                    delete(path, pos);
                }
            }
            DataContentType::EqualityDeletes => {
                let bytes = read(f.file.file_path().to_string()).await?;
                let global = head
                    .metadata
                    .partition_spec_by_id(f.spec_id)
                    .is_none_or(|s| s.is_unpartitioned());
                let scope = (!global).then(|| (f.spec_id, f.file.partition().clone()));
                for id in parquet_ids(bytes).map_err(Error::Internal)? {
                    equality.entry(id).or_default().push((seq, scope.clone()));
                }
            }
            DataContentType::Data => {}
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for f in files
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
    {
        let path = f.file.file_path().to_string();
        if !seen.insert(path.clone()) {
            return Err(Error::Internal(format!("{path} is live twice")));
        }
        let seq = f.sequence_number.unwrap_or(0);
        let rows = parquet_rows(read(path.clone()).await?).map_err(Error::Internal)?;
        let mut file_rows = Vec::with_capacity(rows.len());
        for (pos, row) in rows.into_iter().enumerate() {
            let by_position = positions
                .get(&(path.clone(), pos as i64))
                .is_some_and(|d| seq <= *d);
            let by_equality = equality.get(&row.id).is_some_and(|ds| {
                ds.iter().any(|(d, scope)| {
                    seq < *d
                        && scope
                            .as_ref()
                            .is_none_or(|(spec, p)| *spec == f.spec_id && p == f.file.partition())
                })
            });
            let lineage = if v3 {
                let Some(first) = f.first_row_id else {
                    return Err(Error::Internal(format!(
                        "{path}: a data file of a v3 table without first_row_id"
                    )));
                };
                Some((
                    row.row_id.unwrap_or(first + pos as i64),
                    row.updated.unwrap_or(seq),
                ))
            } else {
                None
            };
            file_rows.push(HandRow {
                id: row.id,
                v: row.v,
                live: !(by_position || by_equality),
                lineage,
            });
        }
        out.push((path, file_rows));
    }
    // By content, not by name: names carry random ids, and a writer picks from this list.
    out.sort_by(|a, b| {
        let first = |r: &FileRows| r.1.first().map(|r| (r.id, r.v.clone()));
        first(a).cmp(&first(b)).then(a.1.len().cmp(&b.1.len()))
    });
    Ok(out)
}

/// The data file a deletion vector is about, and its positions: the blob at the entry's offset
/// is `length (u32, big-endian) | magic D1 D3 39 64 | 64-bit portable Roaring | CRC-32`.
fn deletion_vector(entry: &DataFile, puffin: &[u8]) -> Result<(String, Vec<i64>), String> {
    let path = entry.file_path();
    let data = entry.referenced_data_file().ok_or(format!(
        "{path}: a deletion vector without referenced_data_file"
    ))?;
    let offset = usize::try_from(entry.content_offset().ok_or("no content_offset")?)
        .map_err(|e| e.to_string())?;
    let size = usize::try_from(entry.content_size_in_bytes().ok_or("no content size")?)
        .map_err(|e| e.to_string())?;
    let blob = puffin
        .get(offset..offset + size)
        .ok_or(format!("{path}: blob {offset}+{size} past the end"))?;
    if blob.len() < 12 || blob[4..8] != [0xD1, 0xD3, 0x39, 0x64] {
        return Err(format!("{path}: not a deletion-vector-v1 blob"));
    }
    let length = u32::from_be_bytes(blob[..4].try_into().map_err(|_| "length")?) as usize;
    if length + 8 != blob.len() {
        return Err(format!(
            "{path}: blob length {length} + 8 != {}",
            blob.len()
        ));
    }
    let vector = &blob[8..blob.len() - 4];
    let crc = u32::from_be_bytes(blob[blob.len() - 4..].try_into().map_err(|_| "crc")?);
    if crc32fast::hash(&blob[4..blob.len() - 4]) != crc {
        return Err(format!("{path}: deletion vector checksum mismatch"));
    }
    let set = roaring::RoaringTreemap::deserialize_from(vector).map_err(|e| e.to_string())?;
    if set.len() != entry.record_count() {
        return Err(format!(
            "{path}: cardinality {} but record_count {}",
            set.len(),
            entry.record_count()
        ));
    }
    let positions = set
        .iter()
        .map(|p| i64::try_from(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<i64>, String>>()?;
    Ok((data, positions))
}

/// The live rows [`read_by_hand`] finds, sorted.
pub fn live_of(files: &[FileRows]) -> Vec<(i64, i32, String)> {
    let mut out: Vec<(i64, i32, String)> = files
        .iter()
        .flat_map(|(_, rows)| {
            rows.iter()
                .filter(|r| r.live)
                .map(|r| (r.id, part_of(r.id), r.v.clone()))
        })
        .collect();
    out.sort();
    out
}

fn parquet_positions(bytes: bytes::Bytes) -> Result<Vec<(String, i64)>, String> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| e.to_string())?
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| e.to_string())?;
        let paths = b
            .column_by_name("file_path")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
            .ok_or("no file_path column")?;
        let pos = b
            .column_by_name("pos")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            .ok_or("no pos column")?;
        for i in 0..b.num_rows() {
            out.push((paths.value(i).to_string(), pos.value(i)));
        }
    }
    Ok(out)
}

fn parquet_ids(bytes: bytes::Bytes) -> Result<Vec<i64>, String> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| e.to_string())?
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| e.to_string())?;
        let ids = b
            .column_by_name("id")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            .ok_or("no id column")?;
        out.extend(ids.values().iter().copied());
    }
    Ok(out)
}

/// A row as stored in a data file.
pub struct StoredRow {
    pub id: i64,
    pub v: String,
    /// `_row_id` and `_last_updated_sequence_number`, when the file stores them (non-null).
    pub row_id: Option<i64>,
    pub updated: Option<i64>,
}

/// Every row of a Parquet data file, in file order.
pub fn parquet_rows(bytes: bytes::Bytes) -> Result<Vec<StoredRow>, String> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| e.to_string())?
        .build()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| e.to_string())?;
        let ids = b
            .column_by_name("id")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
            .ok_or("no id column")?;
        let vs = b
            .column_by_name("v")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
            .ok_or("no v column")?;
        let long = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
        };
        let (row_ids, updated) = (long("_row_id"), long("_last_updated_sequence_number"));
        let notes = b
            .column_by_name(NOTE)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
        let at = |c: &Option<Int64Array>, i: usize| {
            c.as_ref().filter(|c| c.is_valid(i)).map(|c| c.value(i))
        };
        for i in 0..b.num_rows() {
            let v = vs.value(i).to_string();
            check_note(ids.value(i), &v, notes.as_ref(), i)?;
            out.push(StoredRow {
                id: ids.value(i),
                v,
                row_id: at(&row_ids, i),
                updated: at(&updated, i),
            });
        }
    }
    Ok(out)
}
