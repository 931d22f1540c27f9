"""Live-CDC soak (issue 8, point 1): writers commit to one table on a fixed cadence while a
maintainer (Cryo, or Spark's own procedures for contrast) maintains it over and over; at the end
PyIceberg, DuckDB and Spark must all read exactly the rows the writers' own logs imply.

    . $CRYO_PEERS_DIR/peers.env
    $PEERS_PYTHON benches/soak/cdc_soak.py --minutes 25 --maintainer cryo --quiet-seconds 120 --out /tmp/soak-cryo
    $PEERS_PYTHON benches/soak/cdc_soak.py --minutes 25 --maintainer cryo --quiet-seconds 0   --out /tmp/soak-cryo-hot
    $PEERS_PYTHON benches/soak/cdc_soak.py --minutes 25 --maintainer spark --out /tmp/soak-spark

The table (``soak.events``, format v2, ``day(ts)`` partitions, merge-on-read deletes, updates and
merges) lives in a sqlite SQL catalog with a ``file://`` warehouse that PyIceberg's ``SqlCatalog``,
Spark's ``JdbcCatalog`` and Cryo share. A simulated day lasts ``--day-seconds`` of wall time: new
rows land in the current day, so partitions go from hot to cold as the soak runs; before the writers
start, PyIceberg fills ``--seed-days`` past days with many small appends (cold, fragmented history).

Processes (each this file with a role, each logging JSON lines under ``<out>/logs``):

- ``spark-writer``: one Spark session; every ``--cadence`` seconds a MERGE INTO from a generated CDC
  batch (inserts of new keys, updates and deletes of known keys) or a DELETE, both merge-on-read
  (position deletes).
- ``pyiceberg-writer``: every ``--cadence`` seconds an append of new keys or an overwrite with a
  filter (``id IN (...)``: copy-on-write replacement of known rows).
- ``maintainer``: ``cryo``: ``Catalog.compact`` (bin-pack, deletes applied; ``--quiet-seconds`` is
  cryo-core's ``quiet_period_ms``; with ``--fence``, the writers hold a ``cryo.CommitFence`` for
  each whole operation and every Cryo commit is made under it, so no writer operation spans
  a Cryo commit), ``rewrite_position_deletes``, ``rewrite_manifests`` and
  ``expire_snapshots`` (older than ``--retention-seconds``, far longer than any writer operation, so
  no writer's base snapshot is ever expired) every ``--maint-cadence`` seconds; ``spark``:
  ``CALL system.rewrite_data_files`` (``delete-file-threshold`` 1, as Cryo), ``rewrite_position_delete_files``,
  ``rewrite_manifests`` and ``expire_snapshots`` on the same cadence; ``none``: nothing.

The two writers take turns through a file lock, as the steps of one CDC pipeline do; so their
commits are totally ordered (a shared counter numbers them) and the model of the table — keyed rows,
built by replaying the logged logical changes of the SUCCESSFUL commits in that order — is exact.
Every attempt is logged: ok, or failed with the exception's class and message. A failed attempt is
classified from the snapshots committed between the one the writer started from and the head when
it failed: a ``replace`` snapshot there (only maintenance commits ``replace``) and a concurrency
validation error = caused by maintenance; other writers' snapshots = writer vs writer; else other.

At the end the writers stop, then the maintainer; the table is read with PyIceberg, DuckDB and Spark,
each fingerprinted (``tests/py/cryo_peers.fingerprint``) and compared with the model's; keys lost,
resurrected (deleted in the model, present in the table) and stale (present, wrong version) are
counted. ``<out>/report.json`` holds the figures; a summary is printed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "py"))

import cryo_peers  # noqa: E402

UTC = dt.timezone.utc
CATALOG = "soak"
IDENT = "soak.events"
SPARK_IDENT = f"{CATALOG}.{IDENT}"
BASE_DAY = dt.datetime(2026, 1, 1, tzinfo=UTC)
DAY_IDS = 10_000_000  # ids of simulated day d: d * DAY_IDS + 2 * n + writer bit
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read"}
# Messages of the concurrency validations that fail a writer when a concurrent commit changed the
# files it read (Iceberg Java's MergingSnapshotProducer / PyIceberg's validate.py).
CONFLICT_MARKS = (
    "missing data files",
    "found new delete",
    "found new position delete",
    "data files were concurrently deleted",
    "deleted data files were found",
    "found conflicting",
    "conflicting files",
    "conflicting delete",
    "commitfailedexception",
    "validationexception",
    "requirement failed",
)


# ================================================================================================
# Shared helpers
# ================================================================================================


def now_ms() -> int:
    return int(time.time() * 1000)


class Run:
    """Paths and settings of one soak, shared by every role through ``<out>/config.json``."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.cfg = json.loads((out / "config.json").read_text())
        self.fence_wait_s = 0.0
        self.catalog_db = out / "catalog.db"
        self.warehouse = out / "warehouse"
        self.logs = out / "logs"
        self.stop_file = out / "STOP"
        self.lock_file = out / "writer.lock"
        self.counter_file = out / "writer.seq"

    def stopping(self) -> bool:
        return self.stop_file.exists()

    def day_now(self) -> int:
        return int((now_ms() - self.cfg["start_ms"]) / 1000 // self.cfg["day_seconds"])

    def pyiceberg_catalog(self):
        return cryo_peers.sql_catalog(self.catalog_db, self.warehouse, name=CATALOG)

    def cryo_catalog(self):
        import cryo

        return cryo.Catalog(CATALOG, type="sql", uri=f"sqlite:///{self.catalog_db}", warehouse=self.warehouse.as_uri())


class Log:
    """JSON lines, flushed per record."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def write(self, **rec: Any) -> None:
        rec.setdefault("t_ms", now_ms())
        self.f.write(json.dumps(rec, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
                out.append(json.loads(line))
    return out


def commit_fence(run: Run):
    """The commit fence writers and Cryo share (``--fence``), or None."""
    if not run.cfg.get("fence"):
        return None
    import cryo

    return cryo.CommitFence(run.out / "fence")


@contextlib.contextmanager
def writer_turn(run: Run) -> Iterator[int]:
    """Hold the writers' lock (and, with ``--fence``, the commit fence for the whole operation);
    yields the next global commit-order number."""
    fence = commit_fence(run)
    with open(run.lock_file, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            t0 = time.monotonic()
            with fence.writer(CATALOG, IDENT) if fence else contextlib.nullcontext():
                run.fence_wait_s = round(time.monotonic() - t0, 3)
                n = int(run.counter_file.read_text() or 0) + 1 if run.counter_file.exists() else 1
                run.counter_file.write_text(str(n))
                yield n
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ts_of(key: int) -> int:
    """Event time (epoch microseconds) of a key: its simulated day plus a second per key."""
    day, rest = divmod(key, DAY_IDS)
    return int((BASE_DAY + dt.timedelta(days=day, seconds=(rest // 2) % 86_000)).timestamp() * 1_000_000)


def make_row(rng: random.Random, key: int, version: int, writer: str) -> dict:
    return {
        "id": key,
        "ts": ts_of(key),
        "payload": f"{writer}-v{version}-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=rng.randrange(40, 160))),
        "version": version,
        "amount": round(rng.random() * 1000, 2),
        "writer": writer,
    }


def arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("payload", pa.string()),
            pa.field("version", pa.int64()),
            pa.field("amount", pa.float64()),
            pa.field("writer", pa.string()),
        ]
    )


def rows_table(rows: list[dict]):
    import pyarrow as pa

    schema = arrow_schema()
    cols = {f.name: [r[f.name] for r in rows] for f in schema}
    return pa.Table.from_pydict(cols, schema=schema)


class KnownKeys:
    """The keys a writer believes live (its own view from both writers' logs), by simulated day,
    with their last version: updates pick from here."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.offsets: dict[str, int] = {}
        self.live: dict[int, int] = {}
        self.by_day: dict[int, set[int]] = collections.defaultdict(set)

    def refresh(self) -> None:
        for name in ("seed", "spark-writer", "pyiceberg-writer"):
            path = self.run.logs / f"{name}.jsonl"
            if not path.exists():
                continue
            with open(path) as f:
                f.seek(self.offsets.get(name, 0))
                while True:
                    line = f.readline()
                    if not line or not line.endswith("\n"):
                        break
                    self.offsets[name] = f.tell()
                    rec = json.loads(line)
                    if rec.get("status") == "ok":
                        self.apply(rec["change"])

    def apply(self, change: dict) -> None:
        for k in change.get("delete", []):
            if self.live.pop(k, None) is not None:
                self.by_day[k // DAY_IDS].discard(k)
        for k, v in change.get("upsert", []):
            self.live[k] = v
            self.by_day[k // DAY_IDS].add(k)

    def pick(self, rng: random.Random, n: int, today: int, cold_share: float, exclude: set[int] = frozenset()) -> list[int]:
        """``n`` live keys from the last two days; in ``cold_share`` of the operations, two of them
        from one older day (a late change to a cold partition)."""
        hot_days = [d for d in (today, today - 1) if self.by_day.get(d)]
        cold_days = [d for d, ks in self.by_day.items() if d < today - 1 and ks]
        cold_day = rng.choice(cold_days) if cold_days and rng.random() < cold_share else None
        out: list[int] = []
        for i in range(n * 3):
            if len(out) >= n:
                break
            if cold_day is not None and (i < 2 or not hot_days):
                days = [cold_day]
            else:
                days = hot_days
            if not days:
                break
            ks = self.by_day[rng.choice(days)]
            k = rng.choice(sorted(ks)) if len(ks) < 64 else rng.choice(list(ks))
            if k not in exclude and k not in out:
                out.append(k)
        return out


def classify_failure(catalog, base_snapshot_id: int | None, error: str) -> dict:
    """What committed between the writer's base snapshot and now, and what that makes the failure."""
    try:
        table = catalog.load_table(IDENT)
        meta = table.metadata
        chain = []
        sid = meta.current_snapshot_id
        while sid is not None and sid != base_snapshot_id and len(chain) < 500:
            snap = meta.snapshot_by_id(sid)
            if snap is None:
                break
            op = snap.summary.operation.value if snap.summary else "?"
            chain.append({"snapshot_id": sid, "operation": op})
            sid = snap.parent_snapshot_id
    except Exception as e:  # noqa: BLE001 - recorded, classified as other
        return {"cause": "other", "intervening": [], "why": f"could not load the table: {e}"}
    text = error.lower()
    conflict = any(m in text for m in CONFLICT_MARKS)
    maint = [c for c in chain if c["operation"] == "replace"]
    writers = [c for c in chain if c["operation"] != "replace"]
    if conflict and maint:
        cause = "maintenance"
    elif conflict and writers:
        cause = "writer_vs_writer"
    else:
        cause = "other"
    return {"cause": cause, "intervening": chain[:20], "intervening_replace": len(maint), "intervening_writer": len(writers)}


def error_class(e: BaseException) -> str:
    j = getattr(e, "java_exception", None)
    if j is not None:
        # the innermost Iceberg/validation cause names the conflict
        names = []
        while j is not None and len(names) < 6:
            names.append(str(j.getClass().getName()))
            j = j.getCause()
        for n in names:
            if "iceberg" in n:
                return n
        return names[0]
    return f"{type(e).__module__}.{type(e).__name__}"


def error_text(e: BaseException) -> str:
    j = getattr(e, "java_exception", None)
    if j is None:
        return f"{type(e).__name__}: {e}"[:2000]
    msgs: list[str] = []
    while j is not None and len(msgs) < 6:
        m = str(j.toString())
        if m not in msgs:
            msgs.append(m)
        j = j.getCause()
    return " | caused by: ".join(msgs)[:2000]


def current_snapshot_id(catalog) -> int | None:
    return catalog.load_table(IDENT).metadata.current_snapshot_id


def sleep_until(run: Run, t: float) -> None:
    while not run.stopping() and time.monotonic() < t:
        time.sleep(min(0.2, max(0.0, t - time.monotonic())))


# ================================================================================================
# Set-up
# ================================================================================================


def setup(out: Path, args: argparse.Namespace) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    if out.exists():
        shutil.rmtree(out)
    (out / "warehouse").mkdir(parents=True)
    (out / "logs").mkdir()
    cfg = {
        "minutes": args.minutes,
        "maintainer": args.maintainer,
        "quiet_seconds": args.quiet_seconds,
        "fence": args.fence,
        "cadence": args.cadence,
        "maint_cadence": args.maint_cadence,
        "day_seconds": args.day_seconds,
        "seed_days": args.seed_days,
        "cold_share": args.cold_share,
        "retention_seconds": args.retention_seconds,
        "seed": args.seed,
        "batch_rows": args.batch_rows,
        "start_ms": 0,
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    run = Run(out)
    catalog = run.pyiceberg_catalog()
    catalog.create_namespace("soak")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "payload", StringType()),
        NestedField(4, "version", LongType()),
        NestedField(5, "amount", DoubleType()),
        NestedField(6, "writer", StringType()),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    props = {"format-version": "2", **MOR, "write.parquet.compression-codec": "zstd"}
    table = catalog.create_table(IDENT, schema=schema, partition_spec=spec, properties=props)
    # Past days: many small appends each (cold, fragmented history for the maintainer's first runs).
    rng = random.Random(args.seed)
    log = Log(run.logs / "seed.jsonl")
    n = 0
    for day in range(-args.seed_days, 0):
        for _ in range(args.seed_appends):
            rows = []
            for _ in range(args.batch_rows):
                key = day * DAY_IDS + 2 * n
                n += 1
                rows.append(make_row(rng, key, 1, "seed"))
            table.append(rows_table(rows))
            log.write(order=0, status="ok", op="seed-append", change={"upsert": [[r["id"], 1] for r in rows]}, rows=rows)
    # The clock of simulated days starts now: day 0 is the first day the writers write.
    cfg["start_ms"] = now_ms()
    (out / "config.json").write_text(json.dumps(cfg, indent=1))


# ================================================================================================
# Writers
# ================================================================================================


def spark_writer(run: Run) -> None:
    from spark_worker import release_catalog_lock

    log = Log(run.logs / "spark-writer.jsonl")
    spark = cryo_peers.spark_session(
        run.catalog_db,
        run.warehouse,
        catalog_name=CATALOG,
        app_name="soak-spark-writer",
        extra_conf={f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"},
    )
    release_catalog_lock(spark, CATALOG)
    catalog = run.pyiceberg_catalog()
    rng = random.Random(run.cfg["seed"] * 7 + 1)
    known = KnownKeys(run)
    next_n = 0
    cadence = run.cfg["cadence"]
    batch = run.cfg.get("batch_rows", 40)
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

    src_schema = StructType(
        [
            StructField("id", LongType(), False),
            StructField("ts", TimestampType(), False),
            StructField("payload", StringType()),
            StructField("version", LongType()),
            StructField("amount", DoubleType()),
            StructField("writer", StringType()),
            StructField("op", StringType()),
        ]
    )
    i = 0
    t_next = time.monotonic()
    log.write(status="started")
    while not run.stopping():
        sleep_until(run, t_next)
        if run.stopping():
            break
        t_next = time.monotonic() + cadence
        kind = "delete" if i % 3 == 2 else "merge"
        i += 1
        with writer_turn(run) as order:
            known.refresh()
            today = run.day_now()
            base = current_snapshot_id(catalog)
            t0 = time.monotonic()
            touched: list[int] = []  # keys the operation changes (logged with a failure too)
            try:
                if kind == "merge":
                    ins = []
                    for _ in range(batch // 2):
                        ins.append(make_row(rng, today * DAY_IDS + 2 * next_n, 1, "spark"))
                        next_n += 1
                    upd_keys = known.pick(rng, batch // 3, today, run.cfg["cold_share"])
                    del_keys = known.pick(rng, max(1, batch // 10), today, run.cfg["cold_share"], exclude=set(upd_keys))
                    upd = [make_row(rng, k, known.live[k] + 1, "spark") for k in upd_keys]
                    touched = [r["id"] for r in ins + upd] + del_keys
                    rows = [{**r, "op": "U"} for r in ins + upd] + [{**make_row(rng, k, 0, "spark"), "op": "D"} for k in del_keys]
                    data = [
                        (r["id"], dt.datetime.fromtimestamp(r["ts"] / 1e6, UTC), r["payload"], r["version"], r["amount"], r["writer"], r["op"])
                        for r in rows
                    ]
                    spark.createDataFrame(data, src_schema).createOrReplaceTempView("cdc_batch")
                    spark.sql(
                        f"""MERGE INTO {SPARK_IDENT} t USING cdc_batch s ON t.id = s.id
                            WHEN MATCHED AND s.op = 'D' THEN DELETE
                            WHEN MATCHED THEN UPDATE SET t.payload = s.payload, t.version = s.version,
                                 t.amount = s.amount, t.writer = s.writer
                            WHEN NOT MATCHED AND s.op <> 'D' THEN
                                 INSERT (id, ts, payload, version, amount, writer)
                                 VALUES (s.id, s.ts, s.payload, s.version, s.amount, s.writer)"""
                    ).collect()
                    change = {"delete": del_keys, "upsert": [[r["id"], r["version"]] for r in ins + upd]}
                    detail = {"rows": ins + upd, "days": sorted({r["id"] // DAY_IDS for r in ins + upd} | {k // DAY_IDS for k in del_keys})}
                else:
                    del_keys = known.pick(rng, max(2, batch // 4), today, run.cfg["cold_share"])
                    if not del_keys:
                        continue
                    touched = del_keys
                    spark.sql(f"DELETE FROM {SPARK_IDENT} WHERE id IN ({', '.join(map(str, del_keys))})").collect()
                    change = {"delete": del_keys}
                    detail = {"days": sorted({k // DAY_IDS for k in del_keys})}
                log.write(order=order, status="ok", op=kind, base_snapshot_id=base, seconds=round(time.monotonic() - t0, 2), fence_wait_s=run.fence_wait_s, change=change, **detail)
            except Exception as e:  # noqa: BLE001 - every failure is logged and classified
                text = error_text(e)
                log.write(
                    order=order,
                    status="failed",
                    op=kind,
                    base_snapshot_id=base,
                    seconds=round(time.monotonic() - t0, 2),
                    error_class=error_class(e),
                    error=text,
                    today=today,
                    days=sorted({k // DAY_IDS for k in touched}),
                    classification=classify_failure(catalog, base, text),
                )
    log.write(status="stopped")
    spark.stop()


def pyiceberg_writer(run: Run) -> None:
    from pyiceberg.expressions import In

    log = Log(run.logs / "pyiceberg-writer.jsonl")
    catalog = run.pyiceberg_catalog()
    rng = random.Random(run.cfg["seed"] * 7 + 2)
    known = KnownKeys(run)
    next_n = 0
    cadence = run.cfg["cadence"]
    batch = run.cfg.get("batch_rows", 40)
    i = 0
    t_next = time.monotonic() + cadence / 2  # interleaved with the Spark writer
    log.write(status="started")
    while not run.stopping():
        sleep_until(run, t_next)
        if run.stopping():
            break
        t_next = time.monotonic() + cadence
        kind = "overwrite" if i % 2 == 1 else "append"
        i += 1
        with writer_turn(run) as order:
            known.refresh()
            today = run.day_now()
            t0 = time.monotonic()
            base = None
            touched: list[int] = []
            try:
                table = catalog.load_table(IDENT)
                base = table.metadata.current_snapshot_id
                if kind == "append":
                    rows = []
                    for _ in range(batch):
                        rows.append(make_row(rng, today * DAY_IDS + 2 * next_n + 1, 1, "pyiceberg"))
                        next_n += 1
                    touched = [r["id"] for r in rows]
                    table.append(rows_table(rows))
                    change = {"upsert": [[r["id"], 1] for r in rows]}
                else:
                    keys = known.pick(rng, max(2, batch // 5), today, run.cfg["cold_share"])
                    if not keys:
                        continue
                    rows = [make_row(rng, k, known.live[k] + 1, "pyiceberg") for k in keys]
                    touched = keys
                    table.overwrite(rows_table(rows), overwrite_filter=In("id", keys))
                    change = {"delete": keys, "upsert": [[r["id"], r["version"]] for r in rows]}
                log.write(
                    order=order,
                    status="ok",
                    fence_wait_s=run.fence_wait_s,
                    op=kind,
                    base_snapshot_id=base,
                    seconds=round(time.monotonic() - t0, 2),
                    change=change,
                    rows=rows,
                    days=sorted({r["id"] // DAY_IDS for r in rows}),
                )
            except Exception as e:  # noqa: BLE001 - every failure is logged and classified
                text = error_text(e)
                log.write(
                    order=order,
                    status="failed",
                    op=kind,
                    base_snapshot_id=base,
                    seconds=round(time.monotonic() - t0, 2),
                    error_class=error_class(e),
                    error=text,
                    today=today,
                    days=sorted({k // DAY_IDS for k in touched}),
                    classification=classify_failure(catalog, base, text),
                )
    log.write(status="stopped")


# ================================================================================================
# Maintainers
# ================================================================================================


def wait_final(run: Run, timeout: float = 600) -> bool:
    """Wait for the orchestrator's go for the final round (given once the writers have stopped)."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if (run.out / "FINAL").exists():
            return True
        time.sleep(0.2)
    return False


def group_state(status: Any) -> str:
    """``committed`` / ``conflicted`` / ``failed`` / ``dry_run`` from a group's serialized status."""
    if isinstance(status, dict):
        return str(status.get("status") or next(iter(status)))
    return str(status)


def cryo_maintainer(run: Run) -> None:
    import cryo

    log = Log(run.logs / "maintainer.jsonl")
    cat = run.cryo_catalog()
    quiet_ms = int(run.cfg["quiet_seconds"] * 1000) or None
    fence = commit_fence(run)
    retention = dt.timedelta(seconds=run.cfg["retention_seconds"])
    cadence = run.cfg["maint_cadence"]
    t_next = time.monotonic() + cadence
    log.write(status="started")

    def job(name: str, fn) -> None:
        t0 = time.monotonic()
        try:
            outcome = fn()
            d = outcome.to_dict()
            rec: dict[str, Any] = {"job": name, "seconds": round(time.monotonic() - t0, 2)}
            if name == "compact":
                groups = d.get("groups", [])
                for g in groups:
                    g["state"] = group_state(g["status"])
                st = collections.Counter(g["state"] for g in groups)
                rec.update(
                    groups=dict(st),
                    retries=sum(g.get("retries", 0) for g in groups),
                    snapshot_ids=d.get("snapshot_ids", []),
                    base_snapshot_id=d.get("base_snapshot_id"),
                    files_in=sum(g.get("data_files_in", 0) for g in groups if g["state"] == "committed"),
                    files_out=sum(g.get("data_files_out", 0) for g in groups if g["state"] == "committed"),
                    skipped_quiet=sum(1 for s in d.get("plan", {}).get("skipped", []) if s["reason"].startswith("quiet_period")),
                    conflicts=[g["status"] for g in groups if g["state"] == "conflicted"],
                    failures=[g["status"] for g in groups if g["state"] == "failed"],
                )
                if st.get("failed"):
                    rec["status"] = "failed"
                elif st.get("conflicted"):
                    rec["status"] = "aborted" if not st.get("committed") else "partly_aborted"
                elif st.get("committed"):
                    rec["status"] = "committed"
                else:
                    rec["status"] = "nothing_to_do"
            else:
                rec["status"] = "committed" if d.get("snapshot_ids") or (name == "expire" and d.get("expired_snapshot_ids")) else "nothing_to_do"
                rec["receipt"] = {k: v for k, v in d.items() if k not in ("files",) and not isinstance(v, list) or k in ("snapshot_ids",)}
                if name == "expire":
                    rec["expired"] = len(d.get("expired_snapshot_ids", []))
            log.write(**rec)
        except cryo.CommitConflictError as e:
            log.write(job=name, status="aborted", seconds=round(time.monotonic() - t0, 2), error_class=type(e).__name__, error=str(e)[:2000], code=getattr(e, "code", None))
        except Exception as e:  # noqa: BLE001 - a failed job is a receipt, never the end of the soak
            log.write(job=name, status="failed", seconds=round(time.monotonic() - t0, 2), error_class=type(e).__name__, error=str(e)[:2000], code=getattr(e, "code", None))

    while not run.stopping():
        sleep_until(run, t_next)
        if run.stopping():
            break
        t_next = time.monotonic() + cadence
        job("compact", lambda: cat.compact(IDENT, dry_run=False, quiet_period_ms=quiet_ms, commit_fence=fence))
        job(
            "rewrite_position_deletes",
            lambda: cat.rewrite_position_deletes(IDENT, dry_run=False, quiet_period_ms=quiet_ms, commit_fence=fence),
        )
        job("rewrite_manifests", lambda: cat.rewrite_manifests(IDENT, dry_run=False, commit_fence=fence))
        job("expire", lambda: cat.expire_snapshots(IDENT, older_than=retention, retain_last=1, dry_run=False, commit_fence=fence))
    if wait_final(run):
        # The writers have stopped: the partitions the quiet period left alone are maintained now.
        job("final:compact", lambda: cat.compact(IDENT, dry_run=False))
        job("final:rewrite_position_deletes", lambda: cat.rewrite_position_deletes(IDENT, dry_run=False))
        job("final:rewrite_manifests", lambda: cat.rewrite_manifests(IDENT, dry_run=False))
    log.write(status="stopped")


def spark_maintainer(run: Run) -> None:
    from spark_worker import release_catalog_lock

    log = Log(run.logs / "maintainer.jsonl")
    spark = cryo_peers.spark_session(
        run.catalog_db,
        run.warehouse,
        catalog_name=CATALOG,
        app_name="soak-spark-maintainer",
        extra_conf={f"spark.sql.catalog.{CATALOG}.cache-enabled": "false"},
    )
    release_catalog_lock(spark, CATALOG)
    cadence = run.cfg["maint_cadence"]
    t_next = time.monotonic() + cadence
    log.write(status="started")
    quoted = f"'{CATALOG}.{IDENT}'"  # catalog and namespace share a name: qualify fully

    def call(name: str, sql: str) -> None:
        t0 = time.monotonic()
        try:
            rows = [r.asDict() for r in spark.sql(sql).collect()]
            res = rows[0] if rows else {}
            changed = any(isinstance(v, int) and v > 0 for v in res.values())
            log.write(job=name, status="committed" if changed else "nothing_to_do", seconds=round(time.monotonic() - t0, 2), receipt={k: v for k, v in res.items()})
        except Exception as e:  # noqa: BLE001 - recorded
            text = error_text(e)
            low = text.lower()
            status = "aborted" if any(m in low for m in CONFLICT_MARKS) else "failed"
            log.write(job=name, status=status, seconds=round(time.monotonic() - t0, 2), error_class=error_class(e), error=text)

    while not run.stopping():
        sleep_until(run, t_next)
        if run.stopping():
            break
        t_next = time.monotonic() + cadence
        call(
            "compact",
            f"CALL {CATALOG}.system.rewrite_data_files(table => {quoted}, "
            "options => map('min-input-files', '5', 'delete-file-threshold', '1'))",
        )
        call("rewrite_position_deletes", f"CALL {CATALOG}.system.rewrite_position_delete_files(table => {quoted})")
        call("rewrite_manifests", f"CALL {CATALOG}.system.rewrite_manifests(table => {quoted})")
        older = dt.datetime.fromtimestamp(time.time() - run.cfg["retention_seconds"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        call("expire", f"CALL {CATALOG}.system.expire_snapshots(table => {quoted}, older_than => TIMESTAMP '{older}', retain_last => 1)")
    if wait_final(run):
        call(
            "final:compact",
            f"CALL {CATALOG}.system.rewrite_data_files(table => {quoted}, "
            "options => map('min-input-files', '5', 'delete-file-threshold', '1'))",
        )
        call("final:rewrite_position_deletes", f"CALL {CATALOG}.system.rewrite_position_delete_files(table => {quoted})")
        call("final:rewrite_manifests", f"CALL {CATALOG}.system.rewrite_manifests(table => {quoted})")
    log.write(status="stopped")
    spark.stop()


# ================================================================================================
# Verification and report
# ================================================================================================


def model_rows(run: Run) -> tuple[dict[int, dict], dict[int, int], list[dict]]:
    """Replay the successful commits in their global order: key → row; also key → version of the
    last change for every key ever written (deleted keys have version -1), and the ordered log."""
    recs = [r for r in read_jsonl(run.logs / "seed.jsonl") if r.get("status") == "ok"]
    for name in ("spark-writer", "pyiceberg-writer"):
        recs += [r for r in read_jsonl(run.logs / f"{name}.jsonl") if r.get("status") == "ok" and "order" in r]
    recs.sort(key=lambda r: r["order"])
    orders = [r["order"] for r in recs if r["order"] > 0]
    assert len(orders) == len(set(orders)), "two commits with the same order number"
    model: dict[int, dict] = {}
    last: dict[int, int] = {}
    for r in recs:
        ch = r["change"]
        for k in ch.get("delete", []):
            model.pop(k, None)
            last[k] = -1
        rows = {row["id"]: row for row in r.get("rows", [])}
        for k, v in ch.get("upsert", []):
            model[k] = rows[k]
            last[k] = v
    return model, last, recs


def scan_summary(run: Run) -> dict:
    import cryo

    cat = run.cryo_catalog()
    s = cat.scan(IDENT)
    g = cryo.grade(s)
    return {
        "data_files": s.data_files,
        "delete_files": s.delete_files,
        "records": s.records,
        "snapshots": s.snapshots,
        "manifests": s.manifests,
        "data_bytes": s.data_bytes,
        "grade": g.grade,
        "score": g.score,
    }


def read_spark_fingerprint(run: Run) -> tuple[Any, Any]:
    from spark_worker import SparkWorker

    w = SparkWorker(run.catalog_db, run.warehouse, log=run.logs / "spark-reader.log", app_name="soak-reader")
    try:
        # the worker's session names its catalog ``fixtures``: register ours too
        w.sql(f"SET `spark.sql.catalog.{CATALOG}`=`org.apache.iceberg.spark.SparkCatalog`")
        for k, v in {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{run.catalog_db}",
            "warehouse": run.warehouse.as_uri(),
            "jdbc.schema-version": "V1",
            "cache-enabled": "false",
        }.items():
            w.sql(f"SET `spark.sql.catalog.{CATALOG}.{k}`=`{v}`")
        table = w.read(SPARK_IDENT, run.out / "spark-read.arrow")
        return table, None
    finally:
        w.close()


def verify(run: Run) -> dict:
    model, last, recs = model_rows(run)
    expected = rows_table(sorted(model.values(), key=lambda r: r["id"]))
    exp_fp = cryo_peers.fingerprint(expected)
    catalog = run.pyiceberg_catalog()
    table = catalog.load_table(IDENT)
    reads: dict[str, Any] = {}
    pyi = table.scan().to_arrow()
    reads["pyiceberg"] = pyi
    reads["duckdb"] = cryo_peers.read_duckdb(table.metadata_location)
    try:
        reads["spark"], _ = read_spark_fingerprint(run)
    except Exception as e:  # noqa: BLE001 - reported as a failed read
        reads["spark"] = e
    fps = {}
    for name, t in reads.items():
        if isinstance(t, Exception):
            fps[name] = {"error": str(t)[:2000]}
            continue
        t = t.select(expected.column_names)
        fp = cryo_peers.fingerprint(t)
        fps[name] = {"rows": fp.rows, "sha256": fp.sha256, "equal": fp == exp_fp}
    # Keys lost / resurrected / stale, from PyIceberg's read.
    actual = {r["id"]: r for r in pyi.select(["id", "version"]).to_pylist()}
    lost = [k for k in model if k not in actual]
    resurrected = [k for k in actual if k not in model]
    stale = [k for k, r in actual.items() if k in model and r["version"] != model[k]["version"]]
    dup = pyi.num_rows - len(actual)
    return {
        "expected": {"rows": exp_fp.rows, "sha256": exp_fp.sha256, "commits_replayed": len(recs)},
        "reads": fps,
        "keys_lost": len(lost),
        "keys_resurrected": len(resurrected),
        "keys_stale": len(stale),
        "duplicate_rows": dup,
        "examples": {"lost": lost[:5], "resurrected": resurrected[:5], "stale": stale[:5]},
    }


def conflict_kind(error: str) -> str:
    """What the concurrent commit took from the writer, from the validation's message."""
    e = error.lower()
    if "missing data files" in e or "data files were concurrently deleted" in e or "deleted data files were found" in e:
        return "data_files_replaced"
    if "missing required files to delete" in e:
        return "delete_files_replaced"
    if "found new delete" in e or "found new position delete" in e:
        return "new_deletes_for_replaced_files"
    if "conflicting" in e:
        return "conflicting_files_added"
    return "other"


def summarize(run: Run) -> dict:
    writers: dict[str, Any] = {}
    for name in ("spark-writer", "pyiceberg-writer"):
        recs = [r for r in read_jsonl(run.logs / f"{name}.jsonl") if "order" in r]
        ok = [r for r in recs if r["status"] == "ok"]
        failed = [r for r in recs if r["status"] == "failed"]
        by_op = collections.Counter(f"{r['op']}:{r['status']}" for r in recs)
        causes = collections.Counter(r["classification"]["cause"] for r in failed)
        kinds = collections.Counter(f"{r['op']}:{conflict_kind(r['error'])}" for r in failed)
        # A maintenance-caused failure of an operation that reached into a day older than
        # yesterday: a late change to a partition that was cold when the maintainer planned.
        cold = [r for r in failed if r["classification"]["cause"] == "maintenance" and "today" in r and any(d < r["today"] - 1 for d in r.get("days", []))]
        classes = collections.Counter(r["error_class"] for r in failed)
        writers[name] = {
            "attempts": len(recs),
            "succeeded": len(ok),
            "failed": len(failed),
            "by_op": dict(by_op),
            "failed_by_cause": dict(causes),
            "failed_by_class": dict(classes),
            "failed_by_kind": dict(kinds),
            "maintenance_failures_touching_cold_days": len(cold),
            "failure_examples": [
                {"op": r["op"], "error_class": r["error_class"], "error": r["error"][:400], "cause": r["classification"]["cause"]} for r in failed[:4]
            ],
            "seconds_p50": sorted(r["seconds"] for r in recs)[len(recs) // 2] if recs else None,
            # Waiting at the commit fence for a commit of Cryo's (--fence), before the operation.
            "fence_wait_s_p50_max": [sorted(waits)[len(waits) // 2], max(waits)] if (waits := [r.get("fence_wait_s", 0) for r in ok]) else None,
        }
    every = [r for r in read_jsonl(run.logs / "maintainer.jsonl") if "job" in r]
    m = [r for r in every if not r["job"].startswith("final:")]
    final = {r["job"]: r["status"] for r in every if r["job"].startswith("final:")}
    jobs: dict[str, Any] = {}
    for name in sorted({r["job"] for r in m}):
        rs = [r for r in m if r["job"] == name]
        jobs[name] = dict(collections.Counter(r["status"] for r in rs))
        jobs[name]["retried"] = sum(1 for r in rs if r.get("retries"))
        errs = [r for r in rs if r["status"] in ("failed", "aborted", "partly_aborted")]
        if errs:
            jobs[name]["examples"] = [
                {k: (str(v)[:400] if k in ("error", "conflicts", "failures") else v) for k, v in r.items() if k in ("status", "error_class", "error", "conflicts", "failures", "code")}
                for r in errs[:3]
            ]
    totals = collections.Counter()
    for c in jobs.values():
        for k, v in c.items():
            if isinstance(v, int):
                totals[k] += v
    compact = [r for r in m if r["job"] == "compact"]
    return {
        "writers": writers,
        "maintainer_jobs": jobs,
        "maintainer_totals": dict(totals),
        "final_round": final,
        "compaction": {
            "groups": dict(sum((collections.Counter(r.get("groups", {})) for r in compact), collections.Counter())),
            # Cryo's outcome, or Spark's procedure result
            "files_in": sum(r.get("files_in", 0) or (r.get("receipt") or {}).get("rewritten_data_files_count", 0) for r in compact),
            "files_out": sum(r.get("files_out", 0) or (r.get("receipt") or {}).get("added_data_files_count", 0) for r in compact),
            "partitions_skipped_quiet": sum(r.get("skipped_quiet", 0) for r in compact),
        },
    }


def spawn(out: Path, role: str) -> subprocess.Popen:
    log = open(out / "logs" / f"{role}.stderr", "wb")  # noqa: SIM115 - owned by the child
    env = dict(os.environ)
    env.setdefault("CRYO_SPARK_SCRATCH", str(out / "spark-scratch" / role))
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role", role, "--out", str(out)], stdout=log, stderr=subprocess.STDOUT, env=env)


def main_run(args: argparse.Namespace) -> dict:
    out = Path(args.out).resolve()
    t_start = time.monotonic()
    setup(out, args)
    run = Run(out)
    before = scan_summary(run)
    procs = {"spark-writer": spawn(out, "spark-writer"), "pyiceberg-writer": spawn(out, "pyiceberg-writer")}
    if args.maintainer != "none":
        procs["maintainer"] = spawn(out, f"{args.maintainer}-maintainer")
    deadline = time.monotonic() + args.minutes * 60
    try:
        while time.monotonic() < deadline:
            time.sleep(1)
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited early; see {out / 'logs'}")
    finally:
        run.stop_file.write_text("stop")
        for name in ("spark-writer", "pyiceberg-writer", "maintainer"):
            p = procs.get(name)
            if p is None:
                continue
            if name == "maintainer":
                at_stop = scan_summary(run)
                (out / "FINAL").write_text("go")
            try:
                p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
    soak_s = time.monotonic() - t_start
    after = scan_summary(run)
    if "maintainer" not in procs:
        at_stop = after
    report = {
        "config": run.cfg,
        "soak_seconds": round(soak_s, 1),
        "table_before": before,
        "table_at_stop": at_stop,
        "table_after_final_round": after,
        **summarize(run),
        "verification": verify(run),
        "exit_codes": {n: p.returncode for n, p in procs.items()},
    }
    report["total_seconds"] = round(time.monotonic() - t_start, 1)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print_report(report)
    return report


def print_report(r: dict) -> None:
    c = r["config"]
    print(f"== live-CDC soak: {c['minutes']} min, maintainer {c['maintainer']}, quiet {c['quiet_seconds']} s, fence {c.get('fence', False)}, cadence {c['cadence']} s / {c['maint_cadence']} s")
    for name, w in r["writers"].items():
        print(f"  {name}: {w['succeeded']}/{w['attempts']} commits ok, failed {w['failed']} {w['failed_by_cause']} {w['failed_by_kind']}, op p50 {w['seconds_p50']} s, fence wait p50/max {w.get('fence_wait_s_p50_max')}")
    print(f"  maintainer jobs: {r['maintainer_totals']}")
    for name, j in r["maintainer_jobs"].items():
        print(f"    {name}: {j}")
    print(f"  compaction: {r['compaction']}")
    v = r["verification"]
    print(f"  expected {v['expected']['rows']} rows; reads: " + ", ".join(f"{k}={'OK' if x.get('equal') else x}" for k, x in v["reads"].items()))
    print(f"  keys lost {v['keys_lost']}, resurrected {v['keys_resurrected']}, stale {v['keys_stale']}, duplicates {v['duplicate_rows']}")
    print(f"  table before:  {r['table_before']}\n  table at stop: {r['table_at_stop']}\n  after a final maintenance round: {r['table_after_final_round']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--minutes", type=float, default=2.5)
    p.add_argument("--maintainer", choices=["cryo", "spark", "none"], default="cryo")
    p.add_argument("--quiet-seconds", type=float, default=0, help="cryo's compaction quiet period (0: none)")
    p.add_argument("--fence", action="store_true", help="writers and cryo share a cryo.CommitFence (no writer operation spans a Cryo commit)")
    p.add_argument("--cadence", type=float, default=4.0, help="seconds between a writer's commits")
    p.add_argument("--maint-cadence", type=float, default=4.0, help="seconds between maintenance rounds")
    p.add_argument("--day-seconds", type=float, default=30.0, help="wall-clock length of a simulated day")
    p.add_argument("--seed-days", type=int, default=6)
    p.add_argument("--seed-appends", type=int, default=6, help="small appends per seeded day")
    p.add_argument("--batch-rows", type=int, default=40)
    p.add_argument("--cold-share", type=float, default=0.1, help="share of updates/deletes on days older than yesterday")
    p.add_argument("--retention-seconds", type=float, default=120, help="expire snapshots older than this")
    p.add_argument("--seed", type=int, default=20260308)
    args = p.parse_args()
    if args.role is None:
        main_run(args)
        return
    run = Run(Path(args.out).resolve())
    try:
        {
            "spark-writer": spark_writer,
            "pyiceberg-writer": pyiceberg_writer,
            "cryo-maintainer": cryo_maintainer,
            "spark-maintainer": spark_maintainer,
        }[args.role](run)
    except Exception:
        traceback.print_exc()
        raise


if __name__ == "__main__":
    main()
