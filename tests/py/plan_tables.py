"""Iceberg tables for the hand-built render goldens, built from the plans themselves.

`golden/render/plans/<case>.json` (written by `cryo-core/tests/it/render.rs`) holds the plan each
`golden/render/spark/<case>.json` was rendered from. For every planned table this module derives:

- the schema: every column a partition predicate names, with the predicate's `column_type`
  (`address.zip` is the nested field `zip` of struct `address`), plus the columns that statistics,
  sort and z-order steps name (no type in the plan: `long`), plus `cryo_row_id` / `cryo_payload`;
- the partition spec (spec 0): each `(column, transform)` the predicates use, in first-seen order;
- rows: for each planned partition rows that satisfy all of its predicates, plus background
  partitions; written as `APPENDS` separate appends (`ROWS_PER_FILE` rows per partition each) so every
  partition has that many data files (`APPENDS_NO_REWRITE` when the plan rewrites nothing);
- position deletes (merge-on-read DELETEs, one file per partition each) where the plan rewrites them;
- a table sort order where a sort strategy relies on it; an old orphan file where orphans are removed.

For Spark, tables are created with Iceberg's Java API through py4j (Spark DDL cannot declare `uuid` or
`fixed[n]`), in the catalog Spark resolves the statements against; namespaces are created with Spark SQL.
For Trino (`model_table(..., engine="trino")`, tests/py/test_trino_peer.py builds the tables), `time` and
nanosecond timestamp columns stay (the latter make the table format v3) and only the fixed partition
field is left out (TRINO_FIXED_PARTITION).
What Iceberg's Spark integration cannot hold is left out, with a note: `time` columns (Spark's Iceberg
reader refuses them) and nanosecond timestamps (format v3; Spark 3.5 has no such type). The goldens
render no statement that needs them (those chunks are skipped with a reason). A `fixed[n]` column is
created but not partitioned on (see FIXED_PARTITION); its predicate still runs against the column.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

UTC = dt.timezone.utc
ROW_ID = "cryo_row_id"
PAYLOAD = "cryo_payload"
APPENDS = 5  # rewrite_data_files' min-input-files in the goldens: every partition gets that many files
APPENDS_NO_REWRITE = 3  # expiry/orphans/manifests/statistics only: a few snapshots are enough
# Rows per partition and append (one data file): a DELETE takes one of them, so merge-on-read writes a
# position delete (a DELETE that empties a data file drops the file instead).
ROWS_PER_FILE = 2
BACKGROUND = 2
TIME_TRANSFORMS = {"year", "month", "day", "hour"}
UNSUPPORTED_TYPES = {
    "time": "Iceberg's Spark integration refuses time columns (Spark has no TIME type)",
    "timestamp_ns": "nanosecond timestamps need format v3 and Spark 3.5 has no such type",
    "timestamptz_ns": "nanosecond timestamps need format v3 and Spark 3.5 has no such type",
}
# Observed here (scripts/README.md, Gotchas): a table with a fixed[n] partition field reads back empty in
# DuckDB 1.5.5 (iceberg_scan returns no rows, iceberg_metadata no entries, no error), so the read-back
# could not compare anything. (Binary partitions read fine and stay; see BYTES_PARTITION_BUG_FIXED_IN.)
FIXED_PARTITION = "DuckDB 1.5.5 reads no rows at all from a table partitioned by a fixed column"
# Observed on Trino 483 (tests/py/test_trino_peer.py proves it): every scan of a table with a fixed[n]
# partition field fails in split generation (IcebergTypes.convertIcebergValueToTrino: "Unsupported iceberg
# type: fixed[2]"), so no statement could run on such a table at all.
TRINO_FIXED_PARTITION = "Trino cannot scan a table partitioned by a fixed column (Unsupported iceberg type: fixed[n])"
NANO_TYPES = {"timestamp_ns", "timestamptz_ns"}


class NanoTimestamp(str):
    """A nanosecond timestamp as its text (`2024-02-29 10:15:30.123456789`): Python's datetime stops at
    microseconds. Ordered and compared as text (fixed width)."""
# Iceberg before 1.11.0 writes wrong manifest-list bounds for binary/fixed partition values whenever it
# rewrites a manifest with existing entries (PartitionData hands out the Avro reader's reused byte[];
# apache/iceberg#15128, fixed by #15127 in 1.11.0): after an earlier rewrite in the same table, a filter on
# such a partition value prunes the manifest that holds it, and Spark's own SELECT finds no rows either.
BYTES_PARTITION_BUG_FIXED_IN = (1, 11, 0)
ORPHAN_NAME = "cryo-planted-orphan.parquet"


def quote(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def quoted(*parts: str) -> str:
    return ".".join(quote(p) for p in parts)


# ------------------------------------------------------------------------------------------------
# The model: what the plan says about one table
# ------------------------------------------------------------------------------------------------


@dataclass
class TableModel:
    namespace: list[str]
    name: str
    columns: dict[str, str] = field(default_factory=dict)  # dotted path -> Iceberg type string
    partition: list[tuple[str, str]] = field(default_factory=list)  # (column, transform)
    partitions: list[list[dict]] = field(default_factory=list)  # each planned partition's predicates
    notes: list[str] = field(default_factory=list)
    position_delete_commits: int = 0
    needs_sort_order: bool = False
    rewrites: bool = False  # a data-file or delete rewrite is planned
    orphans: list[dict] = field(default_factory=list)  # remove_orphan_files params
    format_version: int = 2  # 3 when a column needs it (nanosecond timestamps)

    def describe(self) -> dict:
        return {
            "columns": self.columns,
            "partition": [f"{t}({c})" for c, t in self.partition],
            "planned_partitions": len(self.partitions),
            "position_delete_commits": self.position_delete_commits,
            "sort_order": self.needs_sort_order,
            "format_version": self.format_version,
            "notes": self.notes,
        }


def _sort_column(spec: str) -> str:
    """The column of a plan sort spec such as `order id asc nulls first` (as the renderer strips it)."""
    rest = spec.strip()
    rest = re.sub(r"(?i)\s+nulls\s+(first|last)$", "", rest)
    rest = re.sub(r"(?i)\s+(asc|desc)$", "", rest)
    return rest.strip()


def model_table(plan_table: dict, engine: str = "spark") -> TableModel:
    """The table a plan implies, as the engine (`spark` or `trino`) can hold it."""
    if engine not in ("spark", "trino"):
        raise ValueError(f"engine {engine}")
    unsupported = UNSUPPORTED_TYPES if engine == "spark" else {}
    fixed_partition = FIXED_PARTITION if engine == "spark" else TRINO_FIXED_PARTITION
    m = TableModel(list(plan_table["table"]["namespace"]), plan_table["table"]["name"])
    seen_fields: dict[tuple[str, str], str] = {}
    untyped: list[str] = []
    for step in plan_table["steps"]:
        params = step["params"]
        op = step["operation"]
        for chunk in step["chunks"]:
            for part in chunk["partitions"]:
                preds = []
                for pred in part["predicate"]:
                    col, ty, transform = pred["column"], pred["column_type"], pred["transform"]
                    if ty in unsupported:
                        note = f"column {col} ({ty}) left out: {unsupported[ty]}"
                        if note not in m.notes:
                            m.notes.append(note)
                        continue
                    if m.columns.setdefault(col, ty) != ty:
                        raise ValueError(f"{m.name}: column {col} is {m.columns[col]} and {ty} in the plan")
                    preds.append(pred)
                    if ty.startswith("fixed["):
                        note = f"partition field {transform}({col}) left out (the column stays): {fixed_partition}"
                        if note not in m.notes:
                            m.notes.append(note)
                        continue
                    # Iceberg refuses two time transforms (or two identical transforms) of one column
                    # ("Cannot add redundant partition").
                    key = (col, "time" if transform in TIME_TRANSFORMS else transform)
                    if key not in seen_fields:
                        seen_fields[key] = transform
                        m.partition.append((col, transform))
                    elif seen_fields[key] != transform:
                        note = (
                            f"partition field {transform}({col}) left out: Iceberg allows one time transform per column "
                            f"and {seen_fields[key]}({col}) is already in the spec"
                        )
                        if note not in m.notes:
                            m.notes.append(note)
                if not any(_same_partition(preds, p) for p in m.partitions):
                    m.partitions.append(preds)
        if op == "compute_statistics":
            untyped += params.get("columns", [])
        if op == "rewrite_data_files":
            strategy = params["strategy"]
            cols = strategy.get("columns", [])
            if strategy["kind"] == "sort" and not cols:
                m.needs_sort_order = True
            untyped += [_sort_column(c) for c in cols] if strategy["kind"] == "sort" else [c.strip() for c in cols]
        if op in ("rewrite_data_files", "convert_equality_deletes", "rewrite_position_deletes"):
            m.rewrites = True
        if op == "rewrite_position_deletes":
            m.position_delete_commits = max(m.position_delete_commits, int(params["min_input_files"]), 2)
        if op == "remove_orphan_files":
            m.orphans.append(params)
    for col in untyped:
        m.columns.setdefault(col, "long")
    for col in (ROW_ID, PAYLOAD):
        if col in m.columns:
            raise ValueError(f"{m.name}: the plan uses the test's own column {col}")
    m.columns[ROW_ID] = "long"
    m.columns[PAYLOAD] = "string"
    if any(t in NANO_TYPES for t in m.columns.values()):
        m.format_version = 3
    return m


def _same_partition(a: list[dict], b: list[dict]) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------


def literal(lit: dict, column_type: str) -> Any:
    """The Python value of a plan literal for a column of `column_type`; ValueError if malformed."""
    kind, v = lit["type"], lit["value"]
    if column_type in NANO_TYPES and kind in ("timestamp", "timestamp_tz"):
        return _nanos(v)
    if column_type == "time" and kind == "string":
        return dt.time.fromisoformat(v)
    if kind == "boolean":
        return bool(v)
    if kind == "integer":
        return int(v)
    if kind == "float":
        return float(v)
    if kind == "decimal":
        return decimal.Decimal(v)
    if kind == "date":
        return dt.date.fromisoformat(v)
    if kind == "timestamp":
        return dt.datetime.fromisoformat(v)
    if kind == "timestamp_tz":
        return dt.datetime.fromisoformat(v).replace(tzinfo=UTC)
    if kind == "string":
        if column_type == "binary" or column_type.startswith("fixed["):
            return bytes.fromhex(v)
        return str(v)
    raise ValueError(f"literal type {kind}")


def _nanos(text: str) -> NanoTimestamp:
    """`2024-02-29 10:15:30.123456789` (any fraction up to 9 digits) as fixed-width text; ValueError if malformed."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?", text)
    if not m:
        raise ValueError(f"nanosecond timestamp {text!r}")
    dt.datetime.fromisoformat(m.group(1))  # a real date and time
    return NanoTimestamp(m.group(1).replace("T", " ") + "." + (m.group(2) or "").ljust(9, "0"))


