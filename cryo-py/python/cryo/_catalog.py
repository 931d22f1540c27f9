"""The :class:`Catalog` facade: Python signatures and conversions over the native catalog."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from . import _cryo, _progress
from ._cryo import (
    Advice,
    ArrowResult,
    CompactionOutcome,
    ComputeStatisticsOutcome,
    ConvertEqualityDeletesOutcome,
    Engine,
    ExpireOutcome,
    FleetOutcome,
    FleetScan,
    Governor,
    MissingFilesOutcome,
    Plan,
    Policy,
    RemoveOrphanFilesOutcome,
    RewriteManifestsOutcome,
    RewritePositionDeletesOutcome,
    RunOutcome,
    TableScan,
)
from ._progress import ProgressArg

#: A point in time: an aware ``datetime``, an age (``timedelta`` before now) or epoch milliseconds.
Instant = Union[_dt.datetime, _dt.timedelta, int]

# PyIceberg catalog classes whose properties may omit `type` (they were constructed directly).
_PYICEBERG_KINDS = {"SqlCatalog": "sql", "RestCatalog": "rest"}


def _property(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"catalog property {key!r} must be a string, number or bool, not {type(value).__name__}")


def _invalid(message: str) -> _cryo.ValidationError:
    """A ValidationError raised by the facade, shaped like the ones cryo-core's errors become."""
    err = _cryo.ValidationError(f"invalid input: {message}")
    err.code = "validation"
    err.retryable = False
    return err


def _epoch_ms(value: Optional[Instant], name: str) -> Optional[int]:
    """An instant as epoch milliseconds (None stays None: cryo-core's default applies)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a datetime, timedelta or epoch milliseconds, not bool")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.timedelta):
        return int((_dt.datetime.now(_dt.timezone.utc) - value).timestamp() * 1000)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise _invalid(f"{name} must be timezone-aware (a naive datetime is ambiguous)")
        return int(value.timestamp() * 1000)
    raise TypeError(f"{name} must be a datetime, timedelta or epoch milliseconds, not {type(value).__name__}")


def _options(**options: Any) -> dict[str, Any]:
    """Keyword options for the native layer; None means cryo-core's default and is dropped."""
    def native(v: Any) -> Any:
        if isinstance(v, _cryo.CommitFence):
            return v._option()
        return os.fspath(v) if isinstance(v, os.PathLike) else v

    return {k: native(v) for k, v in options.items() if v is not None}


def _path(value: Optional[Union[str, os.PathLike[str]]]) -> Optional[str]:
    return None if value is None else os.fspath(value)


