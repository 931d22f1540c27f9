"""HTML for notebooks: what ``_repr_html_`` of Cryo's results returns.

Self-contained fragments: inline ``style`` attributes only (no ``<style>`` block, no script, no
external asset), so they survive notebook sanitizers and render the same in JupyterLab, VS Code
and exported HTML. Text inherits the theme's colour; backgrounds are saturated badges (white or
near-black text chosen per colour) or translucent greys, so light and dark themes both read well.
Everything that comes from data (table names, reasons, remedies, codes) goes through
:func:`html.escape`.

The figures are the native classes' (cryo-core's); this module only lays them out.
"""

from __future__ import annotations

import datetime as _dt
import html as _html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

# Grade bands (cryo-core: A >= 90, B >= 75, C >= 60, D >= 40, F below): (background, text).
GRADE_COLOURS = {
    "A": ("#2e7d32", "#ffffff"),
    "B": ("#558b2f", "#ffffff"),
    "C": ("#f9a825", "#1b1b1b"),
    "D": ("#ef6c00", "#ffffff"),
    "F": ("#c62828", "#ffffff"),
}
_UNKNOWN = ("#757575", "#ffffff")
SEVERITY_COLOURS = {"crit": ("#c62828", "#ffffff"), "warn": ("#f9a825", "#1b1b1b")}
SEVERITY_LABELS = {"crit": "critical", "warn": "warning"}
STATUS_COLOURS = {
    "succeeded": ("#2e7d32", "#ffffff"),
    "dry_run": ("#1565c0", "#ffffff"),
    "planned": ("#546e7a", "#ffffff"),
    "admitted": ("#546e7a", "#ffffff"),
    "deferred": ("#f9a825", "#1b1b1b"),
    "skipped": ("#757575", "#ffffff"),
    "failed": ("#c62828", "#ffffff"),
}

#: Width of a bar's track; a full track is 100 points (the whole score).
BAR_TRACK_PX = 160
#: Chunks listed per step before the rest are summarised.
MAX_CHUNKS_SHOWN = 8

_ROOT = "font-family:inherit;font-size:13px;line-height:1.45;color:inherit;max-width:1100px;margin:4px 0"
_MUTED = "opacity:.72"
_TABLE = "border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums;color:inherit;background-color:transparent"
_TH = (
    "text-align:left;padding:4px 10px 4px 0;font-weight:600;white-space:nowrap;"
    "border-bottom:1px solid rgba(128,128,128,.45);background-color:transparent;color:inherit"
)
_TD = "text-align:left;vertical-align:top;padding:5px 10px 5px 0;border-bottom:1px solid rgba(128,128,128,.2);background-color:transparent;color:inherit"
_NUM = _TD.replace("text-align:left", "text-align:right") + ";white-space:nowrap"
_TRACK = "display:inline-block;vertical-align:middle;height:10px;border-radius:3px;background-color:rgba(128,128,128,.22);overflow:hidden"
_CODE = "font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;padding:0 3px;border-radius:3px;background-color:rgba(128,128,128,.16);color:inherit"


def esc(value: object) -> str:
    """Text from data, safe in element content and attribute values."""
    return _html.escape(str(value), quote=True)


def human_bytes(b: Optional[int]) -> str:
    """``48.2 MiB`` (the units cryo-core's text reports use)."""
    if b is None:
        return "–"
    value, unit = float(b), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{b} B" if unit == 0 else f"{value:.1f} {units[unit]}"


def usd(value: Optional[float]) -> str:
    """Dollars with as many digits as small amounts need (cryo-core's text reports do the same)."""
    if value is None:
        return "–"
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:.2f}"
    return f"${value:.4f}"


def utc(ms: Optional[int]) -> str:
    if ms is None:
        return "–"
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}"


