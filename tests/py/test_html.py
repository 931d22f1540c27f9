"""Notebook HTML of the ``cryo`` package (``_repr_html_``, laid out by ``cryo/_html.py``).

Run with the package installed (see test_python_api.py):  $PEERS_PYTHON -m pytest tests/py/test_html.py

What is proved, on real results (the demo lake, and a PyIceberg table whose name and partition
values are HTML):

- a hostile table name and hostile partition values arrive escaped: every fragment parses into
  nothing but Cryo's own layout tags, with no event-handler attribute, no script, no ``<style>``,
  no external asset;
- a health report shows every finding (code, reason, measured value, severity, remedy, operation,
  saving) with a bar whose width is its points on the 100-point scale;
- fleet views (``FleetScan`` and ``grade_fleet``) have one row per table, worst first, with a grade
  badge, a score bar as wide as the score and the scan's figures;
- a plan lists its tables and steps in plan order with their chunks and bytes; a run outcome has a
  receipt row per receipt, coloured by status;
- every element that sets a text colour also sets its background colour (so the theme's text colour is
  never drawn on a colour it did not choose: readable in light and dark themes).
"""

from __future__ import annotations

import html
import sys
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")
from cryo import _html  # noqa: E402

HOSTILE_TABLE = "<img src=x onerror=alert(1)>&\"'"
HOSTILE_PARTITION = "<svg onload=alert(2)>"
LAYOUT_TAGS = {"div", "span", "table", "thead", "tbody", "tr", "th", "td", "code", "b", "ul", "li"}


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def style(self) -> dict[str, str]:
        decls = (d.split(":", 1) for d in self.attrs.get("style", "").split(";") if ":" in d)
        return {k.strip(): v.strip() for k, v in decls}

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, cls: str) -> list[Element]:
        return [e for e in self.iter() if cls in e.classes]

    def find(self, cls: str) -> Element:
        found = self.find_all(cls)
        assert found, f"no .{cls}"
        return found[0]

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


VOID = {"br", "img", "hr", "meta", "link", "input"}


class Tree(HTMLParser):
    """A fragment as a tree; fails on unbalanced tags."""

    def __init__(self, fragment: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, None)
        self.cur = self.root
        self.feed(fragment)
        self.close()
        assert self.cur is self.root, f"unclosed <{self.cur.tag}>"

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(el)
        if tag not in VOID:
            self.cur = el

    def handle_endtag(self, tag):
        assert self.cur.tag == tag, f"</{tag}> closes <{self.cur.tag}>"
        self.cur = self.cur.parent

    def handle_data(self, data):
        self.cur.text += data


def parse(fragment: str) -> Element:
    """Parse a fragment and check the properties every Cryo fragment has."""
    root = Tree(fragment).root
    for el in root.iter():
        if el is root:
            continue
        assert el.tag in LAYOUT_TAGS, f"unexpected <{el.tag}> {el.attrs}"
        assert not any(a.startswith("on") for a in el.attrs), el.attrs
        assert set(el.attrs) <= {"class", "style", "title"} | {a for a in el.attrs if a.startswith("data-")}, el.attrs
        style = el.attrs.get("style", "")
        assert "url(" not in style and "expression" not in style and "@import" not in style, style
        colour = el.style.get("color")
        if colour is not None and colour != "inherit":
            assert "background-color" in el.style, f"text colour {colour} without a background: {el.attrs}"
    assert "<script" not in fragment.lower() and "<style" not in fragment.lower()
    return root


def width_pct(el: Element) -> float:
    return float(el.style["width"].rstrip("%"))


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return cryo.demo_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def fleet(lake):
    return lake.catalog.scan_fleet()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A PyIceberg table whose name and partition values are HTML, in eight small appends."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    tmp = tmp_path_factory.mktemp("hostile")
    pycat = cryo_peers.sql_catalog(tmp / "catalog.db", tmp / "warehouse", name="py")
    pycat.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = pycat.create_table(f"ns.{HOSTILE_TABLE}", schema=schema, partition_spec=spec)
    arrow_schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    for i in range(8):
        ids = list(range(i * 10, i * 10 + 10))
        regions = [HOSTILE_PARTITION if n % 2 else "plain" for n in ids]
        table.append(pa.table({"id": ids, "region": regions}, schema=arrow_schema))
    cat = cryo.Catalog.from_pyiceberg(pycat)
    # Cryo quotes a name part that needs it: ns."<img …>&""'" (the double quote doubled).
    (name,) = cat.list_tables()
    assert HOSTILE_TABLE.replace('"', '""') in name
    return cat, name


# ---- escaping -------------------------------------------------------------------------------


