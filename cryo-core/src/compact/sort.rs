//! Ordering a group's rows: sort keys (the table's sort order, or given columns) and z-order
//! values are appended to each batch as key columns, `DataFusion`'s `SortExec` sorts under a
//! memory pool and spills sorted runs to disk when the pool is full, and the key columns are
//! dropped before writing.
//!
//! Without the `datafusion` feature, planning a sort works (a dry run needs no engine), and
//! rewriting refuses with [`Error::Unsupported`].

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, new_empty_array};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{NullOrder, SortDirection, Transform};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};

use super::zorder::Curve;
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::plan::RewriteStrategy;

/// A parsed sort column: `col`, `col DESC`, `col ASC NULLS LAST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortColumn {
    pub(crate) name: String,
    pub(crate) descending: bool,
    pub(crate) nulls_first: bool,
}

/// Parse `name [ASC|DESC] [NULLS FIRST|NULLS LAST]` (Spark's and Iceberg's defaults: nulls
/// first ascending, last descending).
pub(crate) fn parse_sort_column(text: &str) -> Result<SortColumn> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((name, rest)) = words.split_first() else {
        return Err(Error::validation("empty sort column"));
    };
    let upper: Vec<String> = rest.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let (descending, rest) = match upper.as_slice() {
        ["DESC", r @ ..] => (true, r),
        ["ASC", r @ ..] | r => (false, r),
    };
    let nulls_first = match rest {
        [] => !descending,
        ["NULLS", "FIRST"] => true,
        ["NULLS", "LAST"] => false,
        _ => {
            return Err(Error::validation(format!(
                "cannot read sort column `{text}` (expected `col [ASC|DESC] [NULLS FIRST|LAST]`)"
            )));
        }
    };
    Ok(SortColumn {
        name: (*name).to_string(),
        descending,
        nulls_first,
    })
}

/// A sort strategy's column: a column's exact name wins over reading the text as
/// `col [ASC|DESC] [NULLS …]`, so that a name with spaces (or padding) addresses that column,
/// never a trimmed look-alike.
pub(crate) fn sort_column(schema: &iceberg::spec::Schema, text: &str) -> Result<SortColumn> {
    if schema.field_by_name(text).is_some() {
        return Ok(SortColumn {
            name: text.to_string(),
            descending: false,
            nulls_first: true,
        });
    }
    if text.trim() != text {
        return Err(Error::validation(format!(
            "sort column `{text}` names no column (Cryo does not trim names)"
        )));
    }
    parse_sort_column(text)
}

struct SortKey {
    column: usize,
    transform: Option<Arc<BoxedTransformFunction>>,
    descending: bool,
    nulls_first: bool,
}

/// How a group's rows are ordered before writing.
pub(crate) struct Ordering {
    keys: Vec<SortKey>,
    zorder: Option<(Curve, Vec<usize>)>,
    data_columns: usize,
    keyed_schema: ArrowSchemaRef,
    /// The table's sort order id when the output follows it.
    pub(crate) sort_order_id: Option<i32>,
}