def default_value(ty: str, k: int) -> Any:
    """A value of type `ty` for background/unconstrained slot `k` (stable per slot, distinct per slot)."""
    if ty == "boolean":
        return k % 2 == 1
    if ty == "int":
        return 100 + k
    if ty == "long":
        return 1000 + k
    if ty in ("float", "double"):
        return k + 0.25
    if ty.startswith("decimal("):
        scale = int(ty[len("decimal(") : -1].split(",")[1])
        return decimal.Decimal(k * 10**scale + 5).scaleb(-scale)
    if ty == "string":
        return f"cryo-{k}"
    if ty == "uuid":
        return str(uuid.UUID(int=k + 1))
    if ty == "binary":
        return bytes([k % 256, 0xAB])
    if ty.startswith("fixed["):
        return bytes([k % 256]) * int(ty[len("fixed[") : -1])
    if ty == "date":
        return dt.date(2026, 4, 1) + dt.timedelta(days=k)
    if ty == "timestamp":  # a day and an hour apart: distinct under day and hour transforms
        return dt.datetime(2026, 4, 1, 12) + dt.timedelta(days=k, hours=k)
    if ty == "timestamptz":
        return dt.datetime(2026, 4, 1, 12, tzinfo=UTC) + dt.timedelta(days=k, hours=k)
    if ty == "time":
        return dt.time(k % 24, k % 60, 30)
    if ty in NANO_TYPES:
        base = dt.datetime(2026, 4, 1, 12) + dt.timedelta(days=k, hours=k)
        return NanoTimestamp(base.strftime("%Y-%m-%d %H:%M:%S") + f".{k + 1:09d}")
    raise ValueError(f"no default for {ty}")