def test_hostile_table_name_and_partition_values_are_escaped(hostile):
    cat, name = hostile
    scan = cat.scan(name)
    report = cryo.grade(scan)
    assert report.table == name and report.findings, report
    plan = cat.plan(scan, small_table_bytes=0)  # plan by partition, so partition values are shown
    assert plan.step_count > 0, plan
    fragments = {
        "report": report._repr_html_(),
        "fleet": cryo.grade_fleet([scan])._repr_html_(),
        "plan": plan._repr_html_(),
        "dry run": cat.run(plan)._repr_html_(),
    }
    for what, fragment in fragments.items():
        for raw in (HOSTILE_TABLE, "<img", HOSTILE_PARTITION, "<svg"):
            assert raw not in fragment, (what, raw)
        root = parse(fragment)  # only Cryo's tags, and no on* attribute (the payload stayed text)
        assert html.escape(name) in fragment, what
        assert name in root.all_text() or any(el.attrs.get("data-table") == name for el in root.iter()), what
    # The table name reads back as itself (data attribute and text) after unescaping.
    root = parse(fragments["report"])
    assert root.find("cryo-health-report").attrs["data-table"] == name
    # The hostile partition value is shown (escaped) among the plan's chunks, as its partition path
    # spells it: `=` (like `%` and `/`) is percent-encoded in a value so the path parses one way.
    shown = HOSTILE_PARTITION.replace("=", "%3D")
    plan_html = fragments["plan"]
    assert html.escape(shown) in plan_html
    chunks = parse(plan_html).find_all("cryo-chunk")
    assert chunks and any(shown in c.all_text() for c in chunks)


def test_escape_helpers():
    assert _html.esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert "<b>" not in _html.pill("<b>", ("#000", "#fff"))
    assert "<i>" not in _html.grade_badge("<i>")


# ---- health report --------------------------------------------------------------------------


def test_report_shows_every_finding_with_bars_sized_by_points(fleet):
    reports = [cryo.grade(t) for t in fleet.tables]
    worst = min(reports, key=lambda r: r.score)
    assert worst.grade == "F" and len(worst.findings) >= 3
    for report in reports:
        fragment = report._repr_html_()
        root = parse(fragment)
        card = root.find("cryo-health-report")
        assert card.attrs["data-grade"] == report.grade and card.attrs["data-table"] == report.table
        badge = root.find("cryo-grade")
        assert badge.classes == {"cryo-grade", f"cryo-grade-{report.grade}"} and badge.all_text() == report.grade
        assert badge.style["background-color"] == _html.GRADE_COLOURS[report.grade][0]
        strip = root.find("cryo-score")
        assert int(strip.attrs["data-score"]) == report.score
        # The strip is the 100 points: the score, then the deductions (fitted into what was lost).
        segments = [width_pct(s) for s in strip.children[0].children]
        assert segments[0] == pytest.approx(report.score, abs=0.05) and len(segments) == 1 + len(report.findings)
        assert sum(segments) <= 100.05 + 0.05 * len(segments)
        if report.findings and sum(f.points for f in report.findings) <= 100 - report.score:
            assert segments[1:] == pytest.approx([f.points for f in report.findings], abs=0.05)
        rows = root.find_all("cryo-finding")
        assert [r.attrs["data-code"] for r in rows] == [f.code for f in report.findings]
        for row, f in zip(rows, report.findings):
            text = row.all_text()
            assert f.reason in text and f.remedy in text and f"−{f.points}" in text
            assert _html.measured(f) in text
            assert _html.SEVERITY_LABELS[f.severity] in row.find("cryo-severity").all_text()
            if f.operation:
                assert f.operation in text
            if f.saving_usd_month is not None:
                assert _html.usd(f.saving_usd_month) in text
            b = row.find("cryo-bar")
            assert int(b.attrs["data-points"]) == f.points
            assert width_pct(b) == pytest.approx(min(f.points, 100), abs=0.05)  # 100% = all 100 points
        if report.findings:
            # Bars are proportional to points: a 20-point finding is 2.5 times as wide as an 8-point one.
            widths = {f.points: width_pct(r.find("cryo-bar")) for r, f in zip(rows, report.findings)}
            base_points, base_width = next(iter(widths.items()))
            for points, width in widths.items():
                assert width * base_points == pytest.approx(base_width * points, rel=0.01)
        else:
            assert "checks pass" in root.all_text()
        cost = report.cost
        cost_text = root.find("cryo-cost").all_text()
        assert _html.usd(cost["storage_usd_month"]) in cost_text and _html.usd(cost["request_usd_month"]) in cost_text
        assert len(root.find_all("cryo-saving")) == len(cost["savings"])
        monthly = _html.usd(cost["storage_usd_month"] + cost["request_usd_month"])
        assert monthly in root.all_text()
    sizes = {f.severity for f in worst.findings}
    assert sizes, "the worst table has findings of some severity"


# ---- fleet ----------------------------------------------------------------------------------


