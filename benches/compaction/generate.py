#!/usr/bin/env python3
"""Generate the compaction benchmark's fragmented Iceberg table (deterministic, seeded).

    $PEERS_PYTHON benches/compaction/generate.py --root DIR --size-mb 1024 [--deletes] [--seed N]

Writes ``DIR/catalog.db`` (sqlite SQL catalog ``bench``) and ``DIR/warehouse`` with table
``db.events``: format v2, identity partition on ``part`` (32 values), zstd level 3, merge-on-read
deletes. The data comes from DuckDB SQL over ``range()`` with ``hash(id, seed, k)`` as the random
source, so values depend on the seed only; PyIceberg 0.12 appends it in batches, each batch one
file per partition with a per-partition row count drawn from ``random.Random(seed)`` (files of
~100–500 KB) until the data files reach ``--size-mb``. With ``--deletes``, Spark then runs
``DELETE FROM bench.db.events WHERE user_id % 20 = 0`` in merge-on-read mode (~5% of the rows, in
every data file: one position-delete file per data file).

Prints a JSON manifest last (the harness keeps it as ``bench-generated.json``) with the expected
fingerprints: ``all`` (every row ever appended: what raw rewrites must reproduce) and ``live``
(after the delete: what the table holds). A fingerprint is ``[rows, sum of row hashes, xor of row
hashes]`` computed by DuckDB (``bench.FINGERPRINT_SQL``) over the generated Arrow batches, i.e.
independently of any reader of the table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests" / "py"))

import common  # noqa: E402

PARTITIONS = 32
# Rows per file: ~31 bytes/row in zstd(3) -> ~100 KB .. ~500 KB files.
MIN_ROWS, MAX_ROWS = 3_200, 15_500
DELETE_PREDICATE = "user_id % 20 = 0"
GENERATOR_VERSION = 1


def batch_sql(seed: int, ranges: list[tuple[int, int, int]]) -> str:
    """Rows for one append: ``ranges`` = [(partition, first id, rows)]."""
    s = seed
    parts = []
    for p, start, n in ranges:
        parts.append(
            f"""SELECT i::BIGINT AS id, {p}::INTEGER AS part,
  TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_microseconds((i * 917 + hash(i, {s}, 1) % 1000000)::BIGINT) AS ts,
  (hash(i, {s}, 2) % 2000000)::BIGINT AS user_id,
  CASE WHEN hash(i, {s}, 3) % 100 = 0 THEN NULL ELSE ((hash(i, {s}, 4) % 5000000)::DOUBLE / 100) END AS amount,
  (1 + hash(i, {s}, 5) % 12)::INTEGER AS qty,
  (['click','view','purchase','signup','refund','search','add_to_cart','share','login','logout','error','checkout'])
    [1 + (hash(i, {s}, 6) % 12)::INTEGER] AS category,
  CASE WHEN hash(i, {s}, 7) % 50 = 0 THEN NULL ELSE
    '/' || (['shop','blog','help','account','api','search'])[1 + (hash(i, {s}, 8) % 6)::INTEGER] || '/'
    || (hash(i, {s}, 9) % 20000)::VARCHAR || '?ref='
    || substr(md5((i * 31 + {s})::VARCHAR), 1, (4 + hash(i, {s}, 10) % 20)::INTEGER) END AS payload
FROM range({start}, {start + n}) t(i)"""
        )
    return "\nUNION ALL\n".join(parts)


def iceberg_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DoubleType,
        IntegerType,
        LongType,
        NestedField,
        StringType,
        TimestamptzType,
    )

    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "part", IntegerType(), required=True),
        NestedField(3, "ts", TimestamptzType(), required=False),
        NestedField(4, "user_id", LongType(), required=False),
        NestedField(5, "amount", DoubleType(), required=False),
        NestedField(6, "qty", IntegerType(), required=False),
        NestedField(7, "category", StringType(), required=False),
        NestedField(8, "payload", StringType(), required=False),
    )


def arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("part", pa.int32(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("user_id", pa.int64()),
            pa.field("amount", pa.float64()),
            pa.field("qty", pa.int32()),
            pa.field("category", pa.string()),
            pa.field("payload", pa.string()),
        ]
    )


def add(fp: list[int], other: tuple[int, int, int]) -> None:
    fp[0] += other[0]
    fp[1] += other[1]
    fp[2] ^= other[2]


def generate(root: Path, size_mb: int, seed: int) -> dict:
    """The base table: appends only."""
    import duckdb
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    root.mkdir(parents=True, exist_ok=True)
    cat = common.catalog(root)
    cat.create_namespace_if_not_exists("db")
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
    table = cat.create_table(
        common.TABLE,
        schema=iceberg_schema(),
        partition_spec=spec,
        properties={
            "format-version": "2",
            "write.parquet.compression-codec": "zstd",
            "write.parquet.compression-level": "3",
            "write.delete.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.merge.mode": "merge-on-read",
        },
    )
    con = duckdb.connect()
    rng = random.Random(seed)
    schema = arrow_schema()
    target = size_mb << 20
    next_id, appends = 0, 0
    fp_all, fp_live = [0, 0, 0], [0, 0, 0]
    t = time.perf_counter()
    written = 0
    while written < target:
        ranges = []
        for p in range(PARTITIONS):
            n = rng.randint(MIN_ROWS, MAX_ROWS)
            ranges.append((p, next_id, n))
            next_id += n
        batch = con.execute(batch_sql(seed, ranges)).to_arrow_table().cast(schema)
        table.append(batch)
        appends += 1
        con.register("batch", batch)
        add(fp_all, common.fingerprint(con, "batch"))
        add(fp_live, common.fingerprint(con, f"(SELECT * FROM batch WHERE NOT coalesce({DELETE_PREDICATE}, false))"))
        con.unregister("batch")
        written += int(table.current_snapshot().summary["added-files-size"])
        if appends % 10 == 0:
            common.log(f"generate: {appends} appends, {written / 1e6:.0f} MB, {time.perf_counter() - t:.0f}s")
    con.close()
    return {
        "appends": appends,
        "rows": next_id,
        "fingerprint_all": fp_all,
        "fingerprint_live": fp_live,
        "seconds": round(time.perf_counter() - t, 1),
    }


def spark_delete(root: Path, memory: str) -> dict:
    """~5% of the rows deleted by Spark in merge-on-read mode (position delete files)."""
    t = time.perf_counter()
    spark = common.spark(root, memory=memory, app_name="cryo-bench-generate")
    spark.sql(f"DELETE FROM bench.{common.TABLE} WHERE {DELETE_PREDICATE}").collect()
    summary = spark.sql(
        f"SELECT summary FROM bench.{common.TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0][0]
    spark.stop()
    return {"spark_delete_summary": dict(summary), "seconds": round(time.perf_counter() - t, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=common.DEFAULT_SEED)
    ap.add_argument("--deletes", action="store_true", help="only run the Spark DELETE on an existing base table")
    ap.add_argument("--spark-memory", default="2g")
    args = ap.parse_args()
    root = args.root.resolve()
    if args.deletes:
        out = spark_delete(root, args.spark_memory)
    else:
        if (root / "catalog.db").exists():
            raise SystemExit(f"{root} already holds a catalog")
        out = generate(root, args.size_mb, args.seed)
    out.update({"generator_version": GENERATOR_VERSION, "seed": args.seed, "size_mb": args.size_mb})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