def _murmur3_32(data: bytes) -> int:
    """MurmurHash3 x86 32-bit, seed 0: the hash of Iceberg's bucket transform (spec, Appendix B)."""
    c1, c2, m = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = 0
    tail = len(data) - len(data) % 4
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
        h = ((h << 13) | (h >> 19)) & m
        h = (h * 5 + 0xE6546B64) & m
    k = int.from_bytes(data[tail:], "little") if tail < len(data) else 0
    if tail < len(data):
        k = (k * c1) & m
        k = ((k << 15) | (k >> 17)) & m
        k = (k * c2) & m
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _bucket(n: int, value: Any, ty: str) -> int:
    """Iceberg's ``bucket[n]``: ints and longs hash as 8-byte little-endian longs, strings as UTF-8
    (written out here: the Spark 4.1 venv has no PyIceberg)."""
    if ty in ("int", "long"):
        data = int(value).to_bytes(8, "little", signed=True)
    elif ty == "string":
        data = value.encode("utf-8")
    else:
        raise ValueError(f"bucket of {ty}")
    return (_murmur3_32(data) & 0x7FFFFFFF) % n


def _truncate(width: int, value: Any) -> Any:
    if isinstance(value, str):
        return value[:width]
    if isinstance(value, int):
        return value - (value % width)
    raise ValueError(f"truncate of {type(value)}")


