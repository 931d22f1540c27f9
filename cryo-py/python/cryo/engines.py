"""Destinations for :meth:`cryo.Catalog.run_fleet`: the Trino or Spark a team already has.

Cryo brings no compute of its own for tables that outgrow one machine: it renders each admitted
step for the destination's engine and submits it there.

- :func:`trino` — Trino over its HTTP statement protocol (cryo-core's client: auth, timeouts,
  cancellation, retries); load from ``system.runtime.queries``.
- :class:`SparkEngine` — a ``SparkSession`` you hand in (with Iceberg's SQL extensions and the
  catalog the plan's tables live in); load from the session's status tracker: active jobs, and
  which of them are Cryo's (its statements run in their own job group).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from . import _cryo
from ._cryo import Engine

__all__ = ["Engine", "SparkEngine", "trino"]


def trino(
    url: Union[str, Sequence[str]],
    *,
    catalog: str,
    version: int,
    user: str = "cryo",
    password: Optional[str] = None,
    access_token: Optional[str] = None,
    ca_cert_path: Optional[str] = None,
    **options: Any,
) -> Engine:
    """A Trino destination.

    ``url``: one coordinator URL or several (the governor spreads steps over them). ``catalog`` is
    the Trino catalog the plan's tables are in and ``version`` Trino's release (it gates which
    procedures render). Other options are cryo-core's ``TrinoConfig`` (``request_timeout_ms``,
    ``statement_timeout_ms``, ``max_retries``, ``source``, ``client_tags``, ``session_properties``)
    or the Trino dialect's (``expire_snapshots_min_retention_ms``,
    ``remove_orphan_files_min_retention_ms``, ``case_insensitive_name_matching``: a REST catalog
    with ``iceberg.rest-catalog.case-insensitive-name-matching``, without which tables named with
    upper-case letters are refused, since Trino folds identifiers to lower case). A password is sent over https only; neither it nor
    the token ever appears in receipts, logs or errors. ``ca_cert_path``: a PEM file of CA
    certificates to trust besides the system's (a coordinator behind a private CA); certificates are
    always verified.
    """
    opts: dict[str, Any] = {"catalog": catalog, "version": version, "user": user, **options}
    if password is not None:
        opts["password"] = password
    if access_token is not None:
        opts["access_token"] = access_token
    if ca_cert_path is not None:
        opts["ca_cert_path"] = ca_cert_path
    urls = [url] if isinstance(url, str) else list(url)
    return _cryo.trino_engine(urls, opts)


class SparkEngine:
    """A live ``SparkSession`` as a fleet-run destination.

    ``catalog`` is the Spark catalog name the plan's tables resolve in (``spark.sql.catalog.<name>``),
    ``spark_version``/``iceberg_version`` gate which procedures and literals render (read from the
    session when not given: ``IcebergBuild.version()`` of the runtime jar). Statements run one at a time
    in the job group ``job_group``, so the probe can tell Cryo's running work from everyone else's.
    """

    kind = "spark"

    def __init__(
        self,
        spark: Any,
        *,
        catalog: str,
        iceberg_version: Optional[str] = None,
        spark_version: Optional[str] = None,
        job_group: str = "cryo-maintenance",
        **dialect_options: Any,
    ) -> None:
        self._spark = spark
        self.job_group = job_group
        self._lock = threading.Lock()
        self._seq = 0
        sc = spark.sparkContext
        self.app_id: str = sc.applicationId
        options: dict[str, Any] = {
            "catalog": catalog,
            "spark_version": spark_version or spark.version.split("-")[0],
            "iceberg_version": iceberg_version or _iceberg_version(spark),
            **dialect_options,
        }
        self._options = options
        _cryo.python_engine(self, "spark", "spark", [self.app_id], options)  # validates the options

    def as_engine(self) -> Engine:
        """The destination :meth:`cryo.Catalog.run_fleet` sends steps to (made per run: it holds
        this object only while the run lasts)."""
        return _cryo.python_engine(self, "spark", "spark", [self.app_id], self._options)

    def probe(self) -> dict[str, list[dict[str, Any]]]:
        """The session's load: running jobs, stages waiting, and Cryo's own running jobs."""
        tracker = self._spark.sparkContext.statusTracker()
        active = set(tracker.getActiveJobsIds())
        mine = active & set(tracker.getJobIdsForGroup(self.job_group))
        stages = tracker.getActiveStageIds()
        waiting = 0
        for sid in stages:
            info = tracker.getStageInfo(sid)
            if info is not None and info.numActiveTasks == 0 and info.numCompletedTasks == 0:
                waiting += 1
        # A statement between jobs (planning, committing) has no active job: count it as Cryo's.
        if self._lock.locked() and not mine:
            mine = {-1}
        return {
            "coordinators": [
                {
                    "coordinator": self.app_id,
                    "running_queries": len(active),
                    "queued_queries": waiting,
                    "maintenance_running": len(mine),
                }
            ]
        }

    def execute(self, coordinator: str, sql: str) -> dict[str, Any]:
        """Run one statement in Cryo's job group; its rows come back as plain values."""
        if coordinator != self.app_id:
            raise ValueError(f"this session is {self.app_id}, not {coordinator}")
        with self._lock:
            self._seq += 1
            query_id = f"{self.job_group}-{self._seq}"
            sc = self._spark.sparkContext
            sc.setJobGroup(self.job_group, f"cryo {query_id}", interruptOnCancel=True)
            try:
                started = time.monotonic()
                df = self._spark.sql(sql)
                columns = list(df.columns)
                rows = [[_plain(v) for v in row] for row in df.collect()]
                elapsed = int((time.monotonic() - started) * 1000)
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)
                sc.setLocalProperty("spark.job.description", None)
        return {"query_id": query_id, "queued_ms": 0, "elapsed_ms": elapsed, "columns": columns, "rows": rows}

    def __repr__(self) -> str:
        return f"SparkEngine(app {self.app_id}, job group {self.job_group!r})"


def _iceberg_version(spark: Any) -> str:
    """The Iceberg runtime's release, from the JVM (``IcebergBuild.version()``)."""
    try:
        full = str(spark.sparkContext._jvm.org.apache.iceberg.IcebergBuild.version())
    except Exception as e:  # noqa: BLE001 - any py4j failure means the same thing here
        raise ValueError("cannot read Iceberg's version from the session: pass iceberg_version=") from e
    return full.split(" ")[0].split("-")[0]


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)