def measured(f: Any) -> str:
    """What a finding measured against its threshold, as cryo-core's text report words it."""
    if f.unit in ("ratio", "coverage"):
        return f"{f.measured * 100:.0f}% (threshold {f.threshold * 100:.0f}%)"
    return f"{_number(f.measured)} {f.unit} (threshold {_number(f.threshold)})"


def pill(text: str, colours: tuple[str, str], cls: str = "", title: str = "") -> str:
    bg, fg = colours
    attrs = f' class="{esc(cls)}"' if cls else ""
    attrs += f' title="{esc(title)}"' if title else ""
    return (
        f'<span{attrs} style="display:inline-block;padding:0 7px;border-radius:9px;font-size:11.5px;'
        f'font-weight:600;line-height:18px;white-space:nowrap;background-color:{bg};color:{fg}">{esc(text)}</span>'
    )


def grade_badge(grade: str, score: Optional[int] = None, size: int = 22) -> str:
    """A coloured square with the letter: ``class="cryo-grade cryo-grade-F"``."""
    bg, fg = GRADE_COLOURS.get(grade, _UNKNOWN)
    title = f"grade {grade}" + (f", score {score}/100" if score is not None else "")
    return (
        f'<span class="cryo-grade cryo-grade-{esc(grade)}" title="{esc(title)}" style="display:inline-block;'
        f"min-width:{size}px;height:{size}px;line-height:{size}px;text-align:center;border-radius:5px;"
        f'font-weight:700;font-size:{round(size * 0.6)}px;background-color:{bg};color:{fg}">{esc(grade)}</span>'
    )


def bar_pct(points: float) -> float:
    """Width of a bar for ``points`` on the 100-point scale, in percent of its track (0–100)."""
    return round(max(0.0, min(100.0, float(points))), 1)


def bar(points: float, colour: str, cls: str, px: int = BAR_TRACK_PX, title: str = "") -> str:
    """A horizontal bar: ``points`` out of 100 as the width of a ``px``-wide track."""
    t = f' title="{esc(title)}"' if title else ""
    return (
        f'<span style="{_TRACK};width:{px}px"{t}><span class="{esc(cls)}" data-points="{esc(points)}" '
        f'style="display:block;height:100%;width:{bar_pct(points)}%;background-color:{colour}"></span></span>'
    )


def _table(head: Sequence[tuple[str, bool]], rows: Iterable[str], cls: str) -> str:
    ths = "".join(f'<th style="{_TH}{";text-align:right" if numeric else ""}">{esc(h)}</th>' for h, numeric in head)
    return f'<table class="{esc(cls)}" style="{_TABLE}"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _td(content: str, numeric: bool = False, extra: str = "") -> str:
    return f'<td style="{_NUM if numeric else _TD}{extra}">{content}</td>'


def _code(text: object) -> str:
    return f'<code style="{_CODE}">{esc(text)}</code>'


def _heading(badge: str, title: str, subtitle: str, right: str = "") -> str:
    right_html = f'<div style="margin-left:auto;text-align:right">{right}</div>' if right else ""
    return (
        '<div style="display:flex;align-items:center;gap:12px;margin:2px 0 8px">'
        f'{badge}<div><div style="font-size:15px;font-weight:600">{title}</div>'
        f'<div style="{_MUTED}">{subtitle}</div></div>{right_html}</div>'
    )


def table_name(value: Any) -> str:
    """A table identifier as cryo-core prints it, from a ``to_dict()`` value
    (``{"namespace": [...], "name": ...}``) or a string."""
    if isinstance(value, Mapping):
        from . import _cryo

        return _cryo.table_name([str(p) for p in value.get("namespace", [])], str(value.get("name", "")))
    return str(value)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---- health report ------------------------------------------------------------------------


def _monthly(cost: Mapping[str, Any]) -> float:
    return float(cost.get("storage_usd_month", 0.0)) + float(cost.get("request_usd_month", 0.0))