def _holds(value: Any, pred: dict) -> bool:
    kind = pred["kind"]
    ty = pred["column_type"]
    if kind["kind"] == "is_null":
        return value is None
    if value is None:
        return False
    transform = pred["transform"]
    if kind["kind"] == "eq":
        want = literal(kind["value"], ty)
        if transform.startswith("truncate["):
            return _truncate(int(transform[9:-1]), value) == want
        return value == want
    if kind["kind"] == "range":
        return literal(kind["lower"], ty) <= value < literal(kind["upper"], ty)
    if kind["kind"] == "starts_with":
        return value.startswith(kind["prefix"])
    if kind["kind"] == "bucket":
        return _bucket(int(kind["buckets"]), value, ty) == int(kind["value"])
    raise ValueError(f"predicate kind {kind['kind']}")


def partition_row(preds: list[dict], columns: dict[str, str], slot: int, notes: list[str]) -> dict[str, Any]:
    """One row for a planned partition: every predicate holds; other columns get slot defaults."""
    by_col: dict[str, list[dict]] = {}
    for p in preds:
        try:
            if p["kind"]["kind"] not in ("eq", "range", "is_null", "starts_with", "bucket"):
                raise ValueError(f"predicate kind {p['kind']['kind']}")
            keys = {"eq": ("value",), "range": ("lower", "upper")}.get(p["kind"]["kind"], ())
            for key in keys:
                literal(p["kind"][key], p["column_type"])
        except ValueError as e:
            note = f"predicate on {p['column']} not usable for a row ({e}): the row leaves it unconstrained"
            if note not in notes:
                notes.append(note)
            continue
        by_col.setdefault(p["column"], []).append(p)
    row = {c: default_value(t, slot) for c, t in columns.items() if c not in (ROW_ID, PAYLOAD)}
    for col, ps in by_col.items():
        ty = columns[col]
        kinds = {p["kind"]["kind"] for p in ps}
        candidates: list[Any]
        if "eq" in kinds:
            candidates = [literal(p["kind"]["value"], ty) for p in ps if p["kind"]["kind"] == "eq" and p["transform"] == "identity"]
            candidates += [literal(p["kind"]["value"], ty) for p in ps if p["kind"]["kind"] == "eq"]
        elif "is_null" in kinds:
            candidates = [None]
        elif "range" in kinds:
            candidates = [max(literal(p["kind"]["lower"], ty) for p in ps if p["kind"]["kind"] == "range")]
        elif "starts_with" in kinds:
            candidates = [next(p["kind"]["prefix"] for p in ps if p["kind"]["kind"] == "starts_with") + "-cryo"]
        else:  # bucket only
            candidates = [slot * 1000 + i for i in range(1000)]
        found = next((c for c in candidates if all(_holds(c, p) for p in ps)), _MISSING)
        if found is _MISSING:
            raise ValueError(f"no value of {col} satisfies {ps}")
        row[col] = found
    return row


