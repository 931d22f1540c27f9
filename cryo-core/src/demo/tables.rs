//! The demo tables: each replays a history through Cryo's own commit layer and keeps its own
//! count of what a reader must find.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use iceberg::spec::{
    FormatVersion, NestedField, NullOrder, PrimitiveType, Schema, SortDirection, SortField,
    SortOrder, Transform, Type, UnboundPartitionSpec,
};

use super::{DemoOptions, DemoTable};
use crate::catalog::{Catalog, LoadedTable, Namespace, TableId};
use crate::clock::FixedClock;
use crate::commit::{
    CatalogCommitter, NewTable, SnapshotProducer, write_data_files, write_equality_deletes,
    write_position_deletes,
};
use crate::error::{Error, Result};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;
const DAY_US: i64 = DAY_MS * 1000;
/// Data values are anchored here (2026-01-01T00:00:00Z), never at the wall clock.
const DATA_T0_US: i64 = 1_767_225_600_000_000;
const DATA_T0_DAYS: i32 = 20_454;

const COUNTRIES: [&str; 12] = [
    "US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "AU", "ES", "NL", "SE",
];

/// `SplitMix64`: tiny, fast, and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant for demo data).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

fn req(id: i32, name: &str, t: PrimitiveType) -> Arc<NestedField> {
    NestedField::required(id, name, Type::Primitive(t)).into()
}

fn opt(id: i32, name: &str, t: PrimitiveType) -> Arc<NestedField> {
    NestedField::optional(id, name, Type::Primitive(t)).into()
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    RecordBatch::try_from_iter(columns).map_err(|e| Error::compute("demo batch", e))
}

fn ts_array(values: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(values).with_timezone("+00:00"))
}

/// Shared by every table builder.
struct Ctx<'a> {
    catalog: &'a Catalog,
    committer: Arc<dyn CatalogCommitter>,
    seed: u64,
    now_ms: i64,
}

impl Ctx<'_> {
    async fn create(
        &self,
        name: &str,
        table: NewTable,
        created_ms: i64,
    ) -> Result<(TableId, LoadedTable)> {
        let id = TableId::new(Namespace::new(["lake"]), name);
        let t = self
            .catalog
            .create_table(&id, table.with_clock(Arc::new(FixedClock(created_ms))))
            .await?;
        Ok((id, t))
    }

    async fn commit(&self, producer: SnapshotProducer, at_ms: i64) -> Result<LoadedTable> {
        Ok(producer
            .with_clock(Arc::new(FixedClock(at_ms)))
            .set_snapshot_property("cryo.demo", "true")
            .commit(self.committer.as_ref())
            .await?
            .table)
    }
}

/// Build every table (concurrently: they share nothing but the catalog) and return their
/// figures in identifier order.
pub(super) async fn build_all(
    catalog: &Catalog,
    options: &DemoOptions,
    now_ms: i64,
) -> Result<Vec<DemoTable>> {
    catalog.create_namespace(&Namespace::new(["lake"])).await?;
    let ctx = Ctx {
        catalog,
        committer: catalog.committer()?,
        seed: options.seed,
        now_ms,
    };
    let (clicks, orders, customers, metrics, healthy) = futures::try_join!(
        clickstream(&ctx, options.clickstream_commits),
        orders(&ctx),
        customers(&ctx),
        metrics_v1(&ctx),
        healthy(&ctx),
    )?;
    let mut tables = vec![clicks, orders, customers, metrics, healthy];
    tables.sort_by(|x, y| x.identifier.cmp(&y.identifier));
    Ok(tables)
}

/// Figures kept while a history is replayed.
#[derive(Default)]
struct Tally {
    rows: u64,
    snapshots: u64,
    data_files: u64,
    position_delete_files: u64,
    equality_delete_files: u64,
    dangling_delete_files: u64,
}

impl Tally {
    fn finish(
        self,
        id: &TableId,
        description: &str,
        table: &LoadedTable,
        pyiceberg: bool,
    ) -> DemoTable {
        DemoTable {
            identifier: id.to_string(),
            description: description.to_string(),
            format_version: table.metadata.format_version() as u8,
            rows: self.rows,
            snapshots: self.snapshots,
            data_files: self.data_files,
            position_delete_files: self.position_delete_files,
            equality_delete_files: self.equality_delete_files,
            dangling_delete_files: self.dangling_delete_files,
            metadata_location: table.metadata_location.clone().unwrap_or_default(),
            pyiceberg_readable: pyiceberg,
        }
    }
}