def health_report(report: Any) -> str:
    """A :class:`cryo.HealthReport`: grade badge, score, a bar per deduction sized by the points it
    cost, its severity, the fix and the operation that applies it, the monthly cost and savings."""
    findings = list(report.findings)
    passed = list(report.passed)
    cost: Mapping[str, Any] = report.cost
    savings = list(cost.get("savings", []))
    saving_total = sum(float(s.get("usd_month", 0.0)) for s in savings)

    subtitle = (
        f"catalog {esc(report.catalog)} · score {int(report.score)}/100 · "
        f"{_plural(len(findings), 'finding')}, {_plural(len(passed), 'check')} passed"
    )
    right = (
        f'<div style="font-size:15px;font-weight:600">{esc(usd(_monthly(cost)))}<span style="{_MUTED};font-weight:400">'
        " / month</span></div>"
    )
    if saving_total > 0:
        right += f'<div style="{_MUTED}">maintenance saves {esc(usd(saving_total))} / month</div>'
    out = [
        f'<div class="cryo cryo-health-report" data-table="{esc(report.table)}" data-grade="{esc(report.grade)}" '
        f'style="{_ROOT}">',
        _heading(grade_badge(report.grade, report.score, 34), esc(report.table), subtitle, right),
        _score_strip(report.grade, int(report.score), findings),
    ]
    if findings:
        rows = [_finding_row(f) for f in findings]
        out.append(
            _table(
                [("points lost", False), ("check", False), ("severity", False), ("fix", False), ("saves / month", True)],
                rows,
                "cryo-findings",
            )
        )
    else:
        out.append(f'<div style="margin:6px 0">All {_plural(len(passed), "check")} pass.</div>')
    out.append(_cost_block(cost))
    if passed and findings:
        out.append(
            f'<div style="{_MUTED};margin-top:4px">passed: ' + ", ".join(_code(p) for p in passed) + "</div>"
        )
    out.append("</div>")
    return "".join(out)


def _score_strip(grade: str, score: int, findings: Sequence[Any]) -> str:
    """The 100 points as one strip: the score in the grade's colour, then each deduction (shrunk
    to fit when the deductions add up to more than the score lost, as when it bottoms out at 0)."""
    width = BAR_TRACK_PX * 2
    lost = sum(int(f.points) for f in findings)
    fit = min(1.0, (100 - score) / lost) if lost else 1.0
    segments = [
        f'<span title="{esc(f"score {score}/100")}" style="display:block;float:left;height:100%;'
        f'width:{bar_pct(score)}%;background-color:{GRADE_COLOURS.get(grade, _UNKNOWN)[0]}"></span>'
    ]
    for f in findings:
        colour = SEVERITY_COLOURS.get(f.severity, _UNKNOWN)[0]
        segments.append(
            f'<span title="{esc(f"{f.code}: -{f.points}")}" style="display:block;float:left;height:100%;'
            f"width:{bar_pct(f.points * fit)}%;background-color:{colour};opacity:.55;"
            'box-shadow:inset 1px 0 0 rgba(255,255,255,.6)"></span>'
        )
    return (
        f'<div class="cryo-score" data-score="{score}" style="display:flex;align-items:center;gap:8px;margin:0 0 6px">'
        f'<span style="{_TRACK};height:12px;width:{width}px">{"".join(segments)}</span>'
        f'<span style="font-weight:600">{score}</span><span style="{_MUTED}">/ 100</span></div>'
    )