_MISSING = object()


def rows_for(model: TableModel) -> list[dict[str, Any]]:
    """Batches of rows (one per append): one row per planned partition and per background slot in each."""
    templates = [partition_row(p, model.columns, 10 + i, model.notes) for i, p in enumerate(model.partitions)]
    templates += [partition_row([], model.columns, k, model.notes) for k in range(BACKGROUND + (0 if model.partitions else 1))]
    batches = []
    row_id = 0
    for a in range(APPENDS if model.rewrites else APPENDS_NO_REWRITE):
        batch = []
        for t in templates:
            for _ in range(ROWS_PER_FILE):
                batch.append({**t, ROW_ID: row_id, PAYLOAD: f"append {a} row {row_id}"})
                row_id += 1
        batches.append(batch)
    return batches


# ------------------------------------------------------------------------------------------------
# Spark / Iceberg Java (runs in the child process)
# ------------------------------------------------------------------------------------------------


def _iceberg_type(jvm, ty: str):
    T = jvm.org.apache.iceberg.types.Types
    simple = {
        "boolean": T.BooleanType.get,
        "int": T.IntegerType.get,
        "long": T.LongType.get,
        "float": T.FloatType.get,
        "double": T.DoubleType.get,
        "string": T.StringType.get,
        "uuid": T.UUIDType.get,
        "binary": T.BinaryType.get,
        "date": T.DateType.get,
        "timestamp": T.TimestampType.withoutZone,
        "timestamptz": T.TimestampType.withZone,
    }
    if ty in simple:
        return simple[ty]()
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", ty)
    if m:
        return T.DecimalType.of(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"fixed\[(\d+)\]", ty)
    if m:
        return T.FixedType.ofLength(int(m.group(1)))
    raise ValueError(f"type {ty}")


def _schema(jvm, columns: dict[str, str]):
    """An Iceberg schema from dotted paths (nested structs for `a.b`), field ids in order."""
    tree: dict[str, Any] = {}
    for path, ty in columns.items():
        node = tree
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = ty
    T = jvm.org.apache.iceberg.types.Types
    next_id = [0]

    def fields(node: dict):
        out = jvm.java.util.ArrayList()
        for name, sub in node.items():
            next_id[0] += 1
            fid = next_id[0]
            t = T.StructType.of(fields(sub)) if isinstance(sub, dict) else _iceberg_type(jvm, sub)
            out.add(T.NestedField.optional(fid, name, t))
        return out

    return jvm.org.apache.iceberg.Schema(fields(tree))


