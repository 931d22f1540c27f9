"""Cryo: Apache Iceberg table maintenance, from metadata first.

The pipeline::

    catalog = cryo.Catalog("prod", type="rest", uri=..., warehouse=...)   # PyIceberg's properties
    fleet = catalog.scan_fleet()               # metadata only
    grades = cryo.grade_fleet(fleet)           # HealthReports, worst first
    plan = catalog.plan(fleet)                 # a value: to_json(), Plan.from_json(), fingerprint
    print(plan.render("trino", catalog="iceberg", version=478))
    outcome = catalog.run(plan)                # a dry run unless dry_run=False
    pyarrow.table(outcome.receipts())

Single operations: :meth:`Catalog.compact`, :meth:`Catalog.expire_snapshots`,
:meth:`Catalog.rewrite_manifests`, :meth:`Catalog.rewrite_position_deletes`,
:meth:`Catalog.remove_orphan_files`, :meth:`Catalog.missing_files`,
:meth:`Catalog.compute_statistics`.

In a notebook, health reports, fleet grades, fleet scans, plans and run outcomes display as HTML
(``_repr_html_``): grade badges, a bar per deduction, the fixes, the cost, the receipts.

Conventions: small results are frozen classes with a readable ``repr`` and ``to_dict()``; tables of
rows (receipts, per-partition statistics, file listings) are :class:`ArrowResult` objects that
``pyarrow.table()``, polars and DuckDB read through the Arrow PyCapsule interface. Defaults are
cryo-core's (``None`` means "the default"); destructive operations are dry runs unless told
otherwise. Calls release the GIL, stop on Ctrl-C and work after ``os.fork()``. Errors are
:class:`CryoError` subclasses (see :mod:`cryo.errors`).

Logging: cryo-core's events are records of the ``cryo`` logger and its children
(``cryo.compact.run``, ``cryo.maintain.expire``, …), with the Rust source as their location and
their fields in ``record.cryo_fields``; configure them like any library's
(``logging.getLogger("cryo").setLevel(logging.INFO)``). Progress: :meth:`Catalog.scan_fleet`,
:meth:`Catalog.compact` and :meth:`Catalog.run` take ``progress=`` (a callable given
``{"stage", "done", "total", "table"}``, or ``True`` for a tqdm bar, shown by default in
notebooks when tqdm is installed). Command line: ``python -m cryo --help`` (:mod:`cryo.cli`).
"""

from __future__ import annotations

import logging as _logging
import os
from typing import Any, Optional, Union

from . import _cryo, engines, report
from ._catalog import Catalog, Instant, _property
from ._cryo import (
    Advice,
    ArrowResult,
    CommitFence,
    CompactionOutcome,
    ComputeStatisticsOutcome,
    ConvertEqualityDeletesOutcome,
    Engine,
    ExpireOutcome,
    Finding,
    FleetOutcome,
    FleetScan,
    Footprint,
    Governor,
    HealthReport,
    MissingFilesOutcome,
    Plan,
    Policy,
    RemoveOrphanFilesOutcome,
    RewriteManifestsOutcome,
    RewritePositionDeletesOutcome,
    RunOutcome,
    TableScan,
    __version__,
)
from ._fleet import FleetGrades, grade_fleet
from ._progress import ProgressArg, ProgressEvent, TqdmProgress
from .errors import (
    CatalogError,
    CommitConflictError,
    ConfigError,
    CryoError,
    EngineError,
    InternalError,
    MetadataError,
    NotFoundError,
    PolicyError,
    RefusedError,
    RenderError,
    StorageError,
    UnsupportedError,
    ValidationError,
)

# A library's logger: silent unless the application configures logging.
_logging.getLogger("cryo").addHandler(_logging.NullHandler())


def grade(scan: TableScan, **options: Any) -> HealthReport:
    """Grade a table scan: a letter (A–F), a score out of 100 and the findings behind them.

    Pure: reads nothing, so it is as fast as a dict lookup. Options: cryo-core's
    ``GradeOptions`` (``skip=[codes]``, ``cost={...}``).
    """
    return _cryo.grade(scan, {k: v for k, v in options.items() if v is not None})


