"""Grades of many tables at once: :func:`grade_fleet` and the :class:`FleetGrades` it returns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional, Union, overload

from . import _cryo, _html
from ._cryo import FleetScan, HealthReport, TableScan


class FleetGrades(Sequence[HealthReport]):
    """Health reports of several tables, worst first (lowest score; ties by name).

    A sequence of :class:`HealthReport`; in a notebook it shows as one row per table (grade,
    score bar, files, size, snapshots, delete files, monthly cost, fixes). Build one with
    :func:`grade_fleet`, or from reports you already have (``scans`` adds the file figures).
    """

    __slots__ = ("_reports", "_scans", "errors", "catalog")

    def __init__(
        self,
        reports: Iterable[HealthReport],
        scans: Iterable[TableScan] = (),
        *,
        errors: Sequence[Mapping[str, Any]] = (),
        catalog: Optional[str] = None,
    ) -> None:
        self._reports: list[HealthReport] = _html.worst_first(reports)
        self._scans: dict[str, TableScan] = {s.table: s for s in scans}
        #: Tables the fleet scan could not read (``target``, ``code``, ``message``).
        self.errors: list[Mapping[str, Any]] = list(errors)
        #: Catalog name, when known.
        self.catalog = catalog

    @overload
    def __getitem__(self, index: int) -> HealthReport: ...
    @overload
    def __getitem__(self, index: slice) -> list[HealthReport]: ...
    def __getitem__(self, index: Union[int, slice]) -> Union[HealthReport, list[HealthReport]]:
        return self._reports[index]

    def __len__(self) -> int:
        return len(self._reports)

    def __iter__(self) -> Iterator[HealthReport]:
        return iter(self._reports)

    @property
    def worst(self) -> Optional[HealthReport]:
        """The lowest-scoring table's report (None for an empty fleet)."""
        return self._reports[0] if self._reports else None

    def report(self, table: str) -> HealthReport:
        """The report of ``table`` (``namespace.table``); KeyError if it was not graded."""
        for r in self._reports:
            if r.table == table:
                return r
        raise KeyError(table)

    def scan(self, table: str) -> Optional[TableScan]:
        """The scan ``table`` was graded from, if it was given."""
        return self._scans.get(table)

    def by_grade(self) -> dict[str, int]:
        """How many tables got each grade."""
        counts: dict[str, int] = {}
        for r in self._reports:
            counts[r.grade] = counts.get(r.grade, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """Every report (worst first) and the scan errors, as plain Python values."""
        return {"catalog": self.catalog, "reports": [r.to_dict() for r in self._reports], "errors": list(self.errors)}

    def _repr_html_(self) -> str:
        return _html.fleet(self._reports, self._scans, self.errors, self.catalog)

    def __repr__(self) -> str:
        counts = self.by_grade()
        grades = ", ".join(f"{counts[g]} {g}" for g in "FDCBA" if g in counts)
        worst = self.worst
        tail = f"; worst {worst.table} ({worst.grade}, {worst.score}/100)" if worst is not None else ""
        return f"FleetGrades({len(self)} tables: {grades or 'none'}{tail})"


def grade_fleet(scans: Union[FleetScan, Iterable[TableScan]], **options: Any) -> FleetGrades:
    """Grade every table of a fleet scan (or several table scans), worst first.

    Options: cryo-core's ``GradeOptions`` (``skip=[codes]``, ``cost={...}``), as for :func:`cryo.grade`.
    """
    opts = {k: v for k, v in options.items() if v is not None}
    catalog: Optional[str]
    if isinstance(scans, FleetScan):
        tables, errors, catalog = scans.tables, scans.errors, scans.catalog
    else:
        tables, errors = list(scans), []
        catalog = tables[0].catalog if tables else None
    return FleetGrades((_cryo.grade(t, opts) for t in tables), tables, errors=errors, catalog=catalog)
