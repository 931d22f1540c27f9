"""A Spark session in a child process that a test drives step by step (one JVM for a whole test module).

Spark keeps one JVM per process and caches catalogs, so tests that interleave Spark with other writers
(Cryo, PyIceberg) run Spark in a child: ``SparkWorker(catalog_db, warehouse)`` starts it, each call sends
one JSON request on the child's stdin and waits for one JSON answer on its stdout. The child's own stdout
(and the JVM's) goes to its stderr, which is written to a log file, so nothing but answers reaches the pipe.

Requests:
- ``sql(text)``: run a statement, return its rows as dicts (values JSON-friendly: decimals, instants, dates
  and bytes as text).
- ``read(ident, path)``: read a whole table with Spark (``cryo_peers.read_spark``) and hand it over as an
  Arrow IPC file; returns a ``pyarrow.Table``. ``read_sql(text, path)``: the same for a query's rows
  (e.g. a v3 table's row lineage, ``SELECT _row_id, _last_updated_sequence_number, * FROM t``).
- ``call("module:function", **kwargs)``: call ``function(spark, **kwargs)`` from a module next to this file
  (e.g. a test module's Spark-side helpers); returns its JSON-friendly result.

The session's Iceberg catalog caching is off (``cache-enabled=false``): another process commits to the same
tables between requests, and every statement must see the table as it is now.

Iceberg 1.10.2's ``JdbcCatalog`` leaks a JDBC ``ResultSet`` when it initializes (``updateSchemaIfRequired``
reads one row of ``DatabaseMetaData.getColumns`` and never closes it; ``atomicCreateTable`` does the same
with ``getTables``). With sqlite-jdbc an unfinished statement keeps its connection's read transaction
open, so the catalog holds a SHARED lock on the sqlite file for as long as the session lives: no other
process (PyIceberg, Cryo) can commit to the catalog then ("database is locked"), while Spark itself can.
After the catalog is first used, the child therefore closes the pool's connections (and with them the
leaked statement); the pool opens fresh ones on demand (``release_catalog_lock``).

Spark lines: ``SparkWorker(..., line="4.1")`` runs the child with ``$SPARK4_PYTHON`` (its own venv:
pyspark 4.1) on Spark 4.1 + Iceberg 1.12's jars (``$SPARK4_JARS``); the default is 3.5 (the peers venv's
own python and ``$SPARK_JARS``), or ``$CRYO_SPARK_LINE``. ``catalog=`` names the jdbc catalog (``fixtures``
by default): Iceberg's JDBC catalog only sees the rows of its own name in the sqlite file.
``start_info`` says which line, pyspark and Iceberg the child runs.

Run with the peers venv (the parent; the child is whichever python its line needs).
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(_jsonable(k)): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "asDict"):
        return _jsonable(v.asDict(recursive=True))
    return str(v)


def _error_text(e: BaseException) -> str:
    """The Java exception chain when there is one (py4j's own first line says little)."""
    j = getattr(e, "java_exception", None)
    if j is None:
        return f"{type(e).__name__}: {e}"[:4000]
    msgs: list[str] = []
    while j is not None and len(msgs) < 6:
        msg = str(j.toString())
        if msg not in msgs:
            msgs.append(msg)
        j = j.getCause()
    return " | caused by: ".join(msgs)[:4000]


# ------------------------------------------------------------------------------------------------
# Child
# ------------------------------------------------------------------------------------------------


def _field(cls, name: str):
    f = cls.getDeclaredField(name)
    f.setAccessible(True)
    return f


def release_catalog_lock(spark, catalog: str) -> int:
    """Close the JDBC connections of Iceberg's ``JdbcCatalog`` ``catalog`` after its initialization (which
    leaves a statement open, holding a SQLite read lock: see the module docs). Returns how many were closed."""
    spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()  # initializes the catalog (and leaks)
    ice = spark._jsparkSession.sessionState().catalogManager().catalog(catalog).icebergCatalog()
    if ice.getClass().getName() == "org.apache.iceberg.CachingCatalog":
        ice = _field(ice.getClass(), "catalog").get(ice)
    pool = _field(ice.getClass(), "connections").get(ice)
    impl = pool.getClass().getSuperclass()  # ClientPoolImpl (the jars have their own class loader)
    assert impl.getName() == "org.apache.iceberg.ClientPoolImpl", impl.getName()
    clients = _field(impl, "clients").get(pool)
    closed = 0
    while not clients.isEmpty():
        clients.removeFirst().close()
        closed += 1
    size = _field(impl, "currentSize")
    size.setInt(pool, size.getInt(pool) - closed)
    return closed


def child_main(catalog_db: str, warehouse: str, app_name: str, catalog: str = "fixtures") -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # everything else printed (and the JVM's stdout) goes to stderr
    sys.stdout = sys.stderr
    sys.path.insert(0, str(HERE))
    import cryo_peers

    t0 = time.monotonic()
    try:
        spark = cryo_peers.spark_session(
            catalog_db,
            warehouse,
            catalog_name=catalog,
            app_name=app_name,
            extra_conf={f"spark.sql.catalog.{catalog}.cache-enabled": "false"},
        )
        closed = release_catalog_lock(spark, catalog)
    except Exception as e:  # noqa: BLE001 - the parent raises it
        answers.write(json.dumps({"ok": False, "error": _error_text(e)}) + "\n")
        return
    info = {
        "spark_start_s": round(time.monotonic() - t0, 2),
        "catalog_connections_closed": closed,
        "line": cryo_peers.spark_line(),
        "spark_version": spark.version,
        "iceberg_version": str(spark._jvm.org.apache.iceberg.IcebergBuild.version()),
        "python": sys.executable,
    }
    answers.write(json.dumps({"ok": True, "result": info}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        t0 = time.monotonic()
        try:
            op = req["op"]
            if op == "sql":
                rows = spark.sql(req["sql"]).collect()
                result: Any = [_jsonable(r.asDict(recursive=True)) for r in rows]
            elif op in ("read", "read_sql"):
                import pyarrow as pa

                if op == "read":
                    table = cryo_peers.read_spark(spark, req["table"])
                else:
                    table = cryo_peers.spark_arrow(spark.sql(req["sql"]))
                with pa.OSFile(req["path"], "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                    w.write_table(table)
                result = table.num_rows
            elif op == "call":
                module, _, fn = req["fn"].partition(":")
                result = _jsonable(getattr(importlib.import_module(module), fn)(spark, **req.get("kwargs", {})))
            elif op == "stop":
                answers.write(json.dumps({"ok": True, "result": None}) + "\n")
                break
            else:
                raise ValueError(f"unknown op {op!r}")
            answer = {"ok": True, "result": result}
        except Exception as e:  # noqa: BLE001 - the parent raises it
            answer = {"ok": False, "error": _error_text(e)}
        answer["seconds"] = round(time.monotonic() - t0, 3)
        answers.write(json.dumps(answer) + "\n")
    spark.stop()


# ------------------------------------------------------------------------------------------------
# Parent
# ------------------------------------------------------------------------------------------------


class SparkError(RuntimeError):
    pass


class SparkLineMissing(SparkError):
    """The Spark line asked for is not installed here (``cryo_peers.spark_line_missing`` says why)."""


class SparkWorker:
    """The parent's handle on the child (see the module docs)."""

    def __init__(
        self,
        catalog_db: str | os.PathLike[str],
        warehouse: str | os.PathLike[str],
        *,
        log: str | os.PathLike[str],
        app_name: str = "cryo-spark-worker",
        timeout: float = 600,
        line: str | None = None,
        catalog: str = "fixtures",
    ) -> None:
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        import cryo_peers

        self.line = cryo_peers.spark_line(line)
        self.catalog = catalog
        missing = cryo_peers.spark_line_missing(self.line)
        if missing:
            raise SparkLineMissing(missing)
        le = cryo_peers.spark_line_env(self.line)
        python = sys.executable if self.line == cryo_peers.DEFAULT_SPARK_LINE else le["python"]
        self.timeout = timeout
        self.timings: list[tuple[str, float]] = []
        self.log_path = Path(log)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        env = dict(os.environ)
        env["CRYO_SPARK_LINE"] = self.line
        if self.line == cryo_peers.DEFAULT_SPARK_LINE:
            env.setdefault("CRYO_SPARK_SCRATCH", str(self.log_path.parent / "spark-scratch"))
        else:
            env.setdefault("CRYO_SPARK_SCRATCH", str(self.log_path.parent / f"spark-scratch-{self.line}"))
            env["PYSPARK_PYTHON"] = python
            env.pop("VIRTUAL_ENV", None)
            env.pop("PYTHONHOME", None)
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--child", str(catalog_db), str(warehouse), app_name, catalog],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            cwd=str(self.log_path.parent),
        )
        t0 = time.monotonic()
        self.start_info = self._answer("start")
        self.start_s = round(time.monotonic() - t0, 2)

    def _answer(self, what: str) -> Any:
        box: dict[str, str] = {}

        def read() -> None:
            box["line"] = self.proc.stdout.readline()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(self.timeout)
        line = box.get("line")
        if not line:
            raise SparkError(f"spark worker gave no answer to {what} (exit code {self.proc.poll()}); log tail:\n{self.log_tail()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise SparkError(f"{what}: {answer['error']}")
        self.timings.append((what[:80], answer.get("seconds", 0.0)))
        return answer["result"]

    def _request(self, what: str, **req: Any) -> Any:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._answer(what)

    def sql(self, text: str) -> list[dict]:
        return self._request(" ".join(text.split()), op="sql", sql=text)

    def read(self, ident: str, path: str | os.PathLike[str]):
        import pyarrow as pa

        self._request(f"read {ident}", op="read", table=ident, path=str(path))
        with pa.memory_map(str(path)) as f:
            return pa.ipc.open_file(f).read_all()

    def read_sql(self, text: str, path: str | os.PathLike[str]):
        """A query's rows as a ``pyarrow.Table`` (through an Arrow IPC file at ``path``)."""
        import pyarrow as pa

        self._request(" ".join(text.split()), op="read_sql", sql=text, path=str(path))
        with pa.memory_map(str(path)) as f:
            return pa.ipc.open_file(f).read_all()

    def call(self, fn: str, **kwargs: Any) -> Any:
        return self._request(f"call {fn}", op="call", fn=fn, kwargs=kwargs)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self._request("stop", op="stop")
                self.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001 - a stuck child is killed below
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()


if __name__ == "__main__" and len(sys.argv) in (5, 6) and sys.argv[1] == "--child":
    child_main(*sys.argv[2:])
