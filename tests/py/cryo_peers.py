"""Helpers for tests that check Cryo against real Iceberg peers (PyIceberg, DuckDB, Spark).

Run with the peers venv (``scripts/peers.sh``): ``$PEERS_PYTHON`` from ``$CRYO_PEERS_DIR/peers.env``.

- ``spark_session(catalog_db, warehouse, hadoop_warehouse=None)``: a local Spark + Iceberg session with
  the jdbc catalog ``fixtures`` on the same sqlite file PyIceberg's ``SqlCatalog`` uses (and optionally the
  hadoop catalog ``hadoop``). Two Spark lines are installed (``SPARK_LINES``): 3.5 + Iceberg 1.10 (the
  default, in the peers venv) and 4.1 + Iceberg 1.12 (its own venv, ``SPARK4_PYTHON``); ``line=`` or
  ``$CRYO_SPARK_LINE`` picks the jars, and the running pyspark must be that line's.
- ``fingerprint(arrow_table)``: an order-independent row fingerprint that PyIceberg, DuckDB and Spark
  reads of the same table agree on.
- ``read_pyiceberg(...)``, ``read_duckdb(metadata_json)``, ``read_spark(spark, ident)``: each returns a
  ``pyarrow.Table``.
- ``require(condition, reason)``, ``require_module(name)``: a test whose peer is missing skips, saying
  why, or fails under ``CRYO_REQUIRE_PEERS=1`` (``scripts/test.sh``, where every peer is installed and
  running). Every peer check goes through them; a plain ``pytest.skip`` is for the platform or a peer's
  documented limitation, never for a missing peer.
"""

from __future__ import annotations

import decimal
import hashlib
import importlib
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "Fingerprint",
    "canonical_rows",
    "fingerprint",
    "require",
    "require_module",
    "peers_env",
    "services_env",
    "read_duckdb",
    "read_pyiceberg",
    "read_spark",
    "spark_arrow",
    "sql_catalog",
    "spark_rest_catalog_conf",
    "spark_s3_jdbc_catalog_conf",
    "spark_session",
    "spark_line",
    "spark_line_env",
    "spark_line_missing",
    "local_path",
    "assert_sqlite_unlocked",
    "spark_line_or_skip",
    "spark_line_id",
    "SPARK_LINES",
    "add_spark_catalogs",
    "SPARK_PROCEDURES",
    "cargo_features",
    "cargo_examples",
    "cargo_it_test",
]

# The Spark procedure that Cryo's Spark renderer calls for each plan operation.
SPARK_PROCEDURES = {
    "convert_equality_deletes": "rewrite_data_files",
    "rewrite_position_deletes": "rewrite_position_delete_files",
    "rewrite_data_files": "rewrite_data_files",
    "compute_statistics": "compute_table_stats",
    "rewrite_manifests": "rewrite_manifests",
    "expire_snapshots": "expire_snapshots",
    "remove_orphan_files": "remove_orphan_files",
}

# --------------------------------------------------------------------------------------------
# Cargo, as scripts/test.sh builds
# --------------------------------------------------------------------------------------------

_REPO = Path(__file__).resolve().parents[2]


def cargo_features() -> list[str]:
    """The feature flags of the run's other cargo builds (``CRYO_CORE_FEATURES``, set by
    scripts/test.sh): with them a test's cargo call reuses that build; with other features cargo
    would compile most of the dependency graph again."""
    features = os.environ.get("CRYO_CORE_FEATURES", "")
    return ["--features", features] if features else []


def cargo_examples(*names: str) -> Path:
    """The directory holding cryo-core's examples ``names`` (debug builds).

    Under scripts/test.sh, ``CRYO_EXAMPLES_DIR`` names the directory its build left them in, and no
    cargo runs here (a cargo call would wait for the build directory's lock while the lints build
    beside pytest). Otherwise cargo builds them, and the directory is where cargo put them
    (``CARGO_TARGET_DIR`` and ``CARGO_BUILD_TARGET`` read as cargo reads them)."""
    import subprocess

    built = os.environ.get("CRYO_EXAMPLES_DIR")
    if built:
        missing = [n for n in names if not (Path(built) / n).is_file()]
        assert not missing, f"CRYO_EXAMPLES_DIR={built} lacks {missing}"
        return Path(built)
    cmd = ["cargo", "build", "-q", "-p", "cryo-core", *cargo_features()]
    for name in names:
        cmd += ["--example", name]
    subprocess.run(cmd, cwd=_REPO, check=True, timeout=3600)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or _REPO / "target")
    triple = os.environ.get("CARGO_BUILD_TARGET")
    return (target / triple if triple else target) / "debug" / "examples"