def render(plan: Plan, dialect: str, **options: Any) -> str:
    """The plan as a SQL script for ``"trino"`` (options ``catalog``, ``version``) or ``"spark"``
    (``catalog``, ``spark_version``, ``iceberg_version``); same as ``plan.render(...)``."""
    return plan.render(dialect, **options)


def load_catalog(name: Optional[str] = None, **properties: object) -> Catalog:
    """The catalog PyIceberg's configuration names, as PyIceberg's ``load_catalog`` finds it.

    The first ``.pyiceberg.yaml`` of ``$PYICEBERG_HOME``, the home directory and the current
    directory, with ``PYICEBERG_CATALOG__<NAME>__<PROPERTY>`` environment variables on top, then
    ``properties``. Without a name, ``default-catalog`` (or ``PYICEBERG_DEFAULT_CATALOG``) names
    it, else ``default``. Raises :class:`cryo.NotFoundError` when nothing configures the catalog.

    >>> prod = cryo.load_catalog("prod")  # doctest: +SKIP
    """
    resolved, props = _cryo.pyiceberg_config(name, {k: _property(k, v) for k, v in properties.items()})
    return Catalog(resolved, **props)


def demo_lake(path: Union[str, os.PathLike[str]], **options: Any) -> DemoLake:
    """Build Cryo's demo lake under ``path`` (a sqlite catalog and a local warehouse of decayed
    tables), or reopen it if it is already there. ``demo.catalog`` is a :class:`Catalog`."""
    return DemoLake(_cryo.demo_lake(os.fspath(path), {k: v for k, v in options.items() if v is not None}))


def read_receipts(path: Union[str, os.PathLike[str]]) -> ArrowResult:
    """Read a receipt log written by :meth:`Catalog.run` as Arrow (``pyarrow.table(...)``)."""
    return _cryo.read_receipts(os.fspath(path))


class DemoLake:
    """Cryo's demo lake: a sqlite catalog and a local warehouse of tables in known states of decay."""

    __slots__ = ("_native", "catalog")

    def __init__(self, native: _cryo.DemoLake) -> None:
        self._native = native
        #: The lake's catalog.
        self.catalog = Catalog._wrap(native.catalog)

    @property
    def root(self) -> str:
        """Directory holding the catalog, the warehouse and ``demo-lake.json``."""
        return os.fspath(self._native.root)

    @property
    def tables(self) -> list[str]:
        """Table identifiers."""
        return self._native.tables

    @property
    def built(self) -> bool:
        """True when this call built the lake, False when it reopened an existing one."""
        return self._native.built

    @property
    def pristine(self) -> bool:
        """True when no table was committed to since the lake was built."""
        return self._native.pristine

    def to_dict(self) -> dict[str, Any]:
        """The lake's manifest: what every table holds."""
        return self._native.to_dict()

    def __repr__(self) -> str:
        return repr(self._native)


__all__ = [
    "Advice",
    "ArrowResult",
    "Catalog",
    "CatalogError",
    "CommitConflictError",
    "CompactionOutcome",
    "ComputeStatisticsOutcome",
    "ConvertEqualityDeletesOutcome",
    "ConfigError",
    "CryoError",
    "DemoLake",
    "CommitFence",
    "Engine",
    "EngineError",
    "ExpireOutcome",
    "Finding",
    "FleetGrades",
    "FleetOutcome",
    "FleetScan",
    "Footprint",
    "Governor",
    "HealthReport",
    "Instant",
    "InternalError",
    "MetadataError",
    "MissingFilesOutcome",
    "NotFoundError",
    "Plan",
    "Policy",
    "PolicyError",
    "ProgressArg",
    "ProgressEvent",
    "RefusedError",
    "RemoveOrphanFilesOutcome",
    "RenderError",
    "RewriteManifestsOutcome",
    "RewritePositionDeletesOutcome",
    "RunOutcome",
    "StorageError",
    "TableScan",
    "TqdmProgress",
    "UnsupportedError",
    "ValidationError",
    "__version__",
    "demo_lake",
    "engines",
    "grade",
    "grade_fleet",
    "load_catalog",
    "read_receipts",
    "render",
    "report",
]