/// A streaming writer: one tiny append every 75 minutes, each in its own manifest.
#[allow(
    clippy::too_many_lines,
    reason = "a replayed history reads best as one script"
)]
async fn clickstream(ctx: &Ctx<'_>, commits: u32) -> Result<DemoTable> {
    const EVENTS: [&str; 5] = ["view", "view", "click", "add_to_cart", "purchase"];
    const PAGES: [&str; 8] = [
        "/",
        "/search",
        "/product",
        "/cart",
        "/checkout",
        "/account",
        "/help",
        "/deals",
    ];
    const REFERRERS: [&str; 4] = ["google", "newsletter", "partner", "social"];
    let step_ms = 75 * MINUTE_MS;
    let first_ms = ctx.now_ms - i64::from(commits) * step_ms;
    let schema = Schema::builder()
        .with_fields(vec![
            req(1, "event_id", PrimitiveType::Long),
            req(2, "event_time", PrimitiveType::Timestamptz),
            req(3, "user_id", PrimitiveType::Long),
            req(4, "session_id", PrimitiveType::String),
            req(5, "event_type", PrimitiveType::String),
            opt(6, "page", PrimitiveType::String),
            opt(7, "referrer", PrimitiveType::String),
            opt(8, "duration_ms", PrimitiveType::Int),
            opt(9, "country", PrimitiveType::String),
        ])
        .build()
        .map_err(|e| Error::compute("clickstream schema", e))?;
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(2, "event_time_day", Transform::Day)
        .map_err(|e| Error::compute("clickstream spec", e))?
        .build();
    let (id, mut table) = ctx
        .create(
            "clickstream",
            NewTable::new(schema)
                .with_partition_spec(spec)
                // Streaming jobs usually turn this on; without it hundreds of metadata.json files
                // (each listing every snapshot) would dominate the lake's size.
                .with_property("write.metadata.delete-after-commit.enabled", "true")
                .with_property("write.parquet.compression-codec", "zstd"),
            first_ms - MINUTE_MS,
        )
        .await?;
    let mut rng = Rng::new(ctx.seed, 1);
    let mut tally = Tally::default();
    let mut next_id = 1i64;
    let interval_us = step_ms * 1000;
    for i in 0..i64::from(commits) {
        let n = 15 + rng.below(50) as usize;
        let stream_us = DATA_T0_US + i * interval_us;
        let mut ids = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        let mut users = Vec::with_capacity(n);
        let mut sessions = Vec::with_capacity(n);
        let mut events = Vec::with_capacity(n);
        let mut pages = Vec::with_capacity(n);
        let mut referrers = Vec::with_capacity(n);
        let mut durations = Vec::with_capacity(n);
        let mut countries = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(next_id);
            next_id += 1;
            let late = if rng.chance(8) { DAY_US } else { 0 };
            times.push(stream_us - rng.below(interval_us as u64) as i64 - late);
            let user = rng.below(5000) as i64;
            users.push(user);
            sessions.push(format!("s{:06x}-{}", user, i / 8));
            events.push(rng.pick(&EVENTS).to_string());
            pages.push((!rng.chance(3)).then(|| rng.pick(&PAGES).to_string()));
            referrers.push(rng.chance(60).then(|| rng.pick(&REFERRERS).to_string()));
            durations.push((!rng.chance(10)).then(|| 50 + rng.below(30_000) as i32));
            countries.push(Some(rng.pick(&COUNTRIES).to_string()));
        }
        let b = batch(vec![
            ("event_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("event_time", ts_array(times)),
            ("user_id", Arc::new(Int64Array::from(users))),
            ("session_id", Arc::new(StringArray::from(sessions))),
            ("event_type", Arc::new(StringArray::from(events))),
            ("page", Arc::new(StringArray::from(pages))),
            ("referrer", Arc::new(StringArray::from(referrers))),
            ("duration_ms", Arc::new(Int32Array::from(durations))),
            ("country", Arc::new(StringArray::from(countries))),
        ])?;
        let written = write_data_files(&table, [b]).await?;
        tally.rows += written.records;
        tally.data_files += written.files.len() as u64;
        table = ctx
            .commit(
                SnapshotProducer::new(&table).add_data_files(written.files),
                first_ms + i * step_ms,
            )
            .await?;
        tally.snapshots += 1;
    }
    Ok(tally.finish(
        &id,
        "streaming appends: hundreds of tiny files, manifests and snapshots",
        &table,
        true,
    ))
}