def _finding_row(f: Any) -> str:
    sev_colours = SEVERITY_COLOURS.get(f.severity, _UNKNOWN)
    bar_cell = (
        bar(f.points, sev_colours[0], "cryo-bar", title=f"{f.points} of 100 points")
        + f' <span style="font-weight:600;margin-left:4px">−{esc(f.points)}</span>'
    )
    check = f"{_code(f.code)}<div>{esc(f.reason)}</div><div style=\"{_MUTED}\">measured {esc(measured(f))}</div>"
    fix = esc(f.remedy)
    if f.operation:
        fix += f'<div style="margin-top:2px">{_code(f.operation)}</div>'
    saving = esc(usd(f.saving_usd_month)) if f.saving_usd_month is not None else f'<span style="{_MUTED}">–</span>'
    severity = pill(SEVERITY_LABELS.get(f.severity, f.severity), sev_colours, "cryo-severity")
    return (
        f'<tr class="cryo-finding" data-code="{esc(f.code)}" data-points="{esc(f.points)}">'
        f'{_td(bar_cell, extra=";white-space:nowrap")}{_td(check)}{_td(severity)}{_td(fix)}{_td(saving, numeric=True)}</tr>'
    )


def _cost_block(cost: Mapping[str, Any]) -> str:
    parts = [
        f"<b>Cost</b>: {esc(usd(cost.get('storage_usd_month')))} storage + "
        f"{esc(usd(cost.get('request_usd_month')))} requests per month"
    ]
    retained = int(cost.get("retained_by_snapshots_bytes") or 0)
    if retained:
        parts.append(f"{esc(human_bytes(retained))} held only by old snapshots")
    excess = int(cost.get("excess_files") or 0)
    if excess:
        parts.append(
            f"{esc(excess)} excess files cost {esc(usd(cost.get('excess_request_usd_month')))} / month in requests"
        )
    lines = [f'<div class="cryo-cost" style="margin-top:6px">{"; ".join(parts)}</div>']
    for s in cost.get("savings", []):
        detail = []
        if s.get("files_fewer"):
            detail.append(f"{esc(s['files_fewer'])} fewer files to open")
        if s.get("bytes_freed"):
            detail.append(f"{esc(human_bytes(s['bytes_freed']))} freed")
        extra = f' <span style="{_MUTED}">({", ".join(detail)})</span>' if detail else ""
        lines.append(
            f'<div class="cryo-saving" style="margin-left:14px">{_code(s.get("operation", ""))} saves '
            f'<b>{esc(usd(s.get("usd_month")))}</b> / month{extra}</div>'
        )
    return "".join(lines)


# ---- fleet ----------------------------------------------------------------------------------


def worst_first(reports: Iterable[Any]) -> list[Any]:
    """Reports in cryo-core's fleet order: lowest score first, ties by table."""
    from . import _cryo

    return _cryo.worst_first(list(reports))