def cargo_it_test(*args: str) -> tuple[list[str], Path]:
    """The command (and its working directory) running cryo-core's integration tests (``--test it``)
    with the test harness's ``args``: the binary ``CRYO_IT_TEST_BIN`` names (scripts/test.sh builds
    it before pytest: no cargo call, no wait for its lock), else ``cargo test``."""
    built = os.environ.get("CRYO_IT_TEST_BIN")
    if built:
        return [built, *args], _REPO / "cryo-core"  # cargo runs a test binary in its package
    return ["cargo", "test", "-q", "-p", "cryo-core", *cargo_features(), "--test", "it", "--", *args], _REPO


# --------------------------------------------------------------------------------------------
# A missing peer: skip, or fail under CRYO_REQUIRE_PEERS=1
# --------------------------------------------------------------------------------------------


def require(condition: object, reason: str) -> None:
    """Nothing when ``condition`` holds; else the test (or, at import time, its module) skips saying
    ``reason``, or fails with it under ``CRYO_REQUIRE_PEERS=1``. ``reason`` says what is missing and how
    to get it (``scripts/peers.sh``, ``scripts/services.sh start``, ...)."""
    if condition:
        return
    import pytest

    if os.environ.get("CRYO_REQUIRE_PEERS") == "1":
        pytest.fail(f"{reason} (CRYO_REQUIRE_PEERS=1: the peer is required)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str, reason: str | None = None) -> Any:
    """The module ``name`` imported, through ``require`` (``pytest.importorskip`` for a peer)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        require(False, reason or f"{name} cannot be imported ({e}): scripts/peers.sh installs it; run with $PEERS_PYTHON")


# --------------------------------------------------------------------------------------------
# Environment written by scripts/peers.sh
# --------------------------------------------------------------------------------------------


def peers_dir() -> Path:
    return Path(os.environ.get("CRYO_PEERS_DIR") or Path.home() / ".cache" / "cryo-peers")


def peers_env() -> dict[str, str]:
    """Variables from ``$CRYO_PEERS_DIR/peers.env``, overridden by the process environment."""
    env: dict[str, str] = {}
    path = peers_dir() / "peers.env"
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line.startswith("export ") or "=" not in line:
                continue
            key, _, value = line[len("export ") :].partition("=")
            parts = shlex.split(value) if value else [""]
            env[key.strip()] = parts[0] if parts else ""
    for key in list(env):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def services_env() -> dict[str, str]:
    """Variables from ``$CRYO_PEERS_DIR/run/services.env`` (``scripts/services.sh start``), overridden by
    the process environment: endpoints of the loopback services (``TRINO_URL``, ``CRYO_REST_URI``, ...)."""
    env: dict[str, str] = {}
    path = peers_dir() / "run" / "services.env"
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line.startswith("export ") or "=" not in line:
                continue
            key, _, value = line[len("export ") :].partition("=")
            parts = shlex.split(value) if value else [""]
            env[key.strip()] = parts[0] if parts else ""
    for key in list(env):
        if os.environ.get(key):
            env[key] = os.environ[key]
    for key in ("TRINO_URL", "TRINO_CATALOG", "TRINO_LAKE_URI", "TRINO_LAKE_WAREHOUSE"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def azurite_pyarrow_props(env: dict[str, str]) -> dict[str, str]:
    """PyIceberg's properties for Azurite (``services_env()``) through PyArrow's Azure file I/O: the
    account, its key and the blob and dfs storage authority (path-style, plain HTTP). Cryo reads the
    same properties (it ignores ``py-io-impl``)."""
    authority = env["CRYO_AZURITE_AUTHORITY"]
    return {
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "adls.account-name": env["CRYO_AZURITE_ACCOUNT"],
        "adls.account-key": env["CRYO_AZURITE_KEY"],
        "adls.blob-storage-authority": authority,
        "adls.dfs-storage-authority": authority,
        "adls.blob-storage-scheme": "http",
        "adls.dfs-storage-scheme": "http",
    }


def _file_uri(path: str | os.PathLike[str]) -> str:
    s = str(path)
    return s if "://" in s else Path(s).resolve().as_uri()


def _local_path(path_or_uri: str | os.PathLike[str]) -> str:
    s = str(path_or_uri)
    if s.startswith("file://"):
        s = s[len("file://") :]
        # file:/x (one slash) is also seen in Hadoop-written metadata
    elif s.startswith("file:"):
        s = s[len("file:") :]
    return s


def local_path(path_or_uri: str | os.PathLike[str]) -> str:
    """A ``file:`` URI or path as a normalized local path."""
    return os.path.normpath(_local_path(path_or_uri))


def assert_sqlite_unlocked(db: str | os.PathLike[str]) -> None:
    """Nobody holds a lock on the sqlite catalog ``db`` (a leaked read lock would block every commit)."""
    import sqlite3

    con = sqlite3.connect(str(db), timeout=10, isolation_level=None)
    try:
        con.execute("BEGIN EXCLUSIVE")
        con.execute("ROLLBACK")
    except sqlite3.OperationalError as e:
        raise AssertionError(f"the sqlite catalog {db} is locked by another process: {e}") from None
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# Fingerprint
# --------------------------------------------------------------------------------------------


class Fingerprint(NamedTuple):
    rows: int
    sha256: str

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return f"{self.rows}:{self.sha256}"

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "sha256": self.sha256}


_NULL = "\x00N"


def _canon_scalar(v: Any) -> str:
    """Canonical text of one (possibly nested) Python value from ``to_pylist`` of a non-primitive column."""
    if v is None:
        return _NULL
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _canon_float(v)
    if isinstance(v, decimal.Decimal):
        return _canon_decimal(v)
    if isinstance(v, str):
        return "s:" + v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "b:" + bytes(v).hex()
    if isinstance(v, dict):  # struct
        return "{" + ",".join(f"{k}={_canon_scalar(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        if v and all(isinstance(e, tuple) and len(e) == 2 for e in v):  # map as list of (key, value)
            return "map{" + ",".join(sorted(f"{_canon_scalar(k)}=>{_canon_scalar(x)}" for k, x in v)) + "}"
        return "[" + ",".join(_canon_scalar(e) for e in v) + "]"
    # datetime and friends should not get here (handled column-wise), but stay deterministic
    return "o:" + str(v)


def _canon_float(f: float) -> str:
    if math.isnan(f):
        return "f:nan"
    if f == 0.0:
        return "f:0"  # -0.0 == 0.0
    return "f:" + float(f).hex()


def _canon_decimal(d: decimal.Decimal) -> str:
    if d.is_nan():
        return "d:nan"
    if d == 0:
        return "d:0"
    return "d:" + format(d.normalize(), "f")


def _canon_column(col: pa.ChunkedArray) -> list[str]:
    """One canonical string per row for one column.

    Normalizations, so that PyIceberg, DuckDB and Spark agree:
    - integers of any width -> decimal text; booleans -> true/false
    - float32/float64 -> exact hex of the double value (-0.0 == 0.0, one NaN)
    - decimals of any precision/scale -> normalized plain text (1.50 == 1.5)
    - timestamps with or without time zone, any unit -> integer nanoseconds since the epoch
      (Spark returns the session time zone, DuckDB its own, PyIceberg UTC: the instant is what counts)
    - dates -> days since the epoch; times -> nanoseconds since midnight
    - string / large_string / string_view -> the text; binary / fixed -> hex
    - structs, lists, maps -> recursive, map entries sorted
    """
    t = col.type
    if isinstance(t, pa.ExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], type=t.storage_type)
        t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_null(t):
        return [_NULL] * len(col)
    if pa.types.is_boolean(t):
        return [_NULL if v is None else ("true" if v else "false") for v in col.to_pylist()]
    if pa.types.is_integer(t):
        return [_NULL if v is None else str(v) for v in col.to_pylist()]
    if pa.types.is_floating(t):
        return [_NULL if v is None else _canon_float(float(v)) for v in col.to_pylist()]
    if pa.types.is_decimal(t):
        return [_NULL if v is None else _canon_decimal(v) for v in col.to_pylist()]
    if pa.types.is_timestamp(t):
        mult = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[t.unit]
        ints = col.cast(pa.timestamp(t.unit, tz=t.tz)).cast(pa.int64()).to_pylist() if t.tz else col.cast(pa.int64()).to_pylist()
        return [_NULL if v is None else "ts:" + str(v * mult) for v in ints]
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        ints = col.cast(pa.date32()).cast(pa.int32()).to_pylist()
        return [_NULL if v is None else "date:" + str(v) for v in ints]
    if pa.types.is_time(t):
        mult = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[t.unit]
        ints = col.cast(pa.int64() if t.bit_width == 64 else pa.int32()).to_pylist()
        return [_NULL if v is None else "time:" + str(v * mult) for v in ints]
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return [_NULL if v is None else "s:" + v for v in col.cast(pa.large_string()).to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or getattr(
        pa.types, "is_binary_view", lambda _: False
    )(t):
        return [_NULL if v is None else "b:" + bytes(v).hex() for v in col.to_pylist()]
    if pa.types.is_struct(t):
        # canonicalize each child column-wise so nested timestamps/decimals get the same treatment
        n = len(col)
        children = {}
        for i in range(t.num_fields):
            name = t.field(i).name
            children[name] = _canon_column(pa.chunked_array([c.field(i) for c in col.chunks], type=t.field(i).type) if n else pa.chunked_array([], type=t.field(i).type))
        valid = pc.is_valid(col).to_pylist() if n else []
        names = sorted(children)
        return [
            ("{" + ",".join(f"{k}={children[k][r]}" for k in names) + "}") if valid[r] else _NULL for r in range(n)
        ]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_map(t):
        out: list[str] = []
        for chunk in col.chunks:
            if pa.types.is_map(t):
                keys = _canon_column(pa.chunked_array([chunk.keys], type=t.key_type))
                items = _canon_column(pa.chunked_array([chunk.items], type=t.item_type))
                offsets = chunk.offsets.to_pylist()
                for r in range(len(chunk)):
                    if not chunk[r].is_valid:
                        out.append(_NULL)
                        continue
                    entries = sorted(f"{keys[j]}=>{items[j]}" for j in range(offsets[r], offsets[r + 1]))
                    out.append("map{" + ",".join(entries) + "}")
            else:
                flat = _canon_column(pa.chunked_array([chunk.flatten()], type=t.value_type))
                if pa.types.is_fixed_size_list(t):
                    size = t.list_size
                    offsets = [i * size for i in range(len(chunk) + 1)]
                else:
                    offsets = chunk.offsets.to_pylist()
                    base = offsets[0] if offsets else 0
                    offsets = [o - base for o in offsets]
                for r in range(len(chunk)):
                    if not chunk[r].is_valid:
                        out.append(_NULL)
                        continue
                    out.append("[" + ",".join(flat[offsets[r] : offsets[r + 1]]) + "]")
        return out
    return [_canon_scalar(v) for v in col.to_pylist()]


def canonical_rows(table: pa.Table) -> list[str]:
    """Canonical text per row: columns in name order (case-sensitive), values normalized."""
    names = sorted(table.column_names)
    cols = [_canon_column(table.column(n)) for n in names]
    return ["\x1f".join(vals) for vals in zip(*cols)] if cols else [""] * table.num_rows


def fingerprint(table: pa.Table) -> Fingerprint:
    """Order-independent fingerprint of a table's rows: row count + sha256 over sorted row digests.

    The column names (sorted) are part of the hash; column order and row order are not.
    """
    digests = sorted(hashlib.sha256(r.encode("utf-8", "surrogatepass")).digest() for r in canonical_rows(table))
    h = hashlib.sha256()
    h.update(("\x1f".join(sorted(table.column_names)) + "\n").encode())
    for d in digests:
        h.update(d)
    return Fingerprint(table.num_rows, h.hexdigest())


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------


def sql_catalog(catalog_db: str | os.PathLike[str], warehouse: str | os.PathLike[str] | None = None, name: str = "fixtures", **props: str):
    """PyIceberg ``SqlCatalog`` on a sqlite file (the schema Java's JdbcCatalog shares)."""
    from pyiceberg.catalog.sql import SqlCatalog

    db = Path(_local_path(catalog_db)).resolve()
    # sqlite's busy timeout is 5 s by default: on a loaded machine a Spark JDBC or Cryo commit on the
    # same file can hold its lock longer, and PyIceberg's commit would fail with "database is locked".
    p = {"uri": f"sqlite:///{db}?timeout=30"}
    if warehouse is not None:
        p["warehouse"] = _file_uri(warehouse)
    p.update(props)
    return SqlCatalog(name, **p)


def read_pyiceberg(
    ident: str | None = None,
    *,
    catalog: Any = None,
    catalog_db: str | os.PathLike[str] | None = None,
    warehouse: str | os.PathLike[str] | None = None,
    metadata_location: str | None = None,
    catalog_name: str = "fixtures",
    snapshot_id: int | None = None,
    properties: dict[str, str] | None = None,
) -> pa.Table:
    """Read a whole table with PyIceberg.

    Either ``ident`` with ``catalog`` (any PyIceberg catalog) or ``catalog_db`` (sqlite SqlCatalog), or
    ``metadata_location`` alone (a ``StaticTable``, e.g. for hadoop-catalog tables).
    """
    if metadata_location is not None:
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(metadata_location, properties or {})
    else:
        if catalog is None:
            if catalog_db is None:
                raise ValueError("read_pyiceberg needs catalog, catalog_db or metadata_location")
            catalog = sql_catalog(catalog_db, warehouse, name=catalog_name, **(properties or {}))
        table = catalog.load_table(ident)
    return table.scan(snapshot_id=snapshot_id).to_arrow()


def duckdb_connect(s3: dict[str, str] | None = None):
    """A DuckDB connection with the avro + iceberg extensions loaded from the wheel files (never downloaded).

    ``s3`` (optional): {"endpoint": "http://127.0.0.1:5055", "access_key": ..., "secret_key": ..., "region": ...}
    loads httpfs and creates a path-style S3 secret.
    """
    import duckdb

    env = peers_env()
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    # Order matters: avro first, else iceberg tries to fetch avro from the network.
    con.execute(f"LOAD '{env['DUCKDB_AVRO_EXT']}'")
    con.execute(f"LOAD '{env['DUCKDB_ICEBERG_EXT']}'")
    if s3 is not None:
        con.execute(f"LOAD '{env['DUCKDB_HTTPFS_EXT']}'")
        endpoint = s3["endpoint"]
        use_ssl = endpoint.startswith("https://")
        host = endpoint.split("://", 1)[-1].rstrip("/")
        con.execute(
            "CREATE OR REPLACE SECRET cryo_s3 (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL ?)",
            [s3.get("access_key", "testing"), s3.get("secret_key", "testing"), s3.get("region", "us-east-1"), host, use_ssl],
        )
    return con


# The Spark lines scripts/peers.sh installs: the peers.env variables of each one's python, jars and JDK.
SPARK_LINES = {
    "3.5": {"python": "PEERS_PYTHON", "jars": "SPARK_JARS", "java_home": "JAVA_HOME", "iceberg": "ICEBERG_SPARK_VERSION"},
    "4.1": {"python": "SPARK4_PYTHON", "jars": "SPARK4_JARS", "java_home": "SPARK4_JAVA_HOME", "iceberg": "ICEBERG_SPARK4_VERSION"},
}
DEFAULT_SPARK_LINE = "3.5"


def spark_line(line: str | None = None) -> str:
    """The Spark line to use: ``line``, else ``$CRYO_SPARK_LINE``, else 3.5."""
    line = line or os.environ.get("CRYO_SPARK_LINE") or DEFAULT_SPARK_LINE
    if line not in SPARK_LINES:
        raise ValueError(f"unknown Spark line {line!r} (known: {', '.join(SPARK_LINES)})")
    return line


def spark_line_env(line: str | None = None) -> dict[str, str]:
    """``{"line", "python", "jars", "java_home", "iceberg"}`` of a Spark line from peers.env (values may be
    empty when the line is not installed: see ``spark_line_missing``)."""
    line = spark_line(line)
    env = peers_env()
    out = {k: env.get(v, "") for k, v in SPARK_LINES[line].items()}
    if line == DEFAULT_SPARK_LINE and not out["python"]:
        out["python"] = env.get("PYSPARK_PYTHON", "")
    out["line"] = line
    return out


def spark_line_missing(line: str | None = None) -> str | None:
    """Why the Spark line cannot run here (None when it can)."""
    e = spark_line_env(line)
    if not e["jars"]:
        return f"Spark {e['line']} is not installed ({SPARK_LINES[e['line']]['jars']} unset; scripts/peers.sh installs it)"
    missing = [j for j in e["jars"].split(",") if not Path(j).exists()]
    if missing:
        return f"Spark {e['line']}: jars missing: {missing} (rerun scripts/peers.sh)"
    if e["line"] != DEFAULT_SPARK_LINE and not (e["python"] and Path(e["python"]).exists()):
        return f"Spark {e['line']}: no python at {e['python']!r} (rerun scripts/peers.sh)"
    return None


def spark_line_or_skip(line: str) -> str:
    """``line`` when it runs here; else the test skips, or fails under ``CRYO_REQUIRE_PEERS=1``. The
    cross-implementation modules run once per line: ``@pytest.fixture(scope="module",
    params=SPARK_LINES, ids=spark_line_id)``, then ``SparkWorker(..., line=spark_line_or_skip(request.param))``."""
    missing = spark_line_missing(line)
    require(missing is None, missing or "")
    return line


def spark_line_id(line: str) -> str:
    return f"spark{line}"


def read_duckdb(metadata_json_path: str, s3: dict[str, str] | None = None) -> pa.Table:
    """Read a table with DuckDB's iceberg extension, from its metadata.json path (local path or URI)."""
    con = duckdb_connect(s3)
    try:
        path = metadata_json_path if metadata_json_path.startswith("s3://") else _local_path(metadata_json_path)
        res = con.execute("SELECT * FROM iceberg_scan(?)", [path])
        return res.to_arrow_table() if hasattr(res, "to_arrow_table") else res.fetch_arrow_table()
    finally:
        con.close()


def spark_session(
    warehouse_catalog_db: str | os.PathLike[str],
    warehouse: str | os.PathLike[str],
    hadoop_warehouse: str | os.PathLike[str] | None = None,
    *,
    catalog_name: str = "fixtures",
    app_name: str = "cryo-peers",
    memory: str = "1g",
    extra_conf: dict[str, str] | None = None,
    line: str | None = None,
):
    """A local SparkSession (local[2], driver on 127.0.0.1, UI off) with Iceberg and the jdbc catalog
    ``fixtures`` on ``warehouse_catalog_db`` (sqlite), plus ``hadoop`` on ``hadoop_warehouse`` if given.

    ``line``: the Spark line (``SPARK_LINES``; default ``$CRYO_SPARK_LINE`` or 3.5). 3.5 uses SPARK_JARS /
    JAVA_HOME / SPARK_EXTRA_JAVA_OPTS from peers.env, 4.1 SPARK4_JARS / SPARK4_JAVA_HOME; the pyspark this
    process imports must be the line's (4.1: run under SPARK4_PYTHON). One JVM per process: a second call
    with other catalogs returns the existing session (reconfigured catalogs are set at runtime).
    """
    env = peers_env()
    le = spark_line_env(line)
    import pyspark

    if not pyspark.__version__.startswith(le["line"] + "."):
        raise RuntimeError(
            f"Spark line {le['line']} asked for, but this python ({sys.executable}) has pyspark {pyspark.__version__}"
            + (" (run it with $SPARK4_PYTHON)" if le["line"] == "4.1" else "")
        )
    if not le["jars"]:
        raise RuntimeError(spark_line_missing(le["line"]) or f"no jars for Spark {le['line']}")
    if le["java_home"]:
        os.environ["JAVA_HOME"] = le["java_home"]
    if le["line"] == DEFAULT_SPARK_LINE:
        os.environ.setdefault("PYSPARK_PYTHON", env.get("PYSPARK_PYTHON", "python3"))
    else:  # Python workers must run this pyspark, whatever the parent's PYSPARK_PYTHON (the 3.5 line's) says
        os.environ["PYSPARK_PYTHON"] = le["python"] or sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("TZ", "UTC")
    from pyspark.sql import SparkSession

    db = Path(_local_path(warehouse_catalog_db)).resolve()
    scratch = Path(os.environ.get("CRYO_SPARK_SCRATCH") or (peers_dir() / "spark-scratch"))
    scratch.mkdir(parents=True, exist_ok=True)
    # SPARK_EXTRA_JAVA_OPTS belongs to the 3.5 line's shim route (its JNI library path).
    extra_java = env.get("SPARK_EXTRA_JAVA_OPTS", "") if le["line"] == DEFAULT_SPARK_LINE else ""
    java_opts = " ".join(x for x in ["-Duser.timezone=UTC", extra_java] if x)
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": app_name,
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.memory": memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": le["jars"],
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalogImplementation": "in-memory",  # no Hive, no derby metastore_db in the cwd
        "spark.sql.warehouse.dir": str(scratch / "spark-warehouse"),
        "spark.local.dir": str(scratch / "tmp"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        f"spark.sql.catalog.{catalog_name}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{catalog_name}.type": "jdbc",
        f"spark.sql.catalog.{catalog_name}.uri": f"jdbc:sqlite:{db}",
        f"spark.sql.catalog.{catalog_name}.warehouse": _file_uri(warehouse),
        # V1 = the schema with iceberg_type, as PyIceberg 0.12 creates it
        f"spark.sql.catalog.{catalog_name}.jdbc.schema-version": "V1",
    }
    if hadoop_warehouse is not None:
        conf.update(
            {
                "spark.sql.catalog.hadoop": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.hadoop.type": "hadoop",
                "spark.sql.catalog.hadoop.warehouse": _file_uri(hadoop_warehouse),
            }
        )
    conf.update(extra_conf or {})
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for k, v in conf.items():  # effective even when the session already existed
        if k.startswith("spark.sql.catalog."):
            spark.conf.set(k, v)
    return spark


def _s3_io_conf(prefix: str, s3_endpoint: str, access_key: str, secret_key: str, region: str) -> dict[str, str]:
    return {
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.s3.endpoint": s3_endpoint,
        f"{prefix}.s3.path-style-access": "true",
        f"{prefix}.s3.access-key-id": access_key,
        f"{prefix}.s3.secret-access-key": secret_key,
        f"{prefix}.client.region": region,
    }


def spark_rest_catalog_conf(
    name: str,
    uri: str,
    warehouse: str,
    credential: str,
    s3_endpoint: str,
    *,
    region: str = "us-east-1",
) -> dict[str, str]:
    """Spark conf for an Iceberg REST catalog with OAuth2 client credentials (e.g. SeaweedFS: the credential
    is ``<s3 access key>:<s3 secret key>``) and S3FileIO. Needs SPARK_HAS_S3=1 (iceberg-aws-bundle)."""
    key, _, secret = credential.partition(":")
    p = f"spark.sql.catalog.{name}"
    return {
        p: "org.apache.iceberg.spark.SparkCatalog",
        f"{p}.type": "rest",
        f"{p}.uri": uri,
        f"{p}.warehouse": warehouse,
        f"{p}.credential": credential,
        f"{p}.oauth2-server-uri": uri.rstrip("/") + "/v1/oauth/tokens",
        **_s3_io_conf(p, s3_endpoint, key, secret, region),
    }


def spark_s3_jdbc_catalog_conf(
    name: str,
    catalog_db: str | os.PathLike[str],
    warehouse: str,
    s3_endpoint: str,
    *,
    access_key: str = "testing",
    secret_key: str = "testing",
    region: str = "us-east-1",
) -> dict[str, str]:
    """Spark conf for a jdbc (sqlite) catalog whose warehouse is on S3 (e.g. moto). Needs SPARK_HAS_S3=1."""
    p = f"spark.sql.catalog.{name}"
    return {
        p: "org.apache.iceberg.spark.SparkCatalog",
        f"{p}.type": "jdbc",
        f"{p}.uri": f"jdbc:sqlite:{Path(_local_path(catalog_db)).resolve()}",
        f"{p}.jdbc.schema-version": "V1",
        f"{p}.warehouse": warehouse,
        **_s3_io_conf(p, s3_endpoint, access_key, secret_key, region),
    }


def add_spark_catalogs(spark: Any, conf: dict[str, str]) -> None:
    """Register more catalogs on a running session (Spark instantiates catalogs lazily, on first use)."""
    for k, v in conf.items():
        spark.conf.set(k, v)


def read_spark(spark: Any, ident: str) -> pa.Table:
    """Read a whole table with Spark (``ident`` like ``fixtures.spark.orders_mor``) as a pyarrow Table."""
    return spark_arrow(spark.table(ident))


def spark_arrow(df: Any) -> pa.Table:
    """A Spark DataFrame's rows as a pyarrow Table (``DataFrame.toArrow`` on pyspark 4, else the Arrow
    batches pyspark 3.5 collects internally)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    try:
        batches = df._collect_as_arrow()  # pyspark 3.5 has no public DataFrame.toArrow()
    except Exception:  # pragma: no cover - fallback without Arrow in the JVM
        batches = None
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    if batches is None:
        rows = [r.asDict(recursive=True) for r in df.collect()]
        return pa.Table.from_pylist(rows, schema=schema)
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches)