/// One order row.
#[derive(Clone)]
struct OrderRow {
    order_id: i64,
    customer_id: i64,
    day: i32,
    status: &'static str,
    amount_cents: i128,
    quantity: i32,
    updated_us: i64,
}

fn orders_batch(rows: &[OrderRow]) -> Result<RecordBatch> {
    let amounts = Decimal128Array::from(rows.iter().map(|o| o.amount_cents).collect::<Vec<_>>())
        .with_precision_and_scale(12, 2)
        .map_err(|e| Error::compute("orders amounts", e))?;
    batch(vec![
        (
            "order_id",
            Arc::new(Int64Array::from(
                rows.iter().map(|o| o.order_id).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "customer_id",
            Arc::new(Int64Array::from(
                rows.iter().map(|o| o.customer_id).collect::<Vec<_>>(),
            )),
        ),
        (
            "order_date",
            Arc::new(Date32Array::from(
                rows.iter()
                    .map(|o| DATA_T0_DAYS + o.day)
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "status",
            Arc::new(StringArray::from(
                rows.iter().map(|o| o.status).collect::<Vec<_>>(),
            )),
        ),
        ("amount", Arc::new(amounts)),
        (
            "quantity",
            Arc::new(Int32Array::from(
                rows.iter().map(|o| o.quantity).collect::<Vec<_>>(),
            )),
        ),
        (
            "updated_at",
            ts_array(rows.iter().map(|o| o.updated_us).collect()),
        ),
    ])
}

/// A live data file of `lake.orders`, as the generator tracks it.
struct OrderFile {
    path: String,
    day: i32,
    rows: Vec<OrderRow>,
    deleted: BTreeSet<i64>,
}

/// Merge-on-read: daily loads, then cancellations and updates as position deletes, then a
/// metadata-only delete of the two oldest days that leaves their position deletes dangling.
#[allow(
    clippy::too_many_lines,
    reason = "a replayed history reads best as one script"
)]
async fn orders(ctx: &Ctx<'_>) -> Result<DemoTable> {
    const DAYS: i32 = 20;
    const DELTAS: i64 = 12;
    let schema = Schema::builder()
        .with_fields(vec![
            req(1, "order_id", PrimitiveType::Long),
            req(2, "customer_id", PrimitiveType::Long),
            req(3, "order_date", PrimitiveType::Date),
            req(4, "status", PrimitiveType::String),
            req(
                5,
                "amount",
                PrimitiveType::Decimal {
                    precision: 12,
                    scale: 2,
                },
            ),
            req(6, "quantity", PrimitiveType::Int),
            req(7, "updated_at", PrimitiveType::Timestamptz),
        ])
        .build()
        .map_err(|e| Error::compute("orders schema", e))?;
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(3, "order_date_day", Transform::Day)
        .map_err(|e| Error::compute("orders spec", e))?
        .build();
    let first_ms = ctx.now_ms - 34 * DAY_MS;
    let (id, mut table) = ctx
        .create(
            "orders",
            NewTable::new(schema)
                .with_partition_spec(spec)
                .with_properties([
                    ("write.delete.mode", "merge-on-read"),
                    ("write.update.mode", "merge-on-read"),
                    ("write.merge.mode", "merge-on-read"),
                ]),
            first_ms - MINUTE_MS,
        )
        .await?;
    let mut rng = Rng::new(ctx.seed, 2);
    let mut tally = Tally::default();
    // In write order: file paths hold random UUIDs, so ordering by path would make the choices
    // below (and the data) differ between builds.
    let mut files: Vec<OrderFile> = Vec::new();
    let mut next_order = 100_000i64;
    let new_order = |rng: &mut Rng, next: &mut i64, day: i32| {
        *next += 1;
        OrderRow {
            order_id: *next,
            customer_id: 1 + rng.below(2000) as i64,
            day,
            status: "placed",
            amount_cents: 500 + i128::from(rng.below(50_000)),
            quantity: 1 + rng.below(5) as i32,
            updated_us: DATA_T0_US + i64::from(day) * DAY_US + rng.below(DAY_US as u64) as i64,
        }
    };

    // Daily loads; each also carries late orders of the previous day.
    for day in 0..DAYS {
        let mut rows: Vec<OrderRow> = (0..150 + rng.below(40))
            .map(|_| new_order(&mut rng, &mut next_order, day))
            .collect();
        if day > 0 {
            rows.extend(
                (0..10 + rng.below(10)).map(|_| new_order(&mut rng, &mut next_order, day - 1)),
            );
        }
        let written = write_data_files(&table, [orders_batch(&rows)?]).await?;
        track_order_files(&mut files, &written.files, &rows);
        tally.data_files += written.files.len() as u64;
        table = ctx
            .commit(
                SnapshotProducer::new(&table).add_data_files(written.files),
                first_ms + i64::from(day) * DAY_MS,
            )
            .await?;
        tally.snapshots += 1;
    }

    // Cancellations (delete) and status changes (overwrite: delete + new row version).
    let deltas_ms = first_ms + i64::from(DAYS) * DAY_MS;
    let mut deletes_per_day: BTreeMap<i32, u64> = BTreeMap::new();
    for k in 0..DELTAS {
        let live_days: Vec<i32> = files
            .iter()
            .map(|f| f.day)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut days = BTreeSet::new();
        // The first two deltas touch the two oldest days, whose files are dropped at the end.
        if k < 2 {
            days.insert(k as i32);
        }
        while days.len() < 3 + rng.below(4) as usize {
            days.insert(live_days[rng.below(live_days.len() as u64) as usize]);
        }
        let mut targets: Vec<(String, Vec<i64>)> = Vec::new();
        let mut updated: Vec<OrderRow> = Vec::new();
        for day in days {
            let candidates: Vec<usize> =
                (0..files.len()).filter(|i| files[*i].day == day).collect();
            let file = &mut files[candidates[rng.below(candidates.len() as u64) as usize]];
            let path = file.path.clone();
            let mut positions = Vec::new();
            for _ in 0..=rng.below(6) {
                let pos = rng.below(file.rows.len() as u64) as i64;
                if file.deleted.insert(pos) {
                    positions.push(pos);
                    if k % 2 == 1 {
                        let mut o = file.rows[pos as usize].clone();
                        o.status = if rng.chance(70) {
                            "shipped"
                        } else {
                            "returned"
                        };
                        o.updated_us += DAY_US;
                        updated.push(o);
                    }
                }
            }
            if !positions.is_empty() {
                targets.push((path, positions));
                *deletes_per_day.entry(day).or_default() += 1;
            }
        }
        let deletes = write_position_deletes(&table, &targets).await?;
        tally.position_delete_files += deletes.files.len() as u64;
        let mut producer = SnapshotProducer::new(&table).add_delete_files(deletes.files);
        if !updated.is_empty() {
            let written = write_data_files(&table, [orders_batch(&updated)?]).await?;
            track_order_files(&mut files, &written.files, &updated);
            tally.data_files += written.files.len() as u64;
            producer = producer.add_data_files(written.files);
        }
        table = ctx.commit(producer, deltas_ms + k * DAY_MS).await?;
        tally.snapshots += 1;
    }

    // `DELETE FROM orders WHERE order_date < <day 2>` removes whole files, metadata only.
    let dropped: Vec<String> = files
        .iter()
        .filter(|f| f.day < 2)
        .map(|f| f.path.clone())
        .collect();
    files.retain(|f| f.day >= 2);
    tally.data_files -= dropped.len() as u64;
    tally.dangling_delete_files = deletes_per_day.range(..2).map(|(_, n)| n).sum();
    table = ctx
        .commit(
            SnapshotProducer::new(&table).delete_data_files(dropped),
            deltas_ms + DELTAS * DAY_MS,
        )
        .await?;
    tally.snapshots += 1;
    tally.rows = files
        .iter()
        .map(|f| (f.rows.len() - f.deleted.len()) as u64)
        .sum();
    Ok(tally.finish(
        &id,
        "merge-on-read: position deletes on many partitions, some dangling",
        &table,
        true,
    ))
}

/// Record which rows went to which file (one file per partition, rows in input order).
fn track_order_files(
    files: &mut Vec<OrderFile>,
    written: &[iceberg::spec::DataFile],
    rows: &[OrderRow],
) {
    for f in written {
        let day = rows
            .iter()
            .map(|o| o.day)
            .find(|d| {
                f.partition()
                    .fields()
                    .first()
                    .and_then(Option::as_ref)
                    .and_then(iceberg::spec::Literal::as_primitive_literal)
                    == Some(iceberg::spec::PrimitiveLiteral::Int(DATA_T0_DAYS + d))
            })
            .unwrap_or(-1);
        let file_rows: Vec<OrderRow> = rows.iter().filter(|o| o.day == day).cloned().collect();
        files.push(OrderFile {
            path: f.file_path().to_string(),
            day,
            rows: file_rows,
            deleted: BTreeSet::new(),
        });
    }
}

/// `(customer_id, name, email, country, tier, signup_date, updated_at)`.
type CustomerRow = (
    i64,
    String,
    Option<String>,
    Option<String>,
    String,
    Option<i32>,
    i64,
);

/// CDC upserts: every commit deletes changed keys with an equality delete file and inserts the
/// new versions; some deleted customers come back later.
#[allow(
    clippy::too_many_lines,
    reason = "a replayed history reads best as one script"
)]
async fn customers(ctx: &Ctx<'_>) -> Result<DemoTable> {
    const TIERS: [&str; 4] = ["free", "free", "pro", "enterprise"];
    const UPSERTS: i64 = 14;
    let schema = Schema::builder()
        .with_fields(vec![
            req(1, "customer_id", PrimitiveType::Long),
            req(2, "name", PrimitiveType::String),
            opt(3, "email", PrimitiveType::String),
            opt(4, "country", PrimitiveType::String),
            req(5, "tier", PrimitiveType::String),
            opt(6, "signup_date", PrimitiveType::Date),
            req(7, "updated_at", PrimitiveType::Timestamptz),
        ])
        .with_identifier_field_ids([1])
        .build()
        .map_err(|e| Error::compute("customers schema", e))?;
    let first_ms = ctx.now_ms - 8 * DAY_MS;
    let (id, mut table) = ctx
        .create(
            "customers",
            NewTable::new(schema).with_properties([
                ("write.upsert.enabled", "true"),
                ("write.delete.mode", "merge-on-read"),
                ("write.update.mode", "merge-on-read"),
            ]),
            first_ms - MINUTE_MS,
        )
        .await?;
    let mut rng = Rng::new(ctx.seed, 3);
    let mut tally = Tally::default();
    let customer = |rng: &mut Rng, cid: i64, version: i64| {
        (
            cid,
            format!("Customer {cid}"),
            (!rng.chance(5)).then(|| format!("c{cid}.v{version}@example.com")),
            Some(rng.pick(&COUNTRIES).to_string()),
            rng.pick(&TIERS).to_string(),
            Some(DATA_T0_DAYS - 400 + (cid % 400) as i32),
            DATA_T0_US + version * DAY_US / 2 + rng.below(3_600_000_000) as i64,
        )
    };
    let to_batch = |rows: Vec<CustomerRow>| {
        batch(vec![
            (
                "customer_id",
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "name",
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
                )),
            ),
            (
                "email",
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.2.clone()).collect::<Vec<_>>(),
                )),
            ),
            (
                "country",
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.3.clone()).collect::<Vec<_>>(),
                )),
            ),
            (
                "tier",
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.4.clone()).collect::<Vec<_>>(),
                )),
            ),
            (
                "signup_date",
                Arc::new(Date32Array::from(
                    rows.iter().map(|r| r.5).collect::<Vec<_>>(),
                )),
            ),
            ("updated_at", ts_array(rows.iter().map(|r| r.6).collect())),
        ])
    };

    let mut live: BTreeSet<i64> = (1..=2000).collect();
    let initial = live.iter().map(|c| customer(&mut rng, *c, 0)).collect();
    let written = write_data_files(&table, [to_batch(initial)?]).await?;
    tally.data_files += written.files.len() as u64;
    table = ctx
        .commit(
            SnapshotProducer::new(&table).add_data_files(written.files),
            first_ms,
        )
        .await?;
    tally.snapshots += 1;

    let mut gone: BTreeSet<i64> = BTreeSet::new();
    for k in 1..=UPSERTS {
        let ids: Vec<i64> = live.iter().copied().collect();
        let mut changed = BTreeSet::new();
        for _ in 0..20 + rng.below(40) {
            changed.insert(ids[rng.below(ids.len() as u64) as usize]);
        }
        let mut removed = BTreeSet::new();
        // Every third commit is deletions only (a `delete` snapshot).
        let delete_only = k % 3 == 0;
        for _ in 0..if delete_only { 15 } else { rng.below(10) } {
            let c = ids[rng.below(ids.len() as u64) as usize];
            if !changed.contains(&c) {
                removed.insert(c);
            }
        }
        if delete_only {
            removed.append(&mut changed);
        }
        let mut back = BTreeSet::new();
        if !delete_only && !gone.is_empty() && rng.chance(50) {
            let g: Vec<i64> = gone.iter().copied().collect();
            for _ in 0..=rng.below(4) {
                back.insert(g[rng.below(g.len() as u64) as usize]);
            }
        }
        // Upsert semantics (Flink's): every written key is deleted first, then inserted.
        let keys: Vec<i64> = changed
            .iter()
            .chain(&removed)
            .chain(&back)
            .copied()
            .collect();
        let key_batch = batch(vec![(
            "customer_id",
            Arc::new(Int64Array::from(keys)) as ArrayRef,
        )])?;
        let deletes = write_equality_deletes(&table, &["customer_id"], [key_batch]).await?;
        tally.equality_delete_files += deletes.files.len() as u64;
        let mut producer = SnapshotProducer::new(&table).add_delete_files(deletes.files);
        let inserts: Vec<i64> = changed.iter().chain(&back).copied().collect();
        if !inserts.is_empty() {
            let rows = inserts.iter().map(|c| customer(&mut rng, *c, k)).collect();
            let written = write_data_files(&table, [to_batch(rows)?]).await?;
            tally.data_files += written.files.len() as u64;
            producer = producer.add_data_files(written.files);
        }
        for c in &removed {
            live.remove(c);
            gone.insert(*c);
        }
        for c in &back {
            live.insert(*c);
            gone.remove(c);
        }
        table = ctx.commit(producer, first_ms + k * DAY_MS / 2).await?;
        tally.snapshots += 1;
    }
    tally.rows = live.len() as u64;
    Ok(tally.finish(
        &id,
        "CDC upserts: equality delete files, deleted keys re-inserted later",
        &table,
        false,
    ))
}