def fleet(reports: Iterable[Any], scans: Optional[Mapping[str, Any]] = None, errors: Sequence[Mapping[str, Any]] = (), catalog: Optional[str] = None) -> str:
    """One row per graded table, worst first: grade badge, score bar, files, size, snapshots,
    delete files, monthly cost and the operations that would fix it. ``scans`` maps table
    identifiers to their :class:`cryo.TableScan` (the file figures; ``–`` without one)."""
    ordered = worst_first(reports)
    scans = scans or {}
    counts: dict[str, int] = {}
    for r in ordered:
        counts[r.grade] = counts.get(r.grade, 0) + 1
    total_cost = sum(_monthly(r.cost) for r in ordered)
    summary = " ".join(
        f'{grade_badge(g, size=16)}<span style="margin:0 8px 0 3px">{counts[g]}</span>' for g in "FDCBA" if g in counts
    )
    subtitle = f"{_plural(len(ordered), 'table')}" + (f" in catalog {esc(catalog)}" if catalog else "")
    subtitle += f", worst first · {esc(usd(total_cost))} / month"
    if errors:
        subtitle += f" · {_plural(len(errors), 'table')} not scanned"
    rows = []
    for r in ordered:
        s = scans.get(str(r.table))
        colour = GRADE_COLOURS.get(r.grade, _UNKNOWN)[0]
        score_cell = bar(r.score, colour, "cryo-score-bar", px=110, title=f"{r.score}/100") + (
            f' <span style="margin-left:4px">{esc(r.score)}</span>'
        )
        ops = ", ".join(_code(o) for o in r.operations) or f'<span style="{_MUTED}">–</span>'

        def figure(value: Any, fmt: Any = str) -> str:
            return esc(fmt(value)) if value is not None else f'<span style="{_MUTED}">–</span>'

        rows.append(
            f'<tr class="cryo-fleet-row" data-table="{esc(r.table)}" data-grade="{esc(r.grade)}" data-score="{esc(r.score)}">'
            + _td(grade_badge(r.grade, r.score))
            + _td(esc(r.table), extra=";font-weight:600")
            + _td(score_cell, extra=";white-space:nowrap")
            + _td(figure(s.data_files if s else None, lambda v: f"{v:,}"), numeric=True)
            + _td(figure(s.data_bytes if s else None, human_bytes), numeric=True)
            + _td(figure(s.snapshots if s else None), numeric=True)
            + _td(figure(s.delete_files if s else None, lambda v: f"{v:,}"), numeric=True)
            + _td(esc(usd(_monthly(r.cost))), numeric=True)
            + _td(ops)
            + "</tr>"
        )
    head = [
        ("", False), ("table", False), ("score", False), ("files", True), ("size", True),
        ("snapshots", True), ("deletes", True), ("cost / month", True), ("fixes", False),
    ]
    out = [
        f'<div class="cryo cryo-fleet" style="{_ROOT}">',
        _heading("", "Fleet health", subtitle, summary),
        _table(head, rows, "cryo-fleet-table"),
    ]
    if errors:
        items = "".join(
            f'<li>{esc(e.get("target", ""))} {_code(e.get("code", ""))}: {esc(e.get("message", ""))}</li>' for e in errors
        )
        out.append(f'<div class="cryo-scan-errors"><b>Not scanned</b><ul style="margin:2px 0">{items}</ul></div>')
    out.append("</div>")
    return "".join(out)


def fleet_scan(scan: Any) -> str:
    """A :class:`cryo.FleetScan`, each table graded with cryo-core's default options."""
    from ._fleet import grade_fleet

    return grade_fleet(scan)._repr_html_()


# ---- plan -----------------------------------------------------------------------------------


def _step_detail(step: Mapping[str, Any]) -> str:
    params = step.get("params", {})
    chunks = step.get("chunks", [])
    op = params.get("operation", step.get("operation"))
    files = sum(int(c.get("input_files", 0)) for c in chunks)
    size = sum(int(c.get("input_bytes", 0)) for c in chunks)
    if op == "rewrite_data_files":
        out_files = sum(int(c.get("expected_output_files", 0)) for c in chunks)
        return (
            f"{files:,} files / {human_bytes(size)} → ~{out_files:,} files of "
            f"{human_bytes(params.get('target_file_size_bytes'))}"
        )
    if op in ("rewrite_position_deletes", "convert_equality_deletes"):
        return f"{files:,} delete files / {human_bytes(size)}"
    if op == "rewrite_manifests":
        return f"{files:,} manifests → manifests of ~{human_bytes(params.get('target_manifest_size_bytes'))}"
    if op == "expire_snapshots":
        return (
            f"{files:,} snapshots older than {utc(params.get('older_than_ms'))}, "
            f"keeping the newest {params.get('retain_last')}"
        )
    if op == "remove_orphan_files":
        return f"files older than {utc(params.get('older_than_ms'))}" + (" (dry run)" if params.get("dry_run") else "")
    if op == "compute_statistics":
        columns = params.get("columns") or []
        return ", ".join(columns) if columns else "all columns"
    return f"{files:,} files / {human_bytes(size)}"


def _scope(chunks: Sequence[Mapping[str, Any]]) -> str:
    if any(c.get("whole_table") for c in chunks):
        return "whole table"
    parts = sum(len(c.get("partitions", [])) for c in chunks)
    return f"{_plural(parts, 'partition')} in {_plural(len(chunks), 'chunk')}"


