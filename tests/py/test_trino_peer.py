"""Rendered Trino SQL (golden/render/trino/*.json) run on a real Trino server on loopback.

`scripts/peers.sh` installs Trino (a single-node server assembled from Maven Central) and
`scripts/services.sh start` runs it on 127.0.0.1 with the Iceberg catalog `lake`: the sqlite SQL
catalog (`TRINO_LAKE_URI`, the schema PyIceberg, Java's JdbcCatalog and Cryo share) with a `file://`
warehouse. Trino and Cryo/PyIceberg/DuckDB therefore work on the very same tables.

1. Every golden statement runs on Trino, in golden order, on tables built for it:
   - the hand-built goldens (operations, predicates, chunks, strategies, version gates, retention floors,
     hostile identifiers): the tables are created from the plan (`golden/render/plans/<case>.json`, see
     `plan_tables.model_table(..., engine="trino")`) with PyIceberg in the catalog named like the golden's
     `engine_catalog` (`lake` = the services' catalog; `lake"prod` is created with CREATE CATALOG), then
     filled with one Trino INSERT per append (several data files per partition), merge-on-read DELETEs by
     Trino where the plan rewrites position deletes, an old orphan file where orphans are removed;
   - the `fixtures_*` goldens: on a fresh copy of the fixtures (`make_fixtures.py --local`: PyIceberg and
     Spark tables, equality deletes included) behind a Trino catalog named `fixtures`.
   Each statement must succeed and do its work (OPTIMIZE rewrites files, ANALYZE writes statistics,
   remove_orphan_files deletes the planted file); the rows read before (PyIceberg, and Trino) are the rows
   PyIceberg, DuckDB and Trino read after; the `$snapshots` table shows the `replace` snapshots.
   Where a statement cannot run on Trino for a real reason, the reason is asserted (EXPECTED_FAILURES):
   nothing is skipped silently.
2. `system.runtime.queries` lists a query sent with `X-Trino-Source: cryo` with that source, while it
   runs (the load probe's input), and the query can be cancelled.
3. A table created by Trino SQL in `lake` is read by PyIceberg and, when the `cryo` package is installed,
   scanned, planned and rendered by Cryo; Trino runs the rendered statements and Cryo sees the result.

Without a running Trino the tests skip, saying why; with CRYO_REQUIRE_PEERS=1 (scripts/test.sh) they fail.

Run with the peers venv, services started:  $PEERS_PYTHON -m pytest tests/py/test_trino_peer.py
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402
import plan_tables  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "render" / "trino"
PLANS = REPO / "golden" / "render" / "plans"
FILES = sorted(GOLDEN.glob("*.json"))
FIXTURE_CASES = ["fixtures_upserts_eq", "fixtures_orders_mor", "fixtures_events", "fixtures_unpartitioned"]
HANDBUILT_CASES = [p.stem for p in FILES if p.stem not in FIXTURE_CASES]
REQUIRE = os.environ.get("CRYO_REQUIRE_PEERS") == "1"
ENV = cryo_peers.services_env()
# The retention floors of the catalogs the tests create (services.sh gives `lake` the same): the goldens
# that render 1-day retentions were rendered for such a cluster.
FLOORS = {"expire": "1d", "orphans": "1d"}

# Why some golden statements cannot run on Trino (asserted: the statement must fail with this message).
CASE_FOLDING = (
    "Trino folds every identifier to lower case, quoted or not, and looks the table up under that name; "
    "the catalog holds the name with upper-case letters, so Trino cannot name this table at all "
    "(SHOW TABLES lists it in lower case). The renderer's note says so."
)
HOSTILE_VALUES = [
    "'; DROP TABLE x; --",
    "back\\slash \\' \\\\",
    'quote"double `tick`',
    "tab\there\r\nnewline",
    "{{ jinja }} {% raw %} $$ /* c */ -- ;",
]


# ------------------------------------------------------------------------------------------------
# Trino client
# ------------------------------------------------------------------------------------------------


def _unavailable(reason: str):
    if REQUIRE:
        pytest.fail(f"{reason} (CRYO_REQUIRE_PEERS=1: the Trino peer is required)")
    pytest.skip(reason)


def quote(part: str) -> str:
    return '"' + part.replace('"', '""') + '"'


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Trino:
    """Trino's DB-API client, one statement at a time."""

    def __init__(self, url: str, user: str, source: str = "cryo-test"):
        import trino

        u = urlparse(url)
        self.url = url.rstrip("/")
        self.user = user
        self.conn = trino.dbapi.connect(
            host=u.hostname, port=u.port, user=user, source=source, http_scheme=u.scheme, request_timeout=300
        )
        self.errors = trino.exceptions.TrinoQueryError

    def run(self, sql: str) -> list[list[Any]]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
            return [list(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def attempt(self, sql: str) -> dict:
        t0 = time.monotonic()
        out: dict = {"sql": sql}
        try:
            out["rows"] = self.run(sql)
        except self.errors as e:
            out["error"] = f"{e.error_name}: {e.message}"
        out["seconds"] = round(time.monotonic() - t0, 2)
        return out


@pytest.fixture(scope="module")
def trino() -> Trino:
    try:
        import trino as _  # noqa: F401
    except ImportError:
        _unavailable("the `trino` client is not installed in this venv (scripts/peers.sh installs it)")
    url = ENV.get("TRINO_URL")
    if not url:
        _unavailable("no TRINO_URL: scripts/services.sh did not start Trino (not installed by scripts/peers.sh?)")
    try:
        with urllib.request.urlopen(url + "/v1/info", timeout=5) as r:
            info = json.load(r)
    except OSError as e:
        _unavailable(f"Trino at {url} does not answer ({e}): scripts/services.sh start")
    assert not info.get("starting"), info
    return Trino(url, ENV.get("TRINO_USER", "cryo"))


def lake_catalog():
    """PyIceberg on the services' `lake` (the same sqlite catalog Trino's `lake` is)."""
    return cryo_peers.sql_catalog(
        cryo_peers._local_path(ENV["TRINO_LAKE_URI"].replace("sqlite:///", "", 1)),
        ENV["TRINO_LAKE_WAREHOUSE"],
        name=ENV.get("TRINO_CATALOG", "lake"),
    )


def create_catalog(trino: Trino, name: str, db: Path, warehouse: Path, catalog_name: str, floors: dict | None = FLOORS) -> None:
    """A Trino Iceberg catalog `name` on a sqlite JDBC catalog (as services.sh configures `lake`)."""
    props = {
        "iceberg.catalog.type": "jdbc",
        "iceberg.jdbc-catalog.driver-class": "org.sqlite.JDBC",
        "iceberg.jdbc-catalog.connection-url": f"jdbc:sqlite:{db}",
        "iceberg.jdbc-catalog.catalog-name": catalog_name,
        "iceberg.jdbc-catalog.default-warehouse-dir": warehouse.as_uri(),
        "iceberg.jdbc-catalog.schema-version": "V1",
        "fs.local.enabled": "true",
        "local.location": "/",
    }
    if floors is not None:
        props["iceberg.expire-snapshots.min-retention"] = floors["expire"]
        props["iceberg.remove-orphan-files.min-retention"] = floors["orphans"]
    with_ = ", ".join(f"{quote(k)} = {sql_string(v)}" for k, v in props.items())
    trino.run(f"DROP CATALOG IF EXISTS {quote(name)}")
    trino.run(f"CREATE CATALOG {quote(name)} USING iceberg WITH ({with_})")


# ------------------------------------------------------------------------------------------------
# Tables from the plan, for Trino
# ------------------------------------------------------------------------------------------------


def _pyiceberg_type(ty: str):
    from pyiceberg import types as T

    simple = {
        "boolean": T.BooleanType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "string": T.StringType(),
        "uuid": T.UUIDType(),
        "binary": T.BinaryType(),
        "date": T.DateType(),
        "time": T.TimeType(),
        "timestamp": T.TimestampType(),
        "timestamptz": T.TimestamptzType(),
        "timestamp_ns": T.TimestampNanoType(),
        "timestamptz_ns": T.TimestamptzNanoType(),
    }
    if ty in simple:
        return simple[ty]
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", ty)
    if m:
        return T.DecimalType(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"fixed\[(\d+)\]", ty)
    if m:
        return T.FixedType(int(m.group(1)))
    raise ValueError(f"type {ty}")


def _tree(columns: dict[str, str]) -> dict[str, Any]:
    """Dotted paths as a tree (struct columns hold dicts), in first-seen order: the table's column order."""
    tree: dict[str, Any] = {}
    for path, ty in columns.items():
        node = tree
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = ty
    return tree


def _schema(columns: dict[str, str]):
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StructType

    next_id = [0]

    def fields(node: dict) -> list:
        out = []
        for name, sub in node.items():
            next_id[0] += 1
            fid = next_id[0]
            t = StructType(*fields(sub)) if isinstance(sub, dict) else _pyiceberg_type(sub)
            out.append(NestedField(fid, name, t, required=False))
        return out

    return Schema(*fields(_tree(columns)))


def _spec(schema, partition: list[tuple[str, str]]):
    from pyiceberg import transforms as X
    from pyiceberg.partitioning import PartitionField, PartitionSpec

    out = []
    for i, (col, t) in enumerate(partition):
        source = schema.find_field(col).field_id
        base = col.replace(".", "_")
        if t == "identity":
            tr, name = X.IdentityTransform(), base
        elif t in plan_tables.TIME_TRANSFORMS:
            tr, name = {"year": X.YearTransform, "month": X.MonthTransform, "day": X.DayTransform, "hour": X.HourTransform}[t](), f"{base}_{t}"
        elif t.startswith("bucket["):
            tr, name = X.BucketTransform(int(t[7:-1])), f"{base}_bucket"
        elif t.startswith("truncate["):
            tr, name = X.TruncateTransform(int(t[9:-1])), f"{base}_trunc"
        elif t == "void":
            tr, name = X.VoidTransform(), f"{base}_null"
        else:
            raise ValueError(f"transform {t}")
        out.append(PartitionField(source_id=source, field_id=1000 + i, transform=tr, name=name))
    return PartitionSpec(*out)


def trino_literal(value: Any, ty: str) -> str:
    """A Trino SQL literal of `value` for an Iceberg column of type `ty` (INSERT coerces it)."""
    if value is None:
        return "NULL"
    if ty == "boolean":
        return "TRUE" if value else "FALSE"
    if ty == "int":
        return f"INTEGER '{int(value)}'"
    if ty == "long":
        return f"BIGINT '{int(value)}'"
    if ty == "float":
        return f"REAL '{float(value)!r}'"
    if ty == "double":
        return f"DOUBLE '{float(value)!r}'"
    if ty.startswith("decimal("):
        p, s = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", ty).groups()
        return f"CAST(DECIMAL '{value}' AS DECIMAL({p}, {s}))"
    if ty == "string":
        return sql_string(value)
    if ty == "uuid":
        return f"UUID '{uuid.UUID(str(value))}'"
    if ty == "binary" or ty.startswith("fixed["):
        return f"X'{bytes(value).hex()}'"
    if ty == "date":
        return f"DATE '{value.isoformat()}'"
    if ty == "time":
        return f"TIME '{value.strftime('%H:%M:%S.%f')}'"
    if ty == "timestamp":
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if ty == "timestamptz":
        return f"TIMESTAMP '{value.astimezone(dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S.%f')} UTC'"
    if ty == "timestamp_ns":
        return f"TIMESTAMP '{value}'"
    if ty == "timestamptz_ns":
        return f"TIMESTAMP '{value} UTC'"
    raise ValueError(f"no Trino literal for {ty}")


def _row_sql(row: dict[str, Any], columns: dict[str, str]) -> str:
    def node_sql(node: dict, prefix: str) -> list[str]:
        out = []
        for name, sub in node.items():
            path = prefix + name
            if isinstance(sub, dict):
                out.append("ROW(" + ", ".join(node_sql(sub, path + ".")) + ")")
            else:
                out.append(trino_literal(row.get(path), sub))
        return out

    return "(" + ", ".join(node_sql(_tree(columns), "")) + ")"


def _arrow_value(value: Any, ty: str) -> Any:
    if ty == "uuid" and value is not None:
        return uuid.UUID(str(value)).bytes
    if isinstance(value, plan_tables.NanoTimestamp):
        raise ValueError("PyIceberg 0.12 cannot write nanosecond timestamps")
    return value


def _create_v3_table(pycat, ident: tuple, schema, spec, properties: dict, location: str | None = None, sort_order=None):
    """PyIceberg 0.12 builds v3 metadata but refuses to write it (NotImplementedError, apache/iceberg-python
    #1551): write its JSON ourselves (the model's own serialization, plus the `next-row-id` v3 requires)
    and register it. Trino writes everything after that."""
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    if location is None:
        location = pycat.properties["warehouse"].rstrip("/") + "/" + ".".join(ident[:-1]) + "/" + f"{ident[-1]}-{uuid.uuid4().hex[:8]}"
    meta = new_table_metadata(schema, spec, sort_order or UNSORTED_SORT_ORDER, location, properties)
    doc = meta.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert doc["format-version"] == 3, doc["format-version"]
    doc.setdefault("next-row-id", 0)
    path = Path(_local(location)) / "metadata" / f"00000-{uuid.uuid4()}.metadata.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return pycat.register_table(ident, path.as_uri())


def trino_can_name(table: dict) -> bool:
    """Trino folds identifiers to lower case: a name with upper-case letters cannot be addressed."""
    return all(p == p.lower() for p in [*table["namespace"], table["name"]])


def build_table(trino: Trino, pycat, target: str, model: plan_tables.TableModel) -> dict:
    """Create the table with PyIceberg, fill it (Trino INSERTs, or PyIceberg where Trino cannot name the
    table), write merge-on-read deletes with Trino, plant orphans; returns what was built."""
    import pyarrow as pa
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    ident = (*model.namespace, model.name)
    for i in range(1, len(model.namespace) + 1):
        pycat.create_namespace_if_not_exists(tuple(model.namespace[:i]))
    schema = _schema(model.columns)
    spec = _spec(schema, model.partition)
    kwargs: dict = {}
    if model.needs_sort_order:
        kwargs["sort_order"] = SortOrder(SortField(source_id=schema.find_field(plan_tables.ROW_ID).field_id, transform=IdentityTransform()))
    if any(re.search(r"[\x00-\x1f]", p) for p in ident):
        # PyIceberg 0.12 records the location with the control character but its file IO drops it from the
        # path it writes (URL parsing strips newlines): the metadata it points to would not exist. The
        # location is free (the identifier is what the statements name): give such a table a clean one.
        slug = "/".join(re.sub(r"[\x00-\x1f]", "_", p) for p in ident)
        kwargs["location"] = pycat.properties["warehouse"].rstrip("/") + f"/{slug}-{uuid.uuid4().hex[:8]}"
    props = {"format-version": str(model.format_version)}
    if model.format_version >= 3:
        table = _create_v3_table(pycat, ident, schema, spec, props, **kwargs)
    else:
        table = pycat.create_table(ident, schema=schema, partition_spec=spec, properties=props, **kwargs)
    batches = plan_tables.rows_for(model)
    writer = "trino" if trino_can_name({"namespace": model.namespace, "name": model.name}) else "pyiceberg"
    for batch in batches:
        if writer == "trino":
            trino.run(f"INSERT INTO {target} VALUES " + ", ".join(_row_sql(r, model.columns) for r in batch))
        else:
            arrow = table.schema().as_arrow()
            rows = [plan_tables._nest({c: _arrow_value(r.get(c), t) for c, t in model.columns.items()}) for r in batch]
            table.append(pa.Table.from_pylist(rows, schema=arrow))
    deleted: set[int] = set()
    for a in range(model.position_delete_commits):
        # one row of each of append a's files: a position-delete file in every partition
        gone = batches[a][:: plan_tables.ROWS_PER_FILE]
        ids = ", ".join(str(r[plan_tables.ROW_ID]) for r in gone)
        trino.run(f"DELETE FROM {target} WHERE {quote(plan_tables.ROW_ID)} IN ({ids})")
        deleted |= {r[plan_tables.ROW_ID] for r in gone}
    table = pycat.load_table(ident)
    planted = [plan_tables.plant_orphan(table, params) for params in model.orphans]
    # The rows as planned, for the readers to compare with (format v2: what PyIceberg can type in Arrow).
    expected = None
    if model.format_version == 2:
        kept = [r for b in batches for r in b if r[plan_tables.ROW_ID] not in deleted]
        rows = [plan_tables._nest({c: _arrow_value(r.get(c), t) for c, t in model.columns.items()}) for r in kept]
        expected = cryo_peers.fingerprint(pa.Table.from_pylist(rows, schema=table.schema().as_arrow())).as_dict()
    return {
        "writer": writer,
        "expected": expected,
        "rows": sum(len(b) for b in batches) - len(deleted),
        "appends": len(batches),
        "orphans": planted,
        "spec": str(table.spec()),
        **model.describe(),
    }


# ------------------------------------------------------------------------------------------------
# Reading the tables back
# ------------------------------------------------------------------------------------------------


def meta_table(target: str, kind: str) -> str:
    """`"c"."s"."t$files"` for the target `"c"."s"."t"` (identifiers as the renderer quotes them)."""
    assert target.endswith('"')
    return target[:-1] + "$" + kind + '"'


def trino_fingerprint(trino: Trino, target: str, columns: dict[str, str]) -> dict:
    """Trino's own read: row count and a hash of the sorted rows (nanosecond columns as text, which the
    client would truncate)."""
    tops = list(_tree(columns))
    nano = {c.split(".")[0] for c, t in columns.items() if t in plan_tables.NANO_TYPES}
    select = ", ".join(f"CAST({quote(c)} AS varchar)" if c in nano else quote(c) for c in tops)
    rows = trino.run(f"SELECT {select} FROM {target}")
    h = hashlib.sha256()
    for r in sorted(repr(tuple(r)) for r in rows):
        h.update(r.encode())
    return {"rows": len(rows), "sha256": h.hexdigest()}


def file_contents(trino: Trino, target: str) -> dict[str, int]:
    return {str(c): n for c, n in trino.run(f"SELECT content, count(*) FROM {meta_table(target, 'files')} GROUP BY content")}


def snapshots(trino: Trino, target: str) -> list[dict]:
    rows = trino.run(f"SELECT snapshot_id, operation, summary FROM {meta_table(target, 'snapshots')} ORDER BY committed_at")
    return [{"snapshot_id": s, "operation": op, "summary": dict(summary or {})} for s, op, summary in rows]


def _local(uri: str) -> str:
    return cryo_peers._local_path(uri)


def duckdb_path(metadata_location: str, tmp: Path) -> str:
    """DuckDB 1.5.5's iceberg_scan takes a path holding `"` for a qualified name: hand it a symlink."""
    path = _local(metadata_location)
    if '"' not in path:
        return path
    tmp.mkdir(parents=True, exist_ok=True)
    link = tmp / f"{len(list(tmp.iterdir()))}.metadata.json"
    link.symlink_to(path)
    return str(link)


def independent_reads(table, tmp: Path) -> dict:
    """PyIceberg's and DuckDB's fingerprints of the table's current snapshot (or why they cannot read it)."""
    out: dict = {}
    try:
        out["pyiceberg"] = cryo_peers.fingerprint(table.scan().to_arrow()).as_dict()
    except Exception as e:  # noqa: BLE001 - recorded, asserted by the tests
        out["pyiceberg_error"] = f"{type(e).__name__}: {e}"[:500]
    try:
        out["duckdb"] = cryo_peers.fingerprint(cryo_peers.read_duckdb(duckdb_path(table.metadata_location, tmp))).as_dict()
    except Exception as e:  # noqa: BLE001
        out["duckdb_error"] = f"{type(e).__name__}: {e}"[:500]
    return out


def metrics(rows: list[list[Any]]) -> dict[str, Any]:
    """Trino's table procedures answer (metric, value) rows."""
    return {r[0]: r[1] for r in rows if len(r) == 2 and isinstance(r[0], str)}


# ------------------------------------------------------------------------------------------------
# Expected failures: (reason, message pattern), per statement
# ------------------------------------------------------------------------------------------------


def expected_failure(rendered_table: dict, plan_table: dict, operation: str, st: dict) -> tuple[str, str] | None:
    # None left: the renderer refuses the names Trino folds (CASE_FOLDING) and the partitions it cannot
    # scan (test_trino_cannot_scan_a_fixed_partition). A reason for a new kind of failure goes here.
    return None


# ------------------------------------------------------------------------------------------------
# The hand-built goldens
# ------------------------------------------------------------------------------------------------


def _statistics_files(pycat, ident: tuple) -> set[str]:
    """The table's Puffin statistics files (from its metadata.json: PyIceberg cannot parse v3 metadata's
    every field, the JSON is enough)."""
    location = pycat.load_table(ident).metadata_location
    return {s["statistics-path"] for s in json.loads(Path(_local(location)).read_text()).get("statistics", [])}


def _drop_if_exists(pycat, ident: tuple) -> None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = pycat.load_table(ident)
    except NoSuchTableError:
        return
    location = _local(table.location())
    pycat.drop_table(ident)
    if os.path.isdir(location):
        shutil.rmtree(location)


def run_handbuilt_case(trino: Trino, case: str, root: Path) -> dict:
    rendered = json.loads((GOLDEN / f"{case}.json").read_text())
    plan = json.loads((PLANS / f"{case}.json").read_text())
    catalog = rendered["engine_catalog"]
    lake = ENV.get("TRINO_CATALOG", "lake")
    t_case = time.monotonic()
    out: dict = {"catalog": catalog, "tables": []}
    if catalog == lake:
        # The services' catalog: the tables go where Cryo finds them (TRINO_LAKE_URI); same-named
        # tables of an earlier case or run are dropped first.
        pycat = lake_catalog()
        out["where"] = "services' lake"
    else:
        # Any other engine catalog (a hostile name too) is created with CREATE CATALOG on its own sqlite file.
        d = root / case
        (d / "warehouse").mkdir(parents=True)
        pycat = cryo_peers.sql_catalog(d / "catalog.db", d / "warehouse", name=catalog)  # creates the catalog tables
        create_catalog(trino, catalog, d / "catalog.db", d / "warehouse", catalog)
        out["where"] = str(d)
    try:
        for rt, pt in zip(rendered["tables"], plan["tables"]):
            entry: dict = {"table": rt["table"], "target": rt["target"]}
            out["tables"].append(entry)
            folded = not trino_can_name(rt["table"])
            if not any(s["statements"] for s in rt["steps"]) and not folded:
                entry["no_statements"] = True  # every step skipped by the renderer: nothing targets the table
                continue
            # A name Trino folds is refused by the renderer; the table is still built, to see that Trino
            # indeed cannot name it (the refusal is not overcautious).
            assert rt["table"] == pt["table"], (rt["table"], pt["table"])
            model = plan_tables.model_table(pt, engine="trino")
            ident = (*model.namespace, model.name)
            target = rt["target"]
            t0 = time.monotonic()
            if catalog == lake:
                _drop_if_exists(pycat, ident)
            entry["built"] = build_table(trino, pycat, target, model)
            entry["build_s"] = round(time.monotonic() - t0, 2)
            table = pycat.load_table(ident)
            entry["before"] = independent_reads(table, root / "duckdb-links")
            entry["metadata_before"] = table.metadata_location
            named = trino_can_name(rt["table"])
            if named:
                entry["trino_before"] = trino_fingerprint(trino, target, model.columns)
                entry["files_before"] = file_contents(trino, target)
                entry["snapshots_before"] = snapshots(trino, target)
            else:
                entry["show_tables"] = [r[0] for r in trino.run(f"SHOW TABLES FROM {quote(catalog)}.{quote('.'.join(model.namespace))}")]
                entry["probe"] = trino.attempt(f"SELECT count(*) FROM {target}")
            t0 = time.monotonic()
            entry["statements"] = []
            for step in rt["steps"]:
                for st in step["statements"]:
                    stats = _statistics_files(pycat, ident) if step["operation"] == "compute_statistics" else None
                    res = trino.attempt(st["sql"])
                    res.update(operation=step["operation"], chunk=st["chunk"])
                    if stats is not None:
                        res["new_statistics_files"] = len(_statistics_files(pycat, ident) - stats)
                    exp = expected_failure(rt, pt, step["operation"], st)
                    if exp:
                        res["expected_failure"] = {"reason": exp[0], "pattern": exp[1]}
                    entry["statements"].append(res)
            entry["run_s"] = round(time.monotonic() - t0, 2)
            table = pycat.load_table(ident)
            entry["metadata_after"] = table.metadata_location
            entry["after"] = independent_reads(table, root / "duckdb-links")
            if named:
                entry["trino_after"] = trino_fingerprint(trino, target, model.columns)
                entry["files_after"] = file_contents(trino, target)
                entry["snapshots_after"] = snapshots(trino, target)
            entry["orphans_after"] = [{**o, "exists": os.path.exists(o["path"])} for o in entry["built"]["orphans"]]
    finally:
        if catalog != lake:
            trino.run(f"DROP CATALOG IF EXISTS {quote(catalog)}")
    out["seconds"] = round(time.monotonic() - t_case, 2)
    return out


TIMINGS: dict[str, float] = {}


def drop_from_lake(idents: list[tuple]) -> None:
    """Leave the services' lake as the tests found it: drop the tables they built (files too) and the
    namespaces that are empty afterwards."""
    pycat = lake_catalog()
    for ident in idents:
        _drop_if_exists(pycat, ident)
    for ns in sorted({ident[:-1] for ident in idents}, key=len, reverse=True):
        try:
            if not pycat.list_tables(ns):
                pycat.drop_namespace(ns)
        except Exception:  # noqa: BLE001 - a namespace someone else uses, or already gone
            pass


@pytest.fixture(scope="module")
def handbuilt(trino, tmp_path_factory):
    root = tmp_path_factory.mktemp("trino-cases")
    results = {}
    try:
        for case in HANDBUILT_CASES:
            results[case] = run_handbuilt_case(trino, case, root)
            TIMINGS[f"handbuilt {case}_s"] = results[case]["seconds"]
        if os.environ.get("CRYO_RENDER_TRINO_RESULTS"):  # keep the report for a look afterwards
            Path(os.environ["CRYO_RENDER_TRINO_RESULTS"]).write_text(json.dumps(results, indent=1, default=str))
        sys.stderr.write(f"\ntrino timings: {json.dumps(TIMINGS)}\n")
        yield results
    finally:
        lake = ENV.get("TRINO_CATALOG", "lake")
        drop_from_lake(
            [
                (*t["table"]["namespace"], t["table"]["name"])
                for case in HANDBUILT_CASES
                if case in results and results[case]["catalog"] == lake
                for t in results[case]["tables"]
                if "built" in t
            ]
        )


def _handbuilt(results):
    for case in HANDBUILT_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        for table, entry in zip(rendered["tables"], results[case]["tables"]):
            yield case, table, entry


def test_golden_files_exist():
    names = {p.stem for p in FILES}
    for case in [*FIXTURE_CASES, "operations", "predicates", "chunks", "hostile_identifiers", "version_gates_old", "retention_floors"]:
        assert case in names, f"golden/render/trino/{case}.json missing (CRYO_BLESS=1 cargo test -p cryo-core --test it render)"


def test_server_is_the_expected_release(trino):
    with urllib.request.urlopen(trino.url + "/v1/info", timeout=5) as r:
        info = json.load(r)
    assert info["nodeVersion"]["version"] == ENV.get("TRINO_VERSION"), info
    # The goldens render for Trino 480 (retain_last needs 479+, optimize_manifests 470+).
    assert int(info["nodeVersion"]["version"]) >= 480, info
    assert trino.run("SELECT 1") == [[1]]


def test_every_handbuilt_statement_runs(handbuilt):
    ran = expected = 0
    for case, table, entry in _handbuilt(handbuilt):
        want = [st["sql"] for s in table["steps"] for st in s["statements"]]
        if entry.get("no_statements"):
            assert not want
            continue
        assert [s["sql"] for s in entry["statements"]] == want, f"{case} {entry['target']}"
        for s in entry["statements"]:
            if "expected_failure" in s:
                exp = s["expected_failure"]
                assert "error" in s, f"{case} {entry['target']}: expected to fail ({exp['reason']}) but ran: {s['sql']!r}"
                assert re.search(exp["pattern"], s["error"]), f"{case}: {s['error']} (expected /{exp['pattern']}/: {exp['reason']})"
                expected += 1
            else:
                assert "error" not in s, f"{case} {entry['target']}: Trino refused {s['sql']!r}: {s['error']}"
                ran += 1
    total = sum(len(st["statements"]) for c in HANDBUILT_CASES for t in json.loads((GOLDEN / f"{c}.json").read_text())["tables"] for st in t["steps"])
    assert ran + expected == total and ran >= 50, (ran, expected, total)
    # No expected failures remain: names Trino folds and chunks keyed by a fixed column are not rendered
    # at all (test_uppercase_names_are_what_trino_cannot_name, test_trino_cannot_scan_a_fixed_partition).
    assert expected == 0, expected


def test_tables_were_built_as_planned(handbuilt):
    """Several data files per planned partition, merge-on-read delete files where the plan rewrites them."""
    built = 0
    for case, _table, entry in _handbuilt(handbuilt):
        if entry.get("no_statements"):
            continue
        b = entry["built"]
        assert b["rows"] > 0
        if "files_before" in entry:
            partitions = max(1, b["planned_partitions"])
            assert entry["files_before"].get("0", 0) >= b["appends"] * partitions, (case, entry["target"], entry["files_before"])
            if b["position_delete_commits"]:
                assert entry["files_before"].get("1", 0) > 0, f"{case} {entry['target']}: no delete files"
            assert entry["trino_before"]["rows"] == b["rows"], (case, entry["target"])
        built += 1
    assert built >= 20


def test_uppercase_names_are_what_trino_cannot_name(handbuilt):
    folded = {e["table"]["name"]: e for case, t, e in _handbuilt(handbuilt) if case == "hostile_identifiers" and not trino_can_name(t["table"])}
    assert sorted(folded) == ["Ünïcödé 表"], sorted(folded)
    rendered = {t["table"]["name"]: t for t in json.loads((GOLDEN / "hostile_identifiers.json").read_text())["tables"]}
    for name, entry in folded.items():
        assert name.lower() in entry["show_tables"], entry["show_tables"]  # listed, folded
        assert name not in entry["show_tables"]
        assert entry["built"]["writer"] == "pyiceberg"
        # Trino cannot name it: what the renderer would have addressed does not exist ...
        assert re.search(r"does not exist", entry["probe"].get("error", "")), (CASE_FOLDING, entry["probe"])
        # ... so nothing was rendered for it, each step refused with the reason.
        t = rendered[name]
        assert not any(s["statements"] for s in t["steps"]), t
        assert t["skipped"] and all(
            k["reason"].startswith("unaddressable table name") and "folds identifiers to lower case" in k["reason"]
            for k in t["skipped"]
        ), t["skipped"]
        assert entry["statements"] == []


def _did_work(op: str, rows: list, res: dict | None = None) -> bool | None:
    if op == "compute_statistics":
        return None if res is None or "new_statistics_files" not in res else res["new_statistics_files"] > 0
    m = metrics(rows)
    if op in ("rewrite_data_files", "convert_equality_deletes"):
        return int(m.get("rewritten_data_files_count", 0)) > 0
    if op == "rewrite_manifests":
        return int(m.get("rewritten_manifests_count", 0)) > 0
    if op == "remove_orphan_files":
        return int(m.get("deleted_files_count", 0)) > 0
    return None


def test_statements_did_their_work(handbuilt):
    """Each OPTIMIZE rewrites the files built for its partitions (so its WHERE selects what the plan meant),
    optimize_manifests rewrites manifests, remove_orphan_files deletes the planted file, ANALYZE writes a
    statistics file. Exempt: a rewrite after a whole-table rewrite-all (convert) of the same table, which
    leaves single-file partitions Trino does not touch."""
    checked = 0
    for case, _table, entry in _handbuilt(handbuilt):
        after_rewrite_all = False
        for s in entry.get("statements", []):
            if "error" in s:
                continue
            op = s["operation"]
            did = _did_work(op, s["rows"], s)
            exempt = after_rewrite_all and op == "rewrite_data_files"
            if did is not None and not exempt:
                assert did, f"{case} {entry['target']}: {op} chunk {s['chunk']} did nothing: {s['rows']}\n{s['sql']}"
                checked += 1
            if op == "convert_equality_deletes" and " WHERE " not in s["sql"]:
                after_rewrite_all = True
    assert checked >= 40, checked


# What keeps PyIceberg 0.12 (pyarrow 26) from reading a table Trino wrote: Trino's position-delete files
# store file_path with DELTA_LENGTH_BYTE_ARRAY, which pyarrow cannot decode into the dictionary PyIceberg asks for.
PYICEBERG_TRINO_DELETES = "DecodeArrow of DictAccumulator for DeltaLengthByteArrayDecoder"


def test_rows_unchanged(handbuilt):
    """The rows read before the statements are the rows read after: DuckDB before = DuckDB after =
    PyIceberg after (and PyIceberg before where it can read), Trino before = Trino after. Each reader that
    cannot read a table says why, and only for a known reason: tables with a nanosecond timestamp (format
    v3) are read by Trino only (PyIceberg 0.12 and DuckDB 1.5.5 refuse the type); PyIceberg cannot read
    Trino's position-delete files (PYICEBERG_TRINO_DELETES)."""
    compared = 0
    for case, _table, entry in _handbuilt(handbuilt):
        if entry.get("no_statements"):
            continue
        before, after = entry["before"], entry["after"]
        where = f"{case} {entry['target']}"
        nanos = any(t in plan_tables.NANO_TYPES for t in entry["built"]["columns"].values())
        if nanos:
            for side in (before, after):
                assert "timestamp-nanos" in side.get("pyiceberg_error", ""), side
                assert "timestamptz_ns" in side.get("duckdb_error", ""), side
        else:
            assert "duckdb" in before and "duckdb" in after, (where, before, after)
            assert after["duckdb"] == before["duckdb"], f"{where}: DuckDB reads other rows after"
            assert before["duckdb"] == entry["built"]["expected"], f"{where}: the table does not hold the planned rows"
            for side in (before, after):
                if "pyiceberg" in side:
                    assert side["pyiceberg"] == before["duckdb"], f"{where}: PyIceberg and DuckDB disagree"
                else:
                    assert entry["built"]["position_delete_commits"] and PYICEBERG_TRINO_DELETES in side["pyiceberg_error"], (where, side)
            compared += 1
        if "trino_after" in entry:
            assert entry["trino_after"] == entry["trino_before"], f"{where}: Trino reads other rows after"
            assert entry["trino_before"]["rows"] == entry["built"]["rows"], where
    assert compared >= 20


def test_snapshots_show_the_rewrites(handbuilt):
    for case, _table, entry in _handbuilt(handbuilt):
        if "snapshots_after" not in entry:
            continue
        before = {s["snapshot_id"] for s in entry["snapshots_before"]}
        new = [s for s in entry["snapshots_after"] if s["snapshot_id"] not in before]
        ok = [s for s in entry["statements"] if "error" not in s]
        rewrites = [s for s in ok if s["operation"] in ("rewrite_data_files", "convert_equality_deletes") and _did_work(s["operation"], s["rows"])]
        replaces = [s for s in new if s["operation"] == "replace"]
        if rewrites:
            assert any(int(s["summary"].get("deleted-data-files", "0")) > 0 for s in replaces), (case, entry["target"], new)
            assert len(replaces) >= len(rewrites), (case, entry["target"], len(replaces), len(rewrites))
            assert all(s["summary"].get("engine-name") == "trino" for s in replaces)
        if entry["built"]["position_delete_commits"] and rewrites:
            assert any(int(s["summary"].get("removed-position-delete-files", "0")) > 0 for s in replaces), (case, entry["target"])
        if any(s["operation"] == "rewrite_manifests" and _did_work("rewrite_manifests", s["rows"]) for s in ok):
            assert any(int(s["summary"].get("manifests-replaced", "0")) > 0 for s in replaces), (case, entry["target"], new)


def test_orphans_removed_unless_dry_run(handbuilt):
    """Trino's remove_orphan_files deletes the planted file; a planned dry run is not rendered for Trino
    (it has none), so that file stays."""
    planted = 0
    for case, table, entry in _handbuilt(handbuilt):
        for o in entry.get("orphans_after", []):
            ran = [s for s in entry["statements"] if s["operation"] == "remove_orphan_files"]
            if o["dry_run"]:
                assert not ran and o["exists"], (case, entry["target"], o)
                assert any("dry run" in s["reason"] for s in table["skipped"] if s["operation"] == "remove_orphan_files")
            else:
                assert ran and not o["exists"], f"{case} {entry['target']}: {o['path']} still there"
                assert int(metrics(ran[0]["rows"])["deleted_files_count"]) == 1, ran[0]["rows"]
            planted += 1
    assert planted >= 4


def test_hostile_values_reach_trino_intact(handbuilt, trino):
    """The first hostile table's OPTIMIZE selected the five hostile partition values (it rewrote them)."""
    entry = handbuilt["hostile_identifiers"]["tables"][0]
    s = entry["statements"][0]
    assert s["operation"] == "rewrite_data_files" and "error" not in s, s
    # five partitions (one per hostile value), APPENDS files each: every value selected its partition
    assert int(metrics(s["rows"])["rewritten_data_files_count"]) == len(HOSTILE_VALUES) * plan_tables.APPENDS, s["rows"]


def test_retention_floor_is_trinos_reason(trino, handbuilt, tmp_path):
    """The renderer skips a 1-day expiry on a cluster with Trino's default 7-day floor, quoting Trino's
    refusal: a catalog with the default floors (on the same sqlite catalog) refuses it with that message."""
    golden = json.loads((GOLDEN / "retention_floors.json").read_text())
    reason = next(s["reason"] for t in golden["tables"] if t["table"]["name"] == "expire_1d" for s in t["skipped"])
    assert "is shorter than the minimum retention configured in the system" in reason
    db = cryo_peers._local_path(ENV["TRINO_LAKE_URI"].replace("sqlite:///", "", 1))
    create_catalog(trino, "cryo_default_floors", Path(db), Path(_local(ENV["TRINO_LAKE_WAREHOUSE"])), ENV.get("TRINO_CATALOG", "lake"), floors=None)
    try:
        res = trino.attempt('ALTER TABLE "cryo_default_floors"."lake"."expire_30d" EXECUTE expire_snapshots(retention_threshold => \'1d\')')
        assert "error" in res and "is shorter than the minimum retention configured in the system (7.00d)" in res["error"], res
        ok = trino.attempt('ALTER TABLE "cryo_default_floors"."lake"."expire_30d" EXECUTE expire_snapshots(retention_threshold => \'7d\')')
        assert "error" not in ok, ok
    finally:
        trino.run('DROP CATALOG IF EXISTS "cryo_default_floors"')


def test_trino_cannot_scan_a_fixed_partition(trino):
    """Why the renderer leaves out a partition keyed by a fixed column for Trino (and plan_tables leaves
    a fixed partition field out of the tables it builds for Trino): Trino fails every scan of such a
    table with the message the renderer's skip reason quotes."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import FixedType, LongType, NestedField

    pycat = lake_catalog()
    ident = ("cryo_trino_probe", "fixed_partition")
    pycat.create_namespace_if_not_exists(ident[:1])
    _drop_if_exists(pycat, ident)
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "tag", FixedType(2), required=False))
    pycat.create_table(ident, schema=schema, partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "tag")))
    target = f"{quote(ENV.get('TRINO_CATALOG', 'lake'))}.{quote(ident[0])}.{quote(ident[1])}"
    try:
        assert trino.run(f"INSERT INTO {target} VALUES (1, X'CAFE')") == [[1]]
        res = trino.attempt(f"SELECT count(*) FROM {target}")
        assert "error" in res, res
        # The cause, from the failure's chain (the client's message is the wrapper's).
        r = _raw_statement(trino.url, f"SELECT count(*) FROM {target}", source="cryo-test")
        chain = []
        f = r["error"].get("failureInfo")
        while f:
            chain.append(f.get("message") or "")
            f = f.get("cause")
        assert any("Unsupported iceberg type: fixed[2]" in m for m in chain), chain
    finally:
        drop_from_lake([ident])
    # The golden `predicates` chunk keyed by `tag` (fixed[2]) renders no statement, only a skip that
    # says why, quoting the message seen above.
    golden = json.loads((GOLDEN / "predicates.json").read_text())
    (table,) = golden["tables"]
    sqls = [st["sql"] for step in table["steps"] for st in step["statements"]]
    assert not any('"tag"' in sql for sql in sqls), sqls
    (skip,) = [s for s in table["skipped"] if any("tag=cafe" in p for p in s["partitions"])]
    assert skip["operation"] == "rewrite_data_files" and skip["chunk"] == 3, skip
    assert "partitioned by tag (fixed[2])" in skip["reason"], skip
    assert "Unsupported iceberg type: fixed[2]" in skip["reason"], skip
    assert "never turned into a whole-table statement" in skip["reason"], skip


# ------------------------------------------------------------------------------------------------
# The fixture goldens
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_results(trino, tmp_path_factory) -> dict:
    """A fresh fixture copy behind a Trino catalog `fixtures`; every fixture golden statement run on it."""
    out = tmp_path_factory.mktemp("trino-fixtures")
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "fixtures" / "make_fixtures.py"), "--out", str(out), "--local"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    TIMINGS["make_fixtures_s"] = round(time.monotonic() - t0, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    create_catalog(trino, "fixtures", out / "catalog.db", out / "warehouse", "fixtures")
    runs: dict = {}
    try:
        for case in FIXTURE_CASES:
            rendered = json.loads((GOLDEN / f"{case}.json").read_text())
            assert rendered["engine_catalog"] == "fixtures"
            for table in rendered["tables"]:
                ident = ".".join(["fixtures", *table["table"]["namespace"], table["table"]["name"]])
                target = table["target"]
                run: dict = {"before": snapshots(trino, target), "files_before": file_contents(trino, target)}
                t0 = time.monotonic()
                run["statements"] = []
                for step in table["steps"]:
                    for st in step["statements"]:
                        res = trino.attempt(st["sql"])
                        res.update(operation=step["operation"], chunk=st["chunk"])
                        run["statements"].append(res)
                run["seconds"] = round(time.monotonic() - t0, 2)
                run["after"] = snapshots(trino, target)
                run["files_after"] = file_contents(trino, target)
                runs[ident] = run
                TIMINGS[f"fixture {ident}_s"] = run["seconds"]
    finally:
        trino.run('DROP CATALOG IF EXISTS "fixtures"')
    return {"dir": out, "manifest": manifest, "runs": runs}


def test_fixture_statements_run(fixture_results):
    ran = 0
    for case in FIXTURE_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        for table in rendered["tables"]:
            ident = ".".join(["fixtures", *table["table"]["namespace"], table["table"]["name"]])
            run = fixture_results["runs"][ident]
            assert [s["sql"] for s in run["statements"]] == [st["sql"] for s in table["steps"] for st in s["statements"]]
            for s in run["statements"]:
                assert "error" not in s, f"{ident}: Trino refused {s['sql']!r}: {s['error']}"
                ran += 1
    assert ran >= 30, ran


def test_fixture_rewrites_committed(fixture_results):
    for ident, run in fixture_results["runs"].items():
        before = {s["snapshot_id"] for s in run["before"]}
        new = [s for s in run["after"] if s["snapshot_id"] not in before]
        ops = {s["operation"] for s in run["statements"]}
        if ops & {"rewrite_data_files", "convert_equality_deletes"}:
            assert any(s["operation"] == "replace" and int(s["summary"].get("deleted-data-files", "0")) > 0 for s in new), (ident, new)
        if "rewrite_manifests" in ops:
            assert any(int(s["summary"].get("manifests-replaced", "0")) > 0 for s in new), (ident, new)


def test_fixture_equality_deletes_applied(fixture_results):
    """OPTIMIZE with '1PB' rewrites every file of spark.upserts_eq, applying its equality deletes; Trino
    483 also drops the applied delete files from the table (content 2: none left)."""
    run = fixture_results["runs"]["fixtures.spark.upserts_eq"]
    assert run["files_before"]["2"] == 2, run["files_before"]
    assert run["files_after"].get("2", 0) == 0, run["files_after"]


def test_fixture_rows_unchanged(fixture_results, tmp_path):
    fixtures, manifest = fixture_results["dir"], fixture_results["manifest"]
    catalog = cryo_peers.sql_catalog(fixtures / "catalog.db", fixtures / "warehouse")
    for ident in fixture_results["runs"]:
        entry = manifest["tables"][ident]
        expected = (entry["row_count"], entry["fingerprint"])
        table = catalog.load_table(entry["identifier"])
        assert table.metadata_location != entry["metadata_location"], f"{ident}: nothing was committed"
        duck = cryo_peers.fingerprint(cryo_peers.read_duckdb(duckdb_path(table.metadata_location, tmp_path)))
        assert (duck.rows, duck.sha256) == expected, f"{ident}: DuckDB reads different rows after the run"
        py = cryo_peers.fingerprint(table.scan().to_arrow())
        assert (py.rows, py.sha256) == expected, f"{ident}: PyIceberg reads different rows after the run"


# ------------------------------------------------------------------------------------------------
# system.runtime.queries: what the load probe reads
# ------------------------------------------------------------------------------------------------


def _raw_statement(url: str, sql: str, source: str, until_state: str | None = None) -> dict:
    """Trino's HTTP statement protocol by hand, as Cryo's own client speaks it: POST, then follow nextUri
    (to the end, or until the query reports `until_state`)."""
    headers = {"X-Trino-User": "cryo", "X-Trino-Source": source}
    req = urllib.request.Request(url + "/v1/statement", data=sql.encode(), method="POST", headers=headers)
    while True:
        with urllib.request.urlopen(req, timeout=30) as r:
            doc = json.load(r)
        if not doc.get("nextUri") or doc.get("error") or (until_state and doc.get("stats", {}).get("state") == until_state):
            return doc
        req = urllib.request.Request(doc["nextUri"], headers=headers)


def test_runtime_queries_show_the_cryo_source(trino):
    marker = f"cryo-probe-{uuid.uuid4().hex[:12]}"
    doc = _raw_statement(trino.url, f"SELECT '{marker}' AS probe", source="cryo")
    assert "error" not in doc, doc
    cols = trino.run(
        "SELECT column_name FROM system.information_schema.columns "
        "WHERE table_schema = 'runtime' AND table_name = 'queries'"
    )
    names = {c[0] for c in cols}
    assert {"query_id", "state", "user", "source", "query", "queued_time_ms", "created"} <= names, names
    rows = trino.run(f"SELECT query_id, state, source, \"user\", query FROM system.runtime.queries WHERE query LIKE '%{marker}%' AND source = 'cryo'")
    assert len(rows) == 1, rows
    query_id, state, source, user, query = rows[0]
    assert (state, source, user) == ("FINISHED", "cryo", "cryo") and query == f"SELECT '{marker}' AS probe", rows
    assert query_id == doc["id"]


def test_runtime_queries_show_a_running_cryo_query_and_cancel(trino):
    """A slow query sent with X-Trino-Source: cryo is listed RUNNING (or QUEUED) with that source while it
    runs; DELETE on its nextUri cancels it (what a governor's cancellation does)."""
    marker = f"cryo-slow-{uuid.uuid4().hex[:12]}"
    sql = (
        f"SELECT count(*) AS {quote(marker)} FROM UNNEST(sequence(1, 10000)) a(x) "
        "CROSS JOIN UNNEST(sequence(1, 10000)) b(y) CROSS JOIN UNNEST(sequence(1, 100)) c(z) WHERE (x * y + z) % 7 = 3"
    )
    # Trino dispatches a query once the client follows its first nextUri: poll until it runs.
    doc = _raw_statement(trino.url, sql, source="cryo", until_state="RUNNING")
    assert doc.get("nextUri") and doc["stats"]["state"] == "RUNNING", doc
    seen = trino.run(f"SELECT state, source, \"user\" FROM system.runtime.queries WHERE query_id = '{doc['id']}'")
    assert seen == [["RUNNING", "cryo", "cryo"]], seen
    running = trino.run("SELECT count(*) FROM system.runtime.queries WHERE state = 'RUNNING' AND source = 'cryo'")
    assert running[0][0] >= 1, running
    req = urllib.request.Request(doc["nextUri"], method="DELETE", headers={"X-Trino-User": "cryo"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status in (200, 204)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = trino.run(f"SELECT state, error_code FROM system.runtime.queries WHERE query_id = '{doc['id']}'")
        if state and state[0][0] == "FAILED":
            break
        time.sleep(0.2)
    assert state[0] == ["FAILED", "USER_CANCELED"], state


# ------------------------------------------------------------------------------------------------
# Cryo and Trino on one table: the recipe for integration tests
# ------------------------------------------------------------------------------------------------


def _statements(script: str) -> list[str]:
    """The statements of a rendered script (comment lines out; each statement ends with `;`)."""
    body = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


@pytest.fixture
def recipe_schema(trino):
    lake = ENV.get("TRINO_CATALOG", "lake")
    schema = f"cryo_recipe_{uuid.uuid4().hex[:8]}"
    trino.run(f"CREATE SCHEMA {quote(lake)}.{quote(schema)}")
    yield schema
    trino.run(f"DROP TABLE IF EXISTS {quote(lake)}.{quote(schema)}.{quote('events')}")
    trino.run(f"DROP SCHEMA IF EXISTS {quote(lake)}.{quote(schema)}")


def test_a_table_trino_creates_is_cryos_too(trino, recipe_schema):
    lake = ENV.get("TRINO_CATALOG", "lake")
    schema = recipe_schema
    target = f"{quote(lake)}.{quote(schema)}.{quote('events')}"
    trino.run(
        f"CREATE TABLE {target} (id bigint, ts timestamp(6) with time zone, category varchar) "
        "WITH (format_version = 2, partitioning = ARRAY['day(ts)'])"
    )
    for i in range(6):  # six small files in each of two partitions
        trino.run(
            f"INSERT INTO {target} VALUES ({2 * i}, TIMESTAMP '2026-05-01 0{i}:00:00 UTC', 'a'), "
            f"({2 * i + 1}, TIMESTAMP '2026-05-02 0{i}:00:00 UTC', 'b')"
        )
    pycat = lake_catalog()
    table = pycat.load_table((schema, "events"))
    rows = cryo_peers.fingerprint(table.scan().to_arrow())
    assert rows.rows == 12 and len(table.inspect.files()) == 12
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(_local(table.metadata_location))) == rows

    cryo = pytest.importorskip("cryo", reason="the cryo package is not installed (scripts/test.sh: maturin develop)")
    cat = cryo.Catalog(lake, type="sql", uri=ENV["TRINO_LAKE_URI"], warehouse=ENV["TRINO_LAKE_WAREHOUSE"])
    scan = cat.scan(f"{schema}.events")
    assert scan.data_files == 12
    plan = cat.plan([scan])
    script = plan.render(
        "trino", catalog=lake, version=int(ENV["TRINO_VERSION"]),
        expire_snapshots_min_retention_ms=86_400_000, remove_orphan_files_min_retention_ms=86_400_000,
    )
    statements = _statements(script)
    sys.stderr.write(f"\nrendered by Cryo for Trino:\n{script}\n")
    assert any(" EXECUTE optimize(" in s for s in statements), script
    for sql in statements:
        res = trino.attempt(sql)
        assert "error" not in res, (sql, res["error"])
    after = cat.scan(f"{schema}.events")
    assert after.data_files < 12, after
    table = pycat.load_table((schema, "events"))
    assert cryo_peers.fingerprint(table.scan().to_arrow()) == rows