/// A legacy v1 table: daily appends half a year ago, gzip, no column statistics.
async fn metrics_v1(ctx: &Ctx<'_>) -> Result<DemoTable> {
    const HOSTS: [&str; 8] = [
        "web-1", "web-2", "web-3", "db-1", "db-2", "cache-1", "queue-1", "batch-1",
    ];
    const METRICS: [&str; 5] = ["cpu", "mem", "disk", "net_in", "net_out"];
    const COMMITS: i64 = 30;
    let schema = Schema::builder()
        .with_fields(vec![
            req(1, "host", PrimitiveType::String),
            req(2, "metric", PrimitiveType::String),
            req(3, "ts", PrimitiveType::Timestamptz),
            req(4, "value", PrimitiveType::Double),
            opt(5, "unit", PrimitiveType::String),
        ])
        .build()
        .map_err(|e| Error::compute("metrics schema", e))?;
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(3, "ts_day", Transform::Day)
        .map_err(|e| Error::compute("metrics spec", e))?
        .build();
    let first_ms = ctx.now_ms - 200 * DAY_MS;
    let (id, mut table) = ctx
        .create(
            "metrics_v1",
            NewTable::new(schema)
                .with_partition_spec(spec)
                .with_format_version(FormatVersion::V1)
                .with_properties([
                    ("write.metadata.metrics.default", "none"),
                    ("write.parquet.compression-codec", "gzip"),
                ]),
            first_ms - MINUTE_MS,
        )
        .await?;
    let mut rng = Rng::new(ctx.seed, 4);
    let mut tally = Tally::default();
    for day in 0..COMMITS {
        let (mut hosts, mut metrics, mut times, mut values, mut units) =
            (vec![], vec![], vec![], vec![], vec![]);
        for host in HOSTS {
            for metric in METRICS {
                for sample in 0..8 {
                    hosts.push(host);
                    metrics.push(metric);
                    times.push(
                        DATA_T0_US - 180 * DAY_US + day * DAY_US + sample * 3 * 3_600_000_000,
                    );
                    values.push(rng.below(10_000) as f64 / 100.0);
                    units.push(match metric {
                        "cpu" | "mem" | "disk" => Some("percent"),
                        _ => (!rng.chance(20)).then_some("bytes"),
                    });
                }
            }
        }
        let b = batch(vec![
            ("host", Arc::new(StringArray::from(hosts)) as ArrayRef),
            ("metric", Arc::new(StringArray::from(metrics))),
            ("ts", ts_array(times)),
            ("value", Arc::new(Float64Array::from(values))),
            ("unit", Arc::new(StringArray::from(units))),
        ])?;
        let written = write_data_files(&table, [b]).await?;
        tally.rows += written.records;
        tally.data_files += written.files.len() as u64;
        table = ctx
            .commit(
                SnapshotProducer::new(&table).add_data_files(written.files),
                first_ms + day * DAY_MS,
            )
            .await?;
        tally.snapshots += 1;
    }
    Ok(tally.finish(
        &id,
        "format v1, old snapshots, gzip, no column statistics",
        &table,
        true,
    ))
}

