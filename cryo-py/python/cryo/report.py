"""cryo-core's human-readable reports as text: what ``python -m cryo`` prints.

>>> print(cryo.report.fleet_table(fleet, [cryo.grade(t) for t in fleet.tables]))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Union

from . import _cryo
from ._cryo import FleetOutcome, FleetScan, HealthReport, Plan, RunOutcome, TableScan


def fleet_table(scans: Union[FleetScan, Iterable[TableScan]], reports: Iterable[HealthReport]) -> str:
    """One line per graded table: grade, score, files, size, snapshots, deletes, monthly cost."""
    items = scans.tables if isinstance(scans, FleetScan) else list(scans)
    return _cryo.fleet_table(items, list(reports))


def health_report(report: HealthReport) -> str:
    """A table's grade with every deduction, its fix and the cost."""
    return _cryo.health_report(report)


def plan_text(plan: Plan) -> str:
    """The plan, table by table, step by step."""
    return _cryo.plan_text(plan)


def receipts_text(outcome: Union[RunOutcome, FleetOutcome]) -> str:
    """One line per receipt of a run (native or fleet): table, operation, status, files and bytes before -> after."""
    return _cryo.receipts_text(outcome)


def scan_errors(fleet: FleetScan) -> str:
    """The tables and namespaces a fleet scan could not read, one per line (empty when none)."""
    return _cryo.scan_errors(fleet)


__all__ = ["fleet_table", "health_report", "plan_text", "receipts_text", "scan_errors"]