def _chunks(chunks: Sequence[Mapping[str, Any]]) -> str:
    if not chunks or (len(chunks) == 1 and chunks[0].get("whole_table")):
        return ""
    rows = []
    for c in chunks[:MAX_CHUNKS_SHOWN]:
        parts = [p.get("path", "") for p in c.get("partitions", [])]
        shown = ", ".join(_code(p) for p in parts[:4]) + (f" +{len(parts) - 4}" if len(parts) > 4 else "")
        files, outputs = int(c.get("input_files", 0)), int(c.get("expected_output_files", 0))
        rows.append(
            '<tr class="cryo-chunk">'
            + _td(esc(c.get("index", "")), numeric=True)
            + _td(shown or "whole table")
            + _td(f"{files:,}", numeric=True)
            + _td(esc(human_bytes(c.get("input_bytes"))), numeric=True)
            + _td(f"{outputs:,}", numeric=True)
            + "</tr>"
        )
    table = _table(
        [("chunk", True), ("partitions", False), ("files", True), ("bytes", True), ("→ files", True)], rows, "cryo-chunks"
    )
    more = len(chunks) - MAX_CHUNKS_SHOWN
    note = f'<div style="{_MUTED}">… and {_plural(more, "more chunk")}</div>' if more > 0 else ""
    return f'<div style="margin-left:4px">{table}{note}</div>'


def plan(p: Any) -> str:
    """A :class:`cryo.Plan`: every table (worst first, as planned) with its steps in order, their
    chunks and the bytes they read."""
    d: Mapping[str, Any] = p.to_dict()
    tables = d.get("tables", [])
    steps = sum(len(t.get("steps", [])) for t in tables)
    total = sum(int(c.get("input_bytes", 0)) for t in tables for s in t.get("steps", []) for c in s.get("chunks", []))
    saving = sum(float(s.get("saving_usd_month", 0.0)) for t in tables for s in t.get("steps", []))
    fingerprint = str(d.get("fingerprint", ""))
    subtitle = (
        f"catalog {esc(d.get('catalog', ''))} · {_plural(len(tables), 'table')}, {_plural(steps, 'step')}, "
        f"{esc(human_bytes(total))} to read · made for {esc(utc(d.get('created_at_ms')))}"
    )
    right = f'<div title="{esc(fingerprint)}">fingerprint {_code(fingerprint[:12])}</div>'
    if saving > 0:
        right += f'<div style="{_MUTED}">saves {esc(usd(saving))} / month</div>'
    out = [
        f'<div class="cryo cryo-plan" data-fingerprint="{esc(fingerprint)}" style="{_ROOT}">',
        _heading("", "Maintenance plan", subtitle, right),
    ]
    for t in tables:
        name = table_name(t.get("table", ""))
        out.append(
            f'<div class="cryo-plan-table" data-table="{esc(name)}" style="margin:10px 0 4px;'
            'border-left:3px solid rgba(128,128,128,.35);padding-left:10px">'
            f'<div style="display:flex;align-items:center;gap:8px">{grade_badge(str(t.get("grade", "?")), t.get("score"))}'
            f'<b>{esc(name)}</b><span style="{_MUTED}">score {esc(t.get("score", ""))}/100</span></div>'
        )
        rows = []
        for i, s in enumerate(t.get("steps", []), 1):
            chunks = s.get("chunks", [])
            size = sum(int(c.get("input_bytes", 0)) for c in chunks)
            because = ", ".join(_code(b) for b in s.get("because", []))
            rows.append(
                f'<tr class="cryo-step" data-operation="{esc(s.get("operation", ""))}">'
                + _td(f"{i}.", numeric=True)
                + _td(_code(s.get("operation", "")))
                + _td(esc(_scope(chunks)) + f'<div style="{_MUTED}">{esc(_step_detail(s))}</div>' + _chunks(chunks))
                + _td(esc(human_bytes(size)), numeric=True)
                + _td(because)
                + _td(esc(usd(s.get("saving_usd_month"))), numeric=True)
                + "</tr>"
            )
        for s in t.get("skipped", []):
            rows.append(
                f'<tr class="cryo-step-skipped" style="{_MUTED}">{_td("–", numeric=True)}{_td(_code(s.get("operation", "")))}'
                f'{_td("skipped: " + esc(s.get("reason", "")))}{_td("")}{_td("")}{_td("")}</tr>'
            )
        out.append(
            _table(
                [("#", True), ("operation", False), ("scope", False), ("bytes", True), ("because", False), ("saves / month", True)],
                rows,
                "cryo-steps",
            )
        )
        out.append("</div>")
    skipped = d.get("skipped_tables", [])
    if skipped:
        items = "".join(f'<li><b>{esc(table_name(s.get("table", "")))}</b>: {esc(s.get("reason", ""))}</li>' for s in skipped)
        out.append(f'<div class="cryo-skipped-tables" style="margin-top:6px"><b>Not planned</b><ul style="margin:2px 0">{items}</ul></div>')
    out.append("</div>")
    return "".join(out)