def test_fleet_rows_worst_first_with_badges_and_figures(lake, fleet):
    grades = cryo.grade_fleet(fleet)
    assert len(grades) == len(fleet) == len(lake.tables)
    assert [r.score for r in grades] == sorted(r.score for r in grades)
    assert grades.worst is grades[0] and grades.worst.table == "lake.clickstream"
    assert repr(grades).startswith(f"FleetGrades({len(grades)} tables: ") and "worst lake.clickstream" in repr(grades)
    fragment = grades._repr_html_()
    # FleetScan shows the same view (graded with the default options).
    assert fleet._repr_html_() == fragment
    root = parse(fragment)
    rows = root.find_all("cryo-fleet-row")
    assert [r.attrs["data-table"] for r in rows] == [r.table for r in grades]
    scans = {t.table: t for t in fleet.tables}
    for row, report in zip(rows, grades):
        assert row.attrs["data-grade"] == report.grade and int(row.attrs["data-score"]) == report.score
        assert row.find("cryo-grade").all_text() == report.grade
        assert width_pct(row.find("cryo-score-bar")) == pytest.approx(report.score, abs=0.05)
        cells = [td.all_text().strip() for td in row.children]
        scan = scans[report.table]
        assert cells[1] == report.table
        assert cells[3:8] == [
            f"{scan.data_files:,}",
            _html.human_bytes(scan.data_bytes),
            str(scan.snapshots),
            f"{scan.delete_files:,}",
            _html.usd(report.cost["storage_usd_month"] + report.cost["request_usd_month"]),
        ]
        for op in report.operations:
            assert op in cells[8]
    # Delete files are counted from the scan (the demo lake has tables full of them).
    assert any(t.delete_files > 0 for t in fleet.tables)
    # A plain list of reports in any order, without scans, still renders worst first.
    shuffled = cryo.FleetGrades(reversed(list(grades)))
    assert [r.table for r in shuffled] == [r.table for r in grades]
    root = parse(shuffled._repr_html_())
    assert [r.attrs["data-table"] for r in root.find_all("cryo-fleet-row")] == [r.table for r in grades]


# ---- plan and run ---------------------------------------------------------------------------


def test_plan_lists_tables_steps_chunks_and_bytes(lake, fleet):
    plan = lake.catalog.plan(fleet)
    d = plan.to_dict()
    root = parse(plan._repr_html_())
    assert root.find("cryo-plan").attrs["data-fingerprint"] == plan.fingerprint
    tables = root.find_all("cryo-plan-table")
    assert [t.attrs["data-table"] for t in tables] == plan.tables
    for el, t in zip(tables, d["tables"]):
        steps = el.find_all("cryo-step")
        assert [s.attrs["data-operation"] for s in steps] == [s["operation"] for s in t["steps"]]
        assert el.find("cryo-grade").all_text() == t["grade"]
        for s_el, s in zip(steps, t["steps"]):
            size = sum(c["input_bytes"] for c in s["chunks"])
            cells = [td.all_text() for td in s_el.children]
            assert _html.human_bytes(size) in cells[3]
            chunk_rows = s_el.find_all("cryo-chunk")
            if not (len(s["chunks"]) == 1 and s["chunks"][0]["whole_table"]):
                assert len(chunk_rows) == min(len(s["chunks"]), _html.MAX_CHUNKS_SHOWN)
            for code in s["because"]:
                assert code in cells[4]
    total = sum(c["input_bytes"] for t in d["tables"] for s in t["steps"] for c in s["chunks"])
    assert f"{plan.step_count} steps" in root.all_text() and _html.human_bytes(total) in root.all_text()


def test_run_outcome_receipts_coloured_by_status(tmp_path):
    lake = cryo.demo_lake(tmp_path / "lake")
    plan = lake.catalog.plan()
    for outcome in (lake.catalog.run(plan), lake.catalog.run(plan, dry_run=False)):
        receipts = pa.table(outcome.receipts()).to_pylist()
        root = parse(outcome._repr_html_())
        run = root.find("cryo-run")
        assert run.attrs["data-dry-run"] == str(outcome.dry_run).lower()
        rows = root.find_all("cryo-receipt")
        assert [(r.attrs["data-status"], r.children[0].all_text()) for r in rows] == [
            (r["status"], r["table"]) for r in receipts
        ]
        for row in rows:
            status = row.attrs["data-status"]
            pill = row.find("cryo-status")
            assert pill.style["background-color"] == _html.STATUS_COLOURS[status][0]
            assert row.children[0].style["border-left"] == f"3px solid {_html.STATUS_COLOURS[status][0]}"
        counts = {p.all_text().rsplit(" ", 1)[0].replace(" ", "_"): int(p.all_text().rsplit(" ", 1)[1]) for p in root.find_all("cryo-status-count")}
        assert counts == outcome.counts
    assert "succeeded" in outcome.counts and "dry_run" not in outcome.counts