def _spec(jvm, schema, partition: list[tuple[str, str]]):
    b = jvm.org.apache.iceberg.PartitionSpec.builderFor(schema)
    for col, t in partition:
        if t == "identity":
            b = b.identity(col)
        elif t in TIME_TRANSFORMS:
            b = getattr(b, t)(col)
        elif t.startswith("bucket["):
            b = b.bucket(col, int(t[7:-1]))
        elif t.startswith("truncate["):
            b = b.truncate(col, int(t[9:-1]))
        elif t == "void":
            b = b.alwaysNull(col)
        else:
            raise ValueError(f"transform {t}")
    return b.build()


def _to_spark(value: Any, spark_type) -> Any:
    from pyspark.sql.types import StructType

    if isinstance(spark_type, StructType):
        return None if value is None else tuple(_to_spark(value.get(f.name), f.dataType) for f in spark_type.fields)
    if isinstance(value, bytes):
        return bytearray(value)
    return value


def _nest(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, v in row.items():
        node = out
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return out


def iceberg_catalog(spark, catalog: str):
    return spark._jsparkSession.sessionState().catalogManager().catalog(catalog).icebergCatalog()


def load_table(spark, target: str):
    t = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, target)
    t.refresh()
    return t


def build_table(spark, catalog: str, model: TableModel) -> dict:
    """Create, fill and prepare one table; returns what was built (for the report)."""
    jvm = spark._jvm
    for i in range(1, len(model.namespace) + 1):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quoted(catalog, *model.namespace[:i])}")
    ns = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(model.namespace))
    for i, p in enumerate(model.namespace):
        ns[i] = p
    ident = jvm.org.apache.iceberg.catalog.TableIdentifier.of(jvm.org.apache.iceberg.catalog.Namespace.of(ns), model.name)
    schema = _schema(jvm, model.columns)
    spec = _spec(jvm, schema, model.partition)
    props = jvm.java.util.HashMap()
    props.put("format-version", "2")
    if model.position_delete_commits:
        for mode in ("delete", "update", "merge"):
            props.put(f"write.{mode}.mode", "merge-on-read")
    iceberg_catalog(spark, catalog).createTable(ident, schema, spec, props)
    target = quoted(catalog, *model.namespace, model.name)
    if model.needs_sort_order:
        spark.sql(f"ALTER TABLE {target} WRITE ORDERED BY {quote(ROW_ID)}")
    spark_schema = spark.table(target).schema
    batches = rows_for(model)
    for batch in batches:
        data = [tuple(_to_spark(_nest(r).get(f.name), f.dataType) for f in spark_schema.fields) for r in batch]
        spark.createDataFrame(data, spark_schema).coalesce(1).writeTo(target).append()
    deleted = 0
    for a in range(model.position_delete_commits):
        # one row of each of append a's files: a position-delete file in every partition
        gone = batches[a][::ROWS_PER_FILE]
        ids = ", ".join(str(r[ROW_ID]) for r in gone)
        spark.sql(f"DELETE FROM {target} WHERE {quote(ROW_ID)} IN ({ids})")
        deleted += len(gone)
    table = load_table(spark, target)
    planted = []
    for params in model.orphans:
        planted.append(plant_orphan(table, params))
    return {
        "target": target,
        "schema": table.schema().toString(),
        "spec": table.spec().toString(),
        "sort_order": table.sortOrder().toString(),
        "properties": {k: table.properties()[k] for k in table.properties()},
        "rows": sum(len(b) for b in batches) - deleted,
        "appends": len(batches),
        "orphans": planted,
        **model.describe(),
    }


def plant_orphan(table, params: dict) -> dict:
    """A file no metadata references, last modified a day before the plan's older_than."""
    import os

    location = str(table.location())
    path = _local(location) + "/data/" + ORPHAN_NAME
    with open(path, "wb") as f:
        f.write(b"not referenced by any snapshot")
    mtime = params["older_than_ms"] / 1000 - 86_400
    os.utime(path, (mtime, mtime))
    return {"path": path, "dry_run": params["dry_run"]}


def _local(uri: str) -> str:
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return uri
