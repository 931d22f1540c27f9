"""Maintenance as code from Python: ``cryo.Policy``, planning under a policy, ``explain``, and the
``cryo policy check`` / ``cryo policy explain`` / ``cryo plan --policy`` commands — against a
real demo lake and the demo lake's own policy file (``examples/policy.yaml``).

    $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml
    $PEERS_PYTHON -m pytest tests/py/test_policy.py -x -q

What is proved:

- the policy file loads and resolves each demo table to the preset its comments promise, by the
  rule they name; the fingerprint is cryo-core's (the same however the file is spelled or split);
- a plan made under it records the policy's fingerprint and each table's preset, destination and
  assignment; a pause skips its table with the reason; a changed policy changes the plan;
- an invalid policy raises ``PolicyError`` (a ``ConfigError``) listing every problem with its
  file, line, column and field; the CLI prints them one per line and exits 2;
- ``explain`` says per table and operation whether a run now plans it, or when it may run next
  and why (a cadence counted from the receipt log of a real run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "examples" / "policy.yaml"


def cli(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "cryo", *args], capture_output=True, text=True, timeout=600, env={**os.environ, "NO_COLOR": "1"}
    )
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return cryo.demo_lake(tmp_path_factory.mktemp("policy") / "demo-lake")


@pytest.fixture(scope="module")
def scans(lake):
    return lake.catalog.scan_fleet().tables


def _by_table(items, key=lambda t: t["table"]):
    return {f"{'.'.join(key(t)['namespace'])}.{key(t)['name']}": t for t in items}


def test_the_demo_policy_resolves_as_its_comments_say(scans):
    policy = cryo.Policy.load(POLICY)
    assert policy.sources == [str(POLICY)]
    assert len(policy.fingerprint) == 64
    resolved = policy.resolve(scans)
    tables = _by_table(resolved["tables"])
    assert tables["lake.clickstream"]["preset"] == "streaming-hot"
    assert tables["lake.clickstream"]["assignment"] == {"kind": "rule", "index": 0, "name": "streams"}
    assert tables["lake.customers"]["preset"] == "deletes-first"
    assert tables["lake.metrics_v1"]["assignment"] == {"kind": "override"}
    assert tables["lake.healthy"]["assignment"] == {"kind": "default"}
    assert tables["lake.healthy"]["preset"] == "standard"
    assert resolved["defaulted"] == sum(1 for t in resolved["tables"] if t["assignment"]["kind"] == "default")
    presets = policy.presets()
    assert presets["spark-large"]["destination"] == "spark"
    assert presets["spark-large"]["window"] == {"start_hour": 22, "end_hour": 6}
    # The budgets are caps, never raises: the streaming preset's own 2 GiB chunk and the default
    # 8 GiB stay under the 16 GiB cap; the fleet and table caps fill budgets that had none.
    assert presets["streaming-hot"]["options"]["chunk_budget_bytes"] == 2 << 30
    assert presets["standard"]["options"]["chunk_budget_bytes"] == 8 << 30
    assert presets["standard"]["options"]["table_budget_bytes"] == 100 << 30
    assert presets["standard"]["options"]["fleet_budget_bytes"] == 500 << 30


def test_the_fingerprint_is_the_policy_not_its_spelling(tmp_path):
    a = cryo.Policy.from_yaml("presets: {hot: {every: 1h}}\nbudgets: {chunk: 1GiB}\n")
    b = cryo.Policy.from_yaml("budgets:\n  chunk: 1073741824\npresets:\n  hot:\n    every: 60m\n")
    assert a.fingerprint == b.fingerprint
    assert json.loads(a.to_json()) == a.to_dict()
    (tmp_path / "1.yaml").write_text("presets: {hot: {every: 1h}}\n")
    (tmp_path / "2.yml").write_text("budgets: {chunk: 1GiB}\n")
    assert cryo.Policy.load(tmp_path).fingerprint == a.fingerprint
    assert cryo.Policy.from_yaml("presets: {hot: {every: 2h}}\n").fingerprint != a.fingerprint


def test_a_plan_under_the_policy_records_it(lake, scans):
    policy = cryo.Policy.load(POLICY)
    plan = lake.catalog.plan(scans, policy=policy)
    d = plan.to_dict()
    assert d["policy"] == policy.fingerprint
    tables = _by_table(d["tables"])
    clicks = tables["lake.clickstream"]
    assert clicks["policy"] == {
        "preset": "streaming-hot",
        "assignment": "rule `streams` (rules[0])",
        "destination": "native",
    }
    # The preset's operations, nothing else.
    allowed = {"rewrite_position_deletes", "rewrite_data_files", "rewrite_manifests", "expire_snapshots"}
    assert {s["operation"] for s in clicks["steps"]} <= allowed
    # Stored and read back, the plan is the same plan.
    assert cryo.Plan.from_json(plan.to_json()).fingerprint == plan.fingerprint
    # A pause skips its table with the reason; the plan changes with the policy.
    paused = cryo.Policy.from_yaml(
        POLICY.read_text().replace("pauses:\n", "pauses:\n  - {tables: lake.clickstream, reason: backfill in progress}\n"),
        str(POLICY),
    )
    plan2 = lake.catalog.plan(scans, policy=paused)
    skipped = {f"{'.'.join(t['table']['namespace'])}.{t['table']['name']}": t["reason"] for t in plan2.to_dict()["skipped_tables"]}
    assert "backfill in progress" in skipped["lake.clickstream"]
    assert plan2.fingerprint != plan.fingerprint
    with pytest.raises(cryo.ValidationError):
        lake.catalog.plan(scans, policy=policy, operations=["rewrite_data_files"])


def test_every_problem_is_raised_with_its_place(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "presets:\n"
        "  hot:\n"
        "    every: 3600\n"
        "rules:\n"
        "  - {name: r, preset: hot}\n"
    )
    with pytest.raises(cryo.PolicyError) as e:
        cryo.Policy.load(bad)
    assert isinstance(e.value, cryo.ConfigError)
    assert e.value.code == "policy"
    [p] = e.value.problems
    assert (p["file"], p["line"], p["field"]) == (str(bad), 3, "presets.hot.every")
    assert "unit" in p["message"]

    bad.write_text(
        "presets: {hot: {every: 1h}}\n"
        "rules:\n"
        "  - {name: r, preset: warm}\n"
        "  - {name: r, preset: hot, match: {findings: [small_filez]}}\n"
    )
    with pytest.raises(cryo.PolicyError) as e:
        cryo.Policy.load(bad)
    fields = sorted(p["field"] for p in e.value.problems)
    assert fields == ["rules[0].preset", "rules[1].match.findings[0]", "rules[1].name"]
    assert all(p["line"] in (3, 4) and p["column"] > 0 for p in e.value.problems)

    proc = cli("policy", "check", str(bad), check=2)
    assert "3 problems" in proc.stderr
    assert f"{bad}:3:" in proc.stderr and "`rules[0].preset`: no preset named `warm`" in proc.stderr


def test_explain_counts_the_cadence_from_real_receipts(tmp_path):
    # A lake of its own: this test runs the plan.
    lake = cryo.demo_lake(tmp_path / "demo-lake")
    scans = lake.catalog.scan_fleet().tables
    policy = cryo.Policy.load(POLICY)
    explained = _by_table(lake.catalog.explain(policy, scans), key=lambda e: e["resolved"]["table"])
    clicks = explained["lake.clickstream"]
    planned = [n for n in clicks["next"] if n["planned"]]
    assert planned and all(n["reason"].startswith("due now") for n in planned)

    # Run the clickstream's compaction for real, with a receipt log; within the hour the preset's
    # cadence holds it back, and explain says until when.
    receipts = tmp_path / "receipts.jsonl"
    plan = lake.catalog.plan(scans, policy=policy)
    outcome = lake.catalog.run(plan, dry_run=False, receipt_log=receipts)
    assert outcome.counts.get("succeeded", 0) > 0, outcome.to_dict()
    fresh = lake.catalog.scan_fleet().tables
    again = _by_table(lake.catalog.explain(policy, fresh, receipt_log=receipts), key=lambda e: e["resolved"]["table"])
    ran = [r for r in map(json.loads, receipts.read_text().splitlines()) if r["status"] == "succeeded"]
    clicks_ops = {r["operation"] for r in ran if r["table"]["name"] == "clickstream" and r.get("operation")}
    assert clicks_ops
    for n in again["lake.clickstream"]["next"]:
        if n["operation"] in clicks_ops:
            assert not n["planned"], n
            assert "cadence 1h" in n["reason"], n

    # What is due: not what just ran (its cadence), and an operation that failed three times in
    # a row backs off (the failures appended to the same log, as a failing run would).
    due = lake.catalog.due(policy, fresh, receipt_log=receipts)
    due_now = {
        cryo._cryo.table_name(t["table"]["namespace"], t["table"]["name"]): set(t["operations"]) for t in due["tables"]
    }
    assert not (due_now.get("lake.clickstream", set()) & clicks_ops), due
    assert due["next_due_ms"] is not None
    template = next(r for r in ran if r["table"]["name"] == "customers")
    customers_ok = {r["operation"] for r in ran if r["table"]["name"] == "customers"}
    # An operation of its preset (deletes-first) that did not just succeed there.
    failing = next(op for op in ("rewrite_position_deletes", "rewrite_data_files") if op not in customers_ok)
    last = max(r["at_ms"] for r in ran)
    with receipts.open("a") as f:
        for i in range(3):
            failed = {**template, "id": f"failed-{i}", "at_ms": last + 1 + i, "status": "failed",
                      "operation": failing, "reason": f"storage down ({i})"}
            f.write(json.dumps(failed) + "\n")
    due = lake.catalog.due(policy, fresh, receipt_log=receipts)
    [backing] = [b for b in due["backing_off"] if b["operation"] == failing]
    assert backing["failures"] == 3 and backing["last_error"] == "storage down (2)"
    assert backing["retry_at_ms"] == last + 3 + 3_600_000
    out = cli("policy", "due", str(POLICY), "--demo", str(lake.root), "--receipts", str(receipts)).stdout
    assert f"backing off: lake.customers {failing} after 3 failures in a row" in out
    # Planning only what is due leaves out what just ran.
    plan = lake.catalog.plan(fresh, policy=policy, receipt_log=receipts, only_due=True).to_dict()
    for t in plan["tables"]:
        if t["table"]["name"] == "clickstream":
            assert not ({s["operation"] for s in t["steps"]} & clicks_ops), t


def test_the_cli_checks_explains_and_plans_under_a_policy(lake, tmp_path):
    out = cli("policy", "check", str(POLICY)).stdout
    fingerprint = cryo.Policy.load(POLICY).fingerprint
    assert "valid" in out and f"fingerprint {fingerprint}" in out
    assert "streaming-hot: " in out and "every 1h" in out
    checked = json.loads(cli("policy", "check", str(POLICY), "--json").stdout)
    assert checked["fingerprint"] == fingerprint

    root = str(lake.root)
    out = cli("policy", "explain", str(POLICY), "--demo", root).stdout
    assert "lake.clickstream" in out and "preset streaming-hot on native, by rule `streams`" in out
    assert "got the default preset" in out

    plan_file = tmp_path / "plan.json"
    out = cli("plan", "--demo", root, "--policy", str(POLICY), "-o", str(plan_file)).stdout
    assert f"under policy {fingerprint[:12]}" in out
    assert "preset streaming-hot on native" in out
    assert json.loads(plan_file.read_text())["policy"] == fingerprint
    proc = cli("plan", "--demo", root, "--policy", str(POLICY), "--operation", "rewrite_data_files", check=2)
    assert "--policy" in proc.stderr


def test_settings_advice_is_written_only_as_approved(tmp_path):
    lake = cryo.demo_lake(tmp_path / "demo-lake")
    advice = lake.catalog.advise()
    d = advice.to_dict()
    metrics = next(t for t in d["tables"] if t["table"]["name"] == "metrics_v1")
    changes = {c["key"]: (c["from"], c["to"], c["finding"]) for c in metrics["changes"]}
    assert changes["format-version"] == ("1", "2", "format_version")
    assert changes["write.metadata.metrics.default"] == ("none", "truncate(16)", "column_bounds")
    assert cryo.Advice.from_json(advice.to_json()).fingerprint == advice.fingerprint

    with pytest.raises(cryo.ValidationError):
        lake.catalog.apply_advice(advice, "0" * 64)
    receipts = tmp_path / "receipts.jsonl"
    outcome = lake.catalog.apply_advice(advice, advice.fingerprint, receipt_log=receipts, actor="reviewer")
    by = {t["table"]["name"]: t["outcome"]["status"] for t in outcome["tables"]}
    assert by["metrics_v1"] == "committed"
    logged = [json.loads(line) for line in receipts.read_text().splitlines()]
    assert len(logged) == len(d["tables"]) and all(r["actor"] == "reviewer" for r in logged)

    # PyIceberg reads what Cryo committed: format v2, the property set.
    from pyiceberg.catalog.sql import SqlCatalog

    props = lake.to_dict()["catalog"]["properties"]
    table = SqlCatalog("demo", uri=props["uri"], warehouse=props["warehouse"]).load_table("lake.metrics_v1")
    assert table.metadata.format_version == 2
    assert table.properties["write.metadata.metrics.default"] == "truncate(16)"
    # Applied again: already set, nothing written.
    again = lake.catalog.apply_advice(advice, advice.fingerprint)
    assert {t["outcome"]["status"] for t in again["tables"]} == {"already_set"}


def test_the_cli_advises_and_applies_only_the_approved_fingerprint(tmp_path):
    root = tmp_path / "demo-lake"
    cli("demo", str(root))
    advice_file = tmp_path / "advice.json"
    out = cli("advise", "--demo", str(root), "-o", str(advice_file)).stdout
    fingerprint = json.loads(advice_file.read_text())["fingerprint"]
    assert "format-version: 1 -> 2  [format_version]" in out and f"--approved {fingerprint}" in out
    proc = cli("apply-advice", "--demo", str(root), "--advice", str(advice_file), "--approved", "0" * 64, check=2)
    assert "not the approved advice" in proc.stderr
    out = cli("apply-advice", "--demo", str(root), "--advice", str(advice_file), "--approved", fingerprint).stdout
    assert "lake.metrics_v1: committed: " in out