class Catalog:
    """An Iceberg catalog, configured exactly like PyIceberg's ``load_catalog(name, **properties)``.

    >>> cat = Catalog("prod", type="rest", uri="https://rest.example.com", warehouse="s3://lake")  # doctest: +SKIP
    >>> cat = Catalog("local", type="sql", uri="sqlite:////tmp/catalog.db", warehouse="file:///tmp/wh")  # doctest: +SKIP

    Supported types: ``sql`` (sqlite or PostgreSQL, the schema PyIceberg's ``SqlCatalog`` and
    Java's ``JdbcCatalog`` share), ``glue``, ``hive``, ``rest``, ``hadoop`` and ``static`` (one
    table's ``metadata.json``). :func:`cryo.load_catalog` reads PyIceberg's ``.pyiceberg.yaml``.
    Storage properties (``s3.endpoint``, ``s3.access-key-id``, …) use PyIceberg's names.

    Every method that changes a table takes ``dry_run``: left as ``None`` it is cryo-core's
    default, a dry run for everything that deletes files (``expire_snapshots``,
    ``remove_orphan_files``, ``run``). Other keyword options are the fields of the matching
    cryo-core options struct (``None`` keeps the default); an unknown one raises
    :class:`cryo.ValidationError` listing the known ones.
    """

    __slots__ = ("_native",)

    def __init__(self, name: str, **properties: object) -> None:
        self._native = _cryo.Catalog(name, {k: _property(k, v) for k, v in properties.items()})

    @classmethod
    def _wrap(cls, native: _cryo.Catalog) -> Catalog:
        self = cls.__new__(cls)
        self._native = native
        return self

    @classmethod
    def from_pyiceberg(cls, catalog: Any) -> Catalog:
        """The same catalog as a PyIceberg catalog object (its ``name`` and ``properties``)."""
        properties = dict(catalog.properties)
        if "type" not in properties:
            kind = _PYICEBERG_KINDS.get(type(catalog).__name__)
            if kind is not None:
                properties["type"] = kind
        return cls(catalog.name, **properties)

    @property
    def name(self) -> str:
        """Catalog name."""
        return self._native.name

    @property
    def kind(self) -> str:
        """``sql``, ``glue``, ``hive``, ``rest``, ``hadoop`` or ``static``."""
        return self._native.kind

    def list_tables(self) -> list[str]:
        """Every table, as ``namespace.table`` identifiers."""
        return self._native.list_tables()

    def scan(self, table: str, **options: Any) -> TableScan:
        """Scan one table's metadata (no data file is read). Options: cryo-core's ``ScanOptions``."""
        return self._native.scan(table, _options(**options))

    def files(self, table: str, **options: Any) -> ArrowResult:
        """Every live file of the current snapshot (data and delete files) as Arrow: ``path``,
        ``content``, ``partition``, ``records``, ``size_bytes``, ``manifest``, … (metadata only)."""
        return self._native.files(table, _options(**options))

    def scan_fleet(self, *, progress: ProgressArg = None, **options: Any) -> FleetScan:
        """Scan every table (``namespaces=[...]`` to limit). Options: ``FleetScanOptions``.

        ``progress``: called with ``{"stage": "scan", "done", "total", "table"}`` as each table
        is scanned; ``True`` draws a tqdm bar (the default inside a notebook when tqdm is
        installed), ``False`` nothing.
        """
        callback, close = _progress.resolve(progress, "scan")
        try:
            return self._native.scan_fleet(_options(**options), callback)
        finally:
            close()

    def plan(
        self,
        scans: Union[FleetScan, TableScan, Iterable[TableScan], None] = None,
        *,
        grade_options: Optional[Mapping[str, Any]] = None,
        controls: Optional[Mapping[str, Mapping[str, Any]]] = None,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
        policy: Optional[Policy] = None,
        only_due: bool = False,
        **options: Any,
    ) -> Plan:
        """Grade the scans and plan their maintenance, worst tables first.

        ``scans``: a fleet scan, one table scan or several; ``None`` scans the whole catalog
        first. Options: cryo-core's ``PlanOptions`` (``operations``, budgets, ``expire``,
        ``orphans``, ``cooldowns_ms``, …); ``grade_options``: ``GradeOptions``.
        ``controls``: per table (``{"ns.table": {"paused": True, "pause_reason": "…"}}``, also
        ``deadline_ms`` and ``last_runs``): cryo-core's ``TableControl``. ``receipt_log``: the
        receipts of earlier runs (a JSON-lines file, or a location on object storage where
        maintainers on other machines append theirs), so an operation that ran recently cools down.
        ``policy``: a :class:`Policy`; each table is planned with its preset (cadence, window,
        options), paused tables are skipped with the pause's reason, and the plan records the
        policy's fingerprint. The policy then gives the prices and options: pass neither.
        ``only_due``: under a policy, plan only what :meth:`due` says is due (with the
        failures counted in ``receipt_log``).
        """
        items = self._scan_items(scans)
        sources = _options(tables=dict(controls) if controls is not None else None, receipt_log=_path(receipt_log))
        if policy is not None:
            if grade_options or options:
                raise _invalid(
                    "under a policy the policy gives the prices and the planning options: "
                    "leave out grade_options and the plan options"
                )
            return self._native.plan(items, None, None, sources, policy, only_due)
        if only_due:
            raise _invalid("only_due plans what a policy says is due: give the policy")
        return self._native.plan(items, _options(**(grade_options or {})), _options(**options), sources)

    def due(
        self,
        policy: Policy,
        scans: Union[FleetScan, TableScan, Iterable[TableScan], None] = None,
        *,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> dict[str, Any]:
        """What is due under ``policy`` now: ``tables`` (each with its preset, destination and
        due ``operations``), ``backing_off`` (operations that failed ``backoff.after_failures``
        times in a row, with ``retry_at_ms`` and the last error), ``paused``, and ``next_due_ms``
        (when to ask again). Cadences and failures are counted from ``receipt_log``. A DAG or a
        sensor that calls this every few minutes and runs ``plan(..., policy=, only_due=True)``
        when something is due is the whole scheduler."""
        items = self._scan_items(scans)
        sources = _options(receipt_log=_path(receipt_log))
        result: dict[str, Any] = self._native.due(items, policy, sources)
        return result

    def advise(self, scans: Union[FleetScan, TableScan, Iterable[TableScan], None] = None) -> Advice:
        """The table property changes the grades recommend (``write.metadata.metrics.default``,
        ``format-version``, the codec, …), each with the value it changes from, the finding it
        fixes and why: a change set to review. Nothing is written until
        :meth:`apply_advice` is given its ``fingerprint``."""
        return self._native.advise(self._scan_items(scans))

    def apply_advice(
        self,
        advice: Advice,
        approved: str,
        *,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
        actor: Optional[str] = None,
    ) -> dict[str, Any]:
        """Commit exactly the approved change set: nothing unless ``approved`` is the advice's
        fingerprint; one commit per table, refused for a table whose properties moved since
        the advice. A receipt per table (appended to ``receipt_log`` if given)."""
        result: dict[str, Any] = self._native.apply_advice(advice, approved, _path(receipt_log), actor)
        return result

    def explain(
        self,
        policy: Policy,
        scans: Union[FleetScan, TableScan, Iterable[TableScan], None] = None,
        *,
        controls: Optional[Mapping[str, Mapping[str, Any]]] = None,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> list[dict[str, Any]]:
        """Each table under ``policy``: its preset and why (``resolved``), its grade, the preset
        as the table gets it, and per operation of the preset (``next``) whether a run made now
        plans it, or the earliest time it may run (``at_ms``) and what holds it back (``reason``).
        ``receipt_log`` gives when each operation last ran, for the cadence."""
        items = self._scan_items(scans)
        sources = _options(tables=dict(controls) if controls is not None else None, receipt_log=_path(receipt_log))
        result: list[dict[str, Any]] = self._native.explain(items, policy, sources)
        return result

    def _scan_items(self, scans: Union[FleetScan, TableScan, Iterable[TableScan], None]) -> list[TableScan]:
        if scans is None:
            scans = self.scan_fleet()
        if isinstance(scans, FleetScan):
            return list(scans.tables)
        if isinstance(scans, TableScan):
            return [scans]
        return list(scans)

    def compact(
        self,
        table: str,
        *,
        target_file_size: Optional[int] = None,
        dry_run: Optional[bool] = None,
        progress: ProgressArg = None,
        **options: Any,
    ) -> CompactionOutcome:
        """Rewrite small (or delete-laden) data files into files of ``target_file_size`` bytes.

        ``target_file_size`` defaults to the table's ``write.target-file-size-bytes``. Options:
        cryo-core's ``CompactOptions`` and ``RunOptions`` (``strategy``, ``partitions``,
        ``parallel_groups``, …). ``quiet_period_ms``: leave alone the partitions a commit
        changed within that many milliseconds (where merge-on-read writers are working: their
        commits would fail against files a compaction just replaced). ``commit_fence``: a
        :class:`cryo.CommitFence` the writers take too, so that no writer operation spans one of
        Cryo's commits. ``progress``: as for
        :meth:`scan_fleet`; stage ``plan`` once the groups are planned, then ``rewrite`` as
        each group is rewritten.
        """
        callback, close = _progress.resolve(progress, table)
        try:
            return self._native.compact(
                table, _options(target_file_size_bytes=target_file_size, dry_run=dry_run, **options), callback
            )
        finally:
            close()

    def expire_snapshots(
        self,
        table: str,
        *,
        older_than: Optional[Instant] = None,
        retain_last: Optional[int] = None,
        dry_run: Optional[bool] = None,
        **options: Any,
    ) -> ExpireOutcome:
        """Expire snapshots older than ``older_than`` (keeping ``retain_last``), then delete the
        files only they referenced. A dry run unless ``dry_run=False``. Defaults follow the
        table's ``history.expire.*`` properties, as Iceberg's Java implementation does."""
        return self._native.expire_snapshots(
            table,
            _options(
                older_than_ms=_epoch_ms(older_than, "older_than"),
                retain_last=retain_last,
                dry_run=dry_run,
                **options,
            ),
        )

    def rewrite_manifests(self, table: str, *, dry_run: Optional[bool] = None, **options: Any) -> RewriteManifestsOutcome:
        """Rewrite the current snapshot's manifests into fewer, well-clustered ones."""
        return self._native.rewrite_manifests(table, _options(dry_run=dry_run, **options))

    def compute_statistics(
        self, table: str, *, columns: Optional[list[str]] = None, dry_run: Optional[bool] = None, **options: Any
    ) -> ComputeStatisticsOutcome:
        """Compute the current snapshot's distinct-value statistics (Apache DataSketches theta
        sketches in a Puffin file, registered on the snapshot): what Spark's
        ``compute_table_stats`` writes and Trino's and Spark's optimizers read. ``columns``:
        top-level columns by name (default: every primitive one)."""
        return self._native.compute_statistics(table, _options(dry_run=dry_run, columns=columns, **options))

    def convert_equality_deletes(
        self, table: str, *, dry_run: Optional[bool] = None, **options: Any
    ) -> ConvertEqualityDeletesOutcome:
        """Turn equality deletes into position deletes (v2) or deletion vectors (v3), reading only
        the key columns of the data files they apply to; the data files stay. ``partitions``:
        ``[{"spec_id": 0, "path": "day=2026-01-01"}]`` (default: every partition);
        ``quiet_period_ms`` and ``commit_fence``: as for :meth:`compact`."""
        return self._native.convert_equality_deletes(table, _options(dry_run=dry_run, **options))

    def rewrite_position_deletes(
        self, table: str, *, dry_run: Optional[bool] = None, **options: Any
    ) -> RewritePositionDeletesOutcome:
        """Combine small position-delete files per partition and drop dangling ones.
        ``quiet_period_ms``: leave alone the partitions a commit changed within that many
        milliseconds; ``commit_fence``: as for :meth:`compact`."""
        return self._native.rewrite_position_deletes(table, _options(dry_run=dry_run, **options))

    def remove_orphan_files(
        self,
        table: str,
        *,
        older_than: Optional[Instant] = None,
        dry_run: Optional[bool] = None,
        **options: Any,
    ) -> RemoveOrphanFilesOutcome:
        """Find files under the table's location that no snapshot or metadata references and,
        unless a dry run (the default), delete those older than ``older_than``."""
        return self._native.remove_orphan_files(
            table, _options(older_than_ms=_epoch_ms(older_than, "older_than"), dry_run=dry_run, **options)
        )

    def missing_files(self, table: str, **options: Any) -> MissingFilesOutcome:
        """Check that every file the table's snapshots reference exists (reads nothing else)."""
        return self._native.missing_files(table, _options(**options))

    def run(
        self,
        plan: Plan,
        *,
        dry_run: Optional[bool] = None,
        lock_dir: Optional[Union[str, os.PathLike[str]]] = None,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
        progress: ProgressArg = None,
        **options: Any,
    ) -> RunOutcome:
        """Run a plan on Cryo's native engine: a dry run unless ``dry_run=False``.

        ``lock_dir``: take a lock per table there: a directory of file locks (one machine),
        ``"catalog"`` (advisory locks in the SQL catalog's PostgreSQL database) or an object-store
        location such as ``s3://bucket/cryo/locks`` (lease-held lock objects), for maintainers on
        many machines. ``receipt_log``: append a receipt per decision, to a JSON-lines file (read
        back with :func:`cryo.read_receipts`) or under an object-store location
        (:meth:`read_receipts`). Options: cryo-core's
        ``MaintenanceOptions`` (``actor``, ``window``, ``deadline_ms``, ``quiet_period_ms``,
        ``commit_fence``, …). ``progress``: as for
        :meth:`scan_fleet`, stage ``run``, one unit per table of the plan.
        """
        callback, close = _progress.resolve(progress, "run")
        try:
            return self._native.run(
                plan, _path(lock_dir), _path(receipt_log), _options(dry_run=dry_run, **options), callback
            )
        finally:
            close()

    def read_receipts(self, location: Union[str, os.PathLike[str]]) -> ArrowResult:
        """The receipts of a receipt log (a JSON-lines file, or an object-store location read with
        this catalog's storage properties), oldest first, as Arrow."""
        return self._native.read_receipts(_path(location))

    def run_fleet(
        self,
        plan: Plan,
        destinations: Optional[Mapping[str, Any]] = None,
        *,
        default_destination: Optional[str] = None,
        routes: Optional[Mapping[str, str]] = None,
        governor: Optional[Governor] = None,
        dry_run: Optional[bool] = None,
        deadline: Optional[Instant] = None,
        lock_dir: Optional[Union[str, os.PathLike[str]]] = None,
        receipt_log: Optional[Union[str, os.PathLike[str]]] = None,
        controls: Optional[Mapping[str, Mapping[str, Any]]] = None,
        progress: ProgressArg = None,
        **options: Any,
    ) -> FleetOutcome:
        """Run a plan over destinations, each step only when the governor admits it.

        ``destinations`` maps names to engines: :func:`cryo.engines.trino` results, or
        :class:`cryo.engines.SparkEngine` (a ``SparkSession`` you hand in); ``native`` (Cryo's own
        engine) is always there. Tables go to ``default_destination`` (``native`` by default) unless
        ``routes`` (``{"ns.table": "trino"}``) or ``large_table_bytes``/``large_table_destination``
        say otherwise. ``governor``: a :class:`cryo.Governor` (limits per destination, learned
        thresholds); a default one otherwise. A dry run unless ``dry_run=False``: a dry run asks the
        governor once per table and shows each step's statements without running them.
        Deferred steps are tried again when their ``retry_after`` passes; at ``deadline`` what has
        not started is deferred (``pacing="one_pass"``: table after table, and what the gate holds
        back is deferred to the next run at once, as :meth:`run` does). Receipts for every decision (``receipt_log``: JSON lines).
        Before each step the table's ``controls`` (as for :meth:`plan`) and the receipt log are
        checked again: a table paused since the plan was made is left alone, an operation that
        ran within its cooldown (``cooldowns_ms``) is deferred to a later run.
        """
        engines = {}
        for name, dest in (destinations or {}).items():
            engine = dest.as_engine() if hasattr(dest, "as_engine") else dest
            if not isinstance(engine, Engine):
                raise TypeError(f"destination {name!r} must be a cryo Engine or SparkEngine, not {type(dest).__name__}")
            engines[name] = engine
        opts = _options(
            dry_run=dry_run,
            default_destination=default_destination,
            routes=dict(routes) if routes is not None else None,
            deadline_ms=_epoch_ms(deadline, "deadline") if not isinstance(deadline, _dt.timedelta) else None,
            **options,
        )
        if isinstance(deadline, _dt.timedelta):
            # A duration from now, not an age.
            opts["deadline_ms"] = int((_dt.datetime.now(_dt.timezone.utc) + deadline).timestamp() * 1000)
        callback, close = _progress.resolve(progress, "fleet")
        try:
            sources = _options(tables=dict(controls) if controls is not None else None)
            return self._native.run_fleet(
                plan, engines, governor, _path(lock_dir), _path(receipt_log), opts, callback, sources
            )
        finally:
            close()

    def __repr__(self) -> str:
        return repr(self._native)