# ---- run outcome ----------------------------------------------------------------------------


def _footprint(fp: Optional[Mapping[str, Any]]) -> str:
    if not fp:
        return ""
    return f"{int(fp.get('files', 0)):,} files / {human_bytes(fp.get('bytes'))}"


def run_outcome(outcome: Any) -> str:
    """A :class:`cryo.RunOutcome`: counts by status and a receipt per decision, coloured by status."""
    d: Mapping[str, Any] = outcome.to_dict()
    receipts = d.get("receipts", [])
    counts = outcome.counts
    summary = " ".join(
        pill(f"{status.replace('_', ' ')} {n}", STATUS_COLOURS.get(status, _UNKNOWN), "cryo-status-count")
        for status, n in sorted(counts.items(), key=lambda kv: list(STATUS_COLOURS).index(kv[0]) if kv[0] in STATUS_COLOURS else 99)
    )
    fingerprint = str(d.get("plan_fingerprint", ""))
    subtitle = (
        f"{'dry run — nothing was changed' if d.get('dry_run') else 'changes committed'} · "
        f"{_plural(len(receipts), 'receipt')} · {esc(d.get('duration_ms', 0))} ms · plan {_code(fingerprint[:12])}"
    )
    failed = list(outcome.failed_tables)
    if failed:
        subtitle += " · failed: " + ", ".join(f"<b>{esc(t)}</b>" for t in failed)
    rows = []
    for r in receipts:
        status = str(r.get("status", ""))
        colours = STATUS_COLOURS.get(status, _UNKNOWN)
        before, after = _footprint(r.get("before")), _footprint(r.get("after"))
        change = f"{esc(before)} → {esc(after)}" if before and after else esc(before or after)
        duration = r.get("duration_ms")
        rows.append(
            f'<tr class="cryo-receipt" data-status="{esc(status)}">'
            + _td(esc(table_name(r.get("table", ""))), extra=f";padding-left:8px;font-weight:600;border-left:3px solid {colours[0]}")
            + _td(_code(r.get("operation")) if r.get("operation") else f'<span style="{_MUTED}">–</span>')
            + _td(pill(status.replace("_", " "), colours, "cryo-status"))
            + _td(change, numeric=True)
            + _td(esc(f"{duration} ms") if duration is not None else "", numeric=True)
            + _td(esc(r.get("reason") or ""))
            + "</tr>"
        )
    out = [
        f'<div class="cryo cryo-run" data-dry-run="{str(bool(d.get("dry_run"))).lower()}" style="{_ROOT}">',
        _heading("", "Maintenance run", subtitle, summary),
        _table(
            [("table", False), ("operation", False), ("status", False), ("before → after", True), ("time", True), ("reason", False)],
            rows,
            "cryo-receipts",
        ),
        "</div>",
    ]
    return "".join(out)