impl Ordering {
    /// The ordering a strategy asks for (`None`: bin-pack keeps rows as read).
    #[allow(clippy::too_many_lines)] // Reason: one arm per strategy, then the keyed schema.
    pub(crate) fn resolve(
        table: &LoadedTable,
        strategy: &RewriteStrategy,
        data_schema: &ArrowSchemaRef,
    ) -> Result<Option<Self>> {
        let md = table.metadata.as_ref();
        let schema = md.current_schema();
        let top: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
        let index_of = |name: &str| -> Result<usize> {
            let f = schema.field_by_name(name).ok_or_else(|| {
                Error::validation(format!("{}: no column `{name}` to order by", table.id))
            })?;
            top.iter().position(|id| *id == f.id).ok_or_else(|| {
                Error::unsupported(format!("{}: ordering by nested column `{name}`", table.id))
            })
        };
        let (keys, zorder, sort_order_id) = match strategy {
            RewriteStrategy::BinPack => return Ok(None),
            RewriteStrategy::Sort { columns } if columns.is_empty() => {
                let order = md.default_sort_order();
                if order.fields.is_empty() {
                    return Err(Error::validation(format!(
                        "{}: the table has no sort order; name the sort columns",
                        table.id
                    )));
                }
                let mut keys = Vec::new();
                for f in &order.fields {
                    let column = top
                        .iter()
                        .position(|id| *id == f.source_id)
                        .ok_or_else(|| {
                            Error::unsupported(format!(
                                "{}: sort order on field {}, which is nested or dropped",
                                table.id, f.source_id
                            ))
                        })?;
                    let transform = match f.transform {
                        Transform::Identity => None,
                        t => Some(Arc::new(create_transform_function(&t).map_err(|e| {
                            Error::unsupported(format!("{}: sort transform {t}: {e}", table.id))
                        })?)),
                    };
                    keys.push(SortKey {
                        column,
                        transform,
                        descending: f.direction == SortDirection::Descending,
                        nulls_first: f.null_order == NullOrder::First,
                    });
                }
                (keys, None, Some(order.order_id as i32))
            }
            RewriteStrategy::Sort { columns } => {
                let mut keys = Vec::new();
                for c in columns {
                    let c = sort_column(schema, c)?;
                    keys.push(SortKey {
                        column: index_of(&c.name)?,
                        transform: None,
                        descending: c.descending,
                        nulls_first: c.nulls_first,
                    });
                }
                (keys, None, None)
            }
            RewriteStrategy::ZOrder { columns } => {
                let idx = columns
                    .iter()
                    .map(|c| index_of(c))
                    .collect::<Result<Vec<_>>>()?;
                (Vec::new(), Some((Curve::Z, idx)), None)
            }
            RewriteStrategy::Hilbert { columns } => {
                let idx = columns
                    .iter()
                    .map(|c| index_of(c))
                    .collect::<Result<Vec<_>>>()?;
                (Vec::new(), Some((Curve::Hilbert, idx)), None)
            }
        };
        let mut fields: Vec<Arc<Field>> = data_schema.fields().iter().cloned().collect();
        if zorder.is_some() {
            fields.push(Arc::new(Field::new(
                "__cryo_zvalue",
                DataType::Binary,
                false,
            )));
        }
        for (i, k) in keys.iter().enumerate() {
            let source = data_schema.field(k.column);
            let data_type = match &k.transform {
                None => source.data_type().clone(),
                Some(t) => t
                    .transform(new_empty_array(source.data_type()))
                    .map_err(|e| Error::unsupported(format!("sort transform: {e}")))?
                    .data_type()
                    .clone(),
            };
            fields.push(Arc::new(Field::new(
                format!("__cryo_key_{i}"),
                data_type,
                true,
            )));
        }
        Ok(Some(Self {
            keys,
            zorder,
            data_columns: data_schema.fields().len(),
            keyed_schema: Arc::new(ArrowSchema::new(fields)),
            sort_order_id,
        }))
    }

    /// The batch with its key columns appended.
    pub(crate) fn with_keys(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        if let Some((curve, z)) = &self.zorder {
            let cols: Vec<ArrayRef> = z.iter().map(|&i| Arc::clone(batch.column(i))).collect();
            columns.push(Arc::new(super::zorder::curve_values(&cols, *curve)?));
        }
        for k in &self.keys {
            let source = Arc::clone(batch.column(k.column));
            columns.push(match &k.transform {
                None => source,
                Some(t) => t
                    .transform(source)
                    .map_err(|e| Error::unsupported(format!("sort transform: {e}")))?,
            });
        }
        RecordBatch::try_new(Arc::clone(&self.keyed_schema), columns)
            .map_err(|e| Error::compute("sort key columns", e))
    }

    /// The data columns of a keyed batch.
    pub(crate) fn strip_keys(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        batch
            .project(&(0..self.data_columns).collect::<Vec<_>>())
            .map_err(|e| Error::compute("drop sort keys", e))
    }

    /// `(keyed column index, descending, nulls first)` of every sort key, most significant first.
    pub(crate) fn sort_columns(&self) -> Vec<(usize, bool, bool)> {
        let mut out = Vec::new();
        let mut next = self.data_columns;
        if self.zorder.is_some() {
            out.push((next, false, true));
            next += 1;
        }
        for k in &self.keys {
            out.push((next, k.descending, k.nulls_first));
            next += 1;
        }
        out
    }

    /// Schema of keyed batches.
    pub(crate) fn keyed_schema(&self) -> &ArrowSchemaRef {
        &self.keyed_schema
    }
}

#[cfg(feature = "datafusion")]
pub(crate) use engine::sort_stream;

#[cfg(feature = "datafusion")]
mod engine {
    use std::fmt;
    use std::sync::{Arc, Mutex};

    use arrow_array::RecordBatch;
    use arrow_schema::{SchemaRef as ArrowSchemaRef, SortOptions};
    use datafusion_common::DataFusionError;
    use datafusion_execution::TaskContext;
    use datafusion_execution::config::SessionConfig;
    use datafusion_execution::memory_pool::FairSpillPool;
    use datafusion_execution::runtime_env::RuntimeEnvBuilder;
    use datafusion_physical_expr::expressions::Column;
    use datafusion_physical_expr::{LexOrdering, PhysicalSortExpr};
    use datafusion_physical_plan::sorts::sort::SortExec;
    use datafusion_physical_plan::stream::RecordBatchStreamAdapter;
    use datafusion_physical_plan::streaming::{PartitionStream, StreamingTableExec};
    use datafusion_physical_plan::{ExecutionPlan, SendableRecordBatchStream};
    use futures::stream::BoxStream;
    use futures::{StreamExt, TryStreamExt};
    use tokio::sync::mpsc;