/// The control: three files near the 1 MiB target, one snapshot, zstd, sorted by `reading_id`.
async fn healthy(ctx: &Ctx<'_>) -> Result<DemoTable> {
    const FILES: i64 = 3;
    /// Rows per file: with incompressible columns this lands at ~85-95% of 1 MiB.
    const ROWS_PER_FILE: i64 = 26_000;
    let schema = Schema::builder()
        .with_fields(vec![
            req(1, "reading_id", PrimitiveType::Long),
            req(2, "sensor", PrimitiveType::String),
            req(3, "read_at", PrimitiveType::Timestamptz),
            req(4, "value", PrimitiveType::Double),
            req(5, "checksum", PrimitiveType::Long),
        ])
        .build()
        .map_err(|e| Error::compute("healthy schema", e))?;
    let order = SortOrder::builder()
        .with_order_id(1)
        .with_sort_field(
            SortField::builder()
                .source_id(1)
                .transform(Transform::Identity)
                .direction(SortDirection::Ascending)
                .null_order(NullOrder::First)
                .build(),
        )
        .build(&schema)
        .map_err(|e| Error::compute("healthy sort order", e))?;
    let (id, table) = ctx
        .create(
            "healthy",
            NewTable::new(schema)
                .with_sort_order(order)
                .with_properties([
                    ("write.target-file-size-bytes", "1048576"),
                    ("write.parquet.compression-codec", "zstd"),
                ]),
            ctx.now_ms - HOUR_MS - MINUTE_MS,
        )
        .await?;
    let mut rng = Rng::new(ctx.seed, 5);
    let mut tally = Tally::default();
    let mut files = Vec::new();
    for f in 0..FILES {
        let first = f * ROWS_PER_FILE;
        let ids: Vec<i64> = (first..first + ROWS_PER_FILE).collect();
        let b = batch(vec![
            (
                "reading_id",
                Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
            ),
            (
                "sensor",
                Arc::new(StringArray::from(
                    ids.iter()
                        .map(|_| format!("{:012x}", rng.next_u64() >> 16))
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "read_at",
                ts_array(ids.iter().map(|i| DATA_T0_US + i * 1_000_000).collect()),
            ),
            (
                "value",
                Arc::new(Float64Array::from(
                    ids.iter()
                        .map(|_| rng.next_u64() as f64 / u64::MAX as f64)
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "checksum",
                Arc::new(Int64Array::from(
                    ids.iter()
                        .map(|_| rng.next_u64() as i64)
                        .collect::<Vec<_>>(),
                )),
            ),
        ])?;
        // One call per file: each stays under the target, so none rolls into a small remainder.
        let written = write_data_files(&table, [b]).await?;
        tally.rows += written.records;
        files.extend(written.files);
    }
    tally.data_files = files.len() as u64;
    let table = ctx
        .commit(
            SnapshotProducer::new(&table).add_data_files(files),
            ctx.now_ms - HOUR_MS,
        )
        .await?;
    tally.snapshots = 1;
    Ok(tally.finish(
        &id,
        "the control: a few well-sized files, one snapshot",
        &table,
        true,
    ))
}