    use super::Ordering;
    use crate::error::{Error, Result};

    /// Spilling done by a sort, read once its stream is drained.
    #[derive(Clone)]
    pub(crate) struct SortStats {
        plan: Arc<SortExec>,
    }

    impl SortStats {
        /// `(spill files, spilled bytes)`.
        pub(crate) fn spills(&self) -> (u64, u64) {
            self.plan.metrics().map_or((0, 0), |m| {
                (
                    m.spill_count().unwrap_or(0) as u64,
                    m.spilled_bytes().unwrap_or(0) as u64,
                )
            })
        }
    }

    /// One input stream, handed to `DataFusion` once.
    struct OneShot {
        schema: ArrowSchemaRef,
        stream: Mutex<Option<SendableRecordBatchStream>>,
    }

    impl fmt::Debug for OneShot {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("OneShot").finish_non_exhaustive()
        }
    }

    impl PartitionStream for OneShot {
        fn schema(&self) -> &ArrowSchemaRef {
            &self.schema
        }

        fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
            let taken = self.stream.lock().ok().and_then(|mut s| s.take());
            taken.unwrap_or_else(|| {
                Box::pin(RecordBatchStreamAdapter::new(
                    Arc::clone(&self.schema),
                    futures::stream::once(async {
                        Err(DataFusionError::Internal("sort input read twice".into()))
                    }),
                ))
            })
        }
    }

    fn to_df(e: Error) -> DataFusionError {
        DataFusionError::External(Box::new(e))
    }

    fn from_df(e: DataFusionError) -> Error {
        match e {
            DataFusionError::External(inner) => match inner.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(other) => Error::compute("sort", other),
            },
            DataFusionError::ResourcesExhausted(m) => Error::validation(format!(
                "sort ran out of memory ({m}); raise memory_budget_bytes"
            )),
            other => Error::compute("sort", other),
        }
    }

    /// Sort everything arriving on `input` by `ordering` in at most `memory_bytes` of memory
    /// (sorted runs spill to the system temp directory beyond that), yielding data batches.
    pub(crate) fn sort_stream(
        ordering: Arc<Ordering>,
        input: mpsc::Receiver<Result<RecordBatch>>,
        memory_bytes: usize,
        batch_rows: usize,
    ) -> Result<(BoxStream<'static, Result<RecordBatch>>, SortStats)> {
        let keyed = Arc::clone(ordering.keyed_schema());
        let add_keys = Arc::clone(&ordering);
        let source = futures::stream::unfold(input, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .map(move |item| item.and_then(|b| add_keys.with_keys(&b)).map_err(to_df));
        let part = OneShot {
            schema: Arc::clone(&keyed),
            stream: Mutex::new(Some(Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&keyed),
                source,
            )))),
        };
        let exprs = ordering
            .sort_columns()
            .into_iter()
            .map(|(i, descending, nulls_first)| {
                PhysicalSortExpr::new(
                    Arc::new(Column::new(keyed.field(i).name(), i)),
                    SortOptions {
                        descending,
                        nulls_first,
                    },
                )
            });
        let lex =
            LexOrdering::new(exprs).ok_or_else(|| Error::Internal("sort without keys".into()))?;
        let scan = StreamingTableExec::try_new(
            Arc::clone(&keyed),
            vec![Arc::new(part)],
            None,
            Vec::new(),
            false,
            None,
        )
        .map_err(from_df)?;
        let plan = Arc::new(SortExec::new(lex, Arc::new(scan)));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(memory_bytes)))
            .build_arc()
            .map_err(from_df)?;
        // The merge of spilled runs reserves this much up front; keep it inside the budget.
        let config = SessionConfig::new()
            .with_batch_size(batch_rows)
            .with_sort_spill_reservation_bytes((memory_bytes / 8).max(1 << 20));
        let ctx = TaskContext::default()
            .with_session_config(config)
            .with_runtime(runtime);
        let stream = Arc::clone(&plan)
            .execute(0, Arc::new(ctx))
            .map_err(from_df)?;
        let out = stream
            .map_err(from_df)
            .and_then(move |b| {
                let r = ordering.strip_keys(&b);
                async move { r }
            })
            .boxed();
        Ok((out, SortStats { plan }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_columns_parse() {
        let c = parse_sort_column("ts").unwrap();
        assert!(!c.descending && c.nulls_first);
        let c = parse_sort_column("ts desc").unwrap();
        assert!(c.descending && !c.nulls_first);
        let c = parse_sort_column("ts ASC NULLS LAST").unwrap();
        assert!(!c.descending && !c.nulls_first);
        assert!(parse_sort_column("ts sideways").is_err());
        assert!(parse_sort_column("  ").is_err());
    }
}
