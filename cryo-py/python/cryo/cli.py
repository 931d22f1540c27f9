"""The ``cryo`` command line (``python -m cryo`` or the ``cryo`` script).

::

    cryo demo ./demo-lake                                  # build the demo lake
    cryo scan  --demo ./demo-lake                          # what the metadata says
    cryo grade --catalog catalog.json                      # A-F per table, with the findings
    cryo plan  --catalog catalog.json -o plan.json         # the maintenance plan (a reviewable file)
    cryo render --catalog catalog.json --plan plan.json --dialect trino
    cryo run   --catalog catalog.json --plan plan.json --reviewed FINGERPRINT --execute
    cryo policy check policy.yaml                          # validate a policy file (or directory)
    cryo policy explain policy.yaml --catalog catalog.json # per table: preset, why, what runs next
    cryo policy due policy.yaml --catalog catalog.json --receipts r.jsonl   # what is due now
    cryo plan  --catalog catalog.json --policy policy.yaml # the fleet plan under the policy
    cryo advise --catalog catalog.json -o advice.json      # recommended table settings, to approve
    cryo apply-advice --catalog catalog.json --advice advice.json --approved FINGERPRINT

The catalog file is JSON, ``{"name": "prod", "properties": {"type": "rest", "uri": ...}}``:
PyIceberg's catalog properties (the same file the Rust examples read). ``--catalog-name NAME``
takes catalog NAME from PyIceberg's own configuration (``.pyiceberg.yaml``,
``PYICEBERG_CATALOG__NAME__*`` variables), as ``pyiceberg.catalog.load_catalog`` does. ``--demo DIR`` uses the
demo lake there instead (building it first if it is not there).

Text for people by default, ``--json`` for machines. ``run`` changes nothing unless given
``--execute``. Exit status: 0 done, 1 a run recorded failures (or Cryo failed while working),
2 bad usage, configuration or input (including a plan that is not the one reviewed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional

from . import _cryo, demo_lake, grade, load_catalog, report
from ._catalog import Catalog
from ._cryo import Advice, FleetScan, HealthReport, Plan, Policy, TableScan
from .errors import ConfigError, CryoError, NotFoundError, PolicyError, RefusedError, ValidationError

#: Exit statuses.
OK, FAILED, USAGE = 0, 1, 2

# Errors that mean "the input is wrong" (exit 2) rather than "the work failed" (exit 1).
_USAGE_ERRORS = (ConfigError, ValidationError, RefusedError, NotFoundError)


class UsageError(Exception):
    """Bad arguments or an unreadable input file (exit status 2)."""


# ---- inputs --------------------------------------------------------------------------------


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e}") from None


def load_catalog_file(path: str) -> Catalog:
    """A catalog from a JSON file ``{"name": ..., "properties": {...}}``."""
    config = _read_json(path, "catalog file")
    if not isinstance(config, dict) or not isinstance(config.get("name"), str):
        raise UsageError(f'catalog file {path} must be {{"name": "...", "properties": {{...}}}}')
    properties = config.get("properties", {})
    if not isinstance(properties, dict):
        raise UsageError(f"catalog file {path}: `properties` must be an object")
    unknown = sorted(set(config) - {"name", "properties"})
    if unknown:
        raise UsageError(f"catalog file {path}: unknown keys {', '.join(unknown)} (name, properties)")
    return Catalog(config["name"], **properties)


def _catalog(args: argparse.Namespace) -> Catalog:
    if args.demo is not None:
        return demo_lake(args.demo).catalog
    if args.catalog is not None:
        return load_catalog_file(args.catalog)
    if args.catalog_name is not None:
        return load_catalog(args.catalog_name)
    raise UsageError("say which catalog: --catalog FILE (JSON), --catalog-name NAME (PyIceberg's configuration) or --demo DIR")


def _scans(args: argparse.Namespace, catalog: Catalog) -> tuple[list[TableScan], Optional[FleetScan]]:
    """The tables chosen by --table / --namespace (all by default), scanned."""
    if args.table:
        return [catalog.scan(t, cache_dir=args.scan_cache) for t in args.table], None
    namespaces = [ns.split(".") for ns in args.namespace] if args.namespace else None
    scan = {"cache_dir": args.scan_cache} if args.scan_cache else None
    fleet = catalog.scan_fleet(namespaces=namespaces, scan=scan, progress=args.progress)
    return fleet.tables, fleet


def _read_plan(path: str) -> Plan:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read plan {path}: {e.strerror or e}") from None
    return Plan.from_json(text)


def _plan(args: argparse.Namespace, catalog: Catalog) -> Plan:
    """The plan of --plan FILE, or one made now from the chosen tables."""
    if getattr(args, "plan", None):
        plan = _read_plan(args.plan)
        if plan.catalog != catalog.name:
            raise UsageError(f"plan {args.plan} was made for catalog `{plan.catalog}`, not `{catalog.name}`")
        return plan
    scans, _ = _scans(args, catalog)
    options: dict[str, Any] = {}
    if getattr(args, "operation", None):
        options["operations"] = args.operation
    policy_path = getattr(args, "policy", None)
    if policy_path:
        if options:
            raise UsageError("--operation and --policy: the policy's presets say which operations run")
        return catalog.plan(
            scans,
            policy=Policy.load(policy_path),
            receipt_log=getattr(args, "receipts", None),
            only_due=bool(getattr(args, "due", False)),
        )
    if getattr(args, "due", False):
        raise UsageError("--due plans what a policy says is due: give --policy FILE")
    return catalog.plan(scans, **options)


# ---- output --------------------------------------------------------------------------------


def _emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


# ---- commands ------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    lake = demo_lake(args.dir)
    if args.json:
        _emit_json({"root": lake.root, "built": lake.built, "pristine": lake.pristine, **lake.to_dict()})
        return OK
    verb = "built" if lake.built else "reopened"
    _emit(f"{verb} the demo lake at {lake.root}: {len(lake.tables)} tables")
    for t in lake.tables:
        _emit(f"  {t}")
    _emit(f"\nnext: python -m cryo grade --demo {args.dir}")
    return OK


def cmd_scan(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    scans, fleet = _scans(args, catalog)
    if args.json:
        _emit_json(fleet.to_dict() if fleet is not None else {"tables": [s.to_dict() for s in scans]})
        return OK
    reports = [grade(s) for s in scans]
    _emit(report.fleet_table(scans, reports))
    if fleet is not None:
        _emit(report.scan_errors(fleet))
    return OK


def cmd_grade(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    scans, fleet = _scans(args, catalog)
    reports: list[HealthReport] = [grade(s) for s in scans]
    if args.json:
        _emit_json(
            {
                "catalog": catalog.name,
                "tables": [r.to_dict() for r in reports],
                "errors": fleet.errors if fleet is not None else [],
            }
        )
        return OK
    _emit(report.fleet_table(scans, reports))
    if fleet is not None:
        _emit(report.scan_errors(fleet))
    for r in reports:
        _emit("")
        _emit(report.health_report(r))
    return OK


def cmd_plan(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    plan = _plan(args, catalog)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(plan.to_json())
    if args.json:
        _emit(plan.to_json())
        return OK
    _emit(report.plan_text(plan))
    _emit(f"fingerprint {plan.fingerprint}")
    if args.output:
        _emit(f"written to {args.output}; run it with: run --plan {args.output} --reviewed {plan.fingerprint}")
    return OK


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def cmd_render(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    plan = _plan(args, catalog)
    options: dict[str, Any] = {}
    if args.sql_catalog:
        options["catalog"] = args.sql_catalog
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option takes KEY=VALUE, not {item!r}")
        options[key] = _option_value(value)
    sql = plan.render(args.dialect, **options)
    if args.json:
        _emit_json({"dialect": args.dialect, "plan_fingerprint": plan.fingerprint, "sql": sql})
    else:
        _emit(sql)
    return OK


def cmd_run(args: argparse.Namespace) -> int:
    if args.reviewed and not args.plan:
        raise UsageError("--reviewed checks a stored plan: give it with --plan FILE")
    catalog = _catalog(args)
    plan = _plan(args, catalog)
    # Refuse before touching anything: the plan must be intact and the one reviewed.
    plan.verify(args.reviewed)
    options: dict[str, Any] = {}
    if args.actor:
        options["actor"] = args.actor
    outcome = catalog.run(
        plan,
        dry_run=not args.execute,
        lock_dir=args.lock_dir,
        receipt_log=args.receipts,
        progress=args.progress,
        **options,
    )
    failed = outcome.counts.get("failed", 0) > 0 or bool(outcome.failed_tables)
    if args.json:
        _emit_json(outcome.to_dict())
    else:
        if outcome.dry_run:
            _emit("dry run: nothing was changed (add --execute to carry the plan out)")
        _emit(report.receipts_text(outcome))
        counts = ", ".join(f"{n} {status}" for status, n in outcome.counts.items())
        _emit(f"plan {outcome.plan_fingerprint[:12]}: {counts or 'nothing to do'} in {outcome.duration_ms} ms")
        if args.receipts:
            _emit(f"receipts appended to {args.receipts}")
        if failed:
            _emit(f"failed tables: {', '.join(outcome.failed_tables)}")
    return FAILED if failed else OK


def _when(ms: int) -> str:
    import datetime as dt

    if ms >= 2**62:
        return "not while paused"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _preset_line(name: str, preset: dict[str, Any]) -> str:
    ops = preset["options"].get("operations") or ["all operations"]
    parts = [f"on {preset['destination']}"]
    if preset.get("every_ms"):
        parts.append(f"every {_duration(preset['every_ms'])}")
    window = preset.get("window")
    if window:
        parts.append(f"window {window['start_hour']:02d}:00-{window['end_hour']:02d}:00 UTC")
    if preset.get("quiet_period_ms"):
        parts.append(f"quiet period {_duration(preset['quiet_period_ms'])}")
    return f"  {name}: {', '.join(ops)}; {', '.join(parts)}"


def _duration(ms: int) -> str:
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def cmd_policy_check(args: argparse.Namespace) -> int:
    policy = Policy.load(args.policy)
    if args.json:
        _emit_json(
            {
                "fingerprint": policy.fingerprint,
                "sources": policy.sources,
                "policy": policy.to_dict(),
                "presets": policy.presets(),
            }
        )
        return OK
    file = policy.to_dict()
    _emit(
        f"policy {args.policy}: valid ({len(policy.sources)} file{'s' if len(policy.sources) != 1 else ''}, "
        f"{len(file.get('rules', []))} rules, {len(file.get('tables', {}))} overrides, "
        f"{len(file.get('pauses', []))} pauses)"
    )
    _emit("presets:")
    for name, preset in policy.presets().items():
        _emit(_preset_line(name, preset))
    for i, rule in enumerate(file.get("rules", [])):
        _emit(f"rule {i} `{rule['name']}` -> {rule['preset']}: {json.dumps(rule.get('match', {}), sort_keys=True)}")
    _emit(f"fingerprint {policy.fingerprint}")
    return OK


def cmd_policy_explain(args: argparse.Namespace) -> int:
    policy = Policy.load(args.policy)
    catalog = _catalog(args)
    scans, _ = _scans(args, catalog)
    explained = catalog.explain(policy, scans, receipt_log=args.receipts)
    if args.json:
        _emit_json({"policy_fingerprint": policy.fingerprint, "tables": explained})
        return OK
    resolved = policy.resolve(scans)
    now_ms = max((s.scanned_at_ms for s in scans), default=0)
    counts = ", ".join(f"{n} {p}" for p, n in resolved["presets"].items())
    _emit(f"policy {policy.fingerprint[:12]}: {len(explained)} tables ({counts})")
    _emit(f"  {resolved['defaulted']} got the default preset (no rule matched); {resolved['paused']} paused")
    for e in explained:
        r = e["resolved"]
        assignment = r["assignment"]
        why = {
            "override": "per-table override",
            "default": "default preset: no rule matched",
        }.get(assignment["kind"], f"rule `{assignment.get('name')}` (rules[{assignment.get('index')}])")
        extra = ", with its own options" if r.get("options_override") else ""
        name = _cryo.table_name(r["table"]["namespace"], r["table"]["name"])
        _emit(f"\n{name} (grade {e['grade']}): preset {r['preset']} on {r['destination']}, by {why}{extra}")
        if r.get("paused"):
            _emit(f"  {r['paused']}")
        for n in e["next"]:
            if n["planned"]:
                when = "now"
            elif n["at_ms"] <= now_ms:
                when = "not now"
            else:
                when = _when(n["at_ms"])
            _emit(f"  {n['operation']:<26} {when:<22} {n['reason']}")
    return OK


def cmd_policy_due(args: argparse.Namespace) -> int:
    policy = Policy.load(args.policy)
    catalog = _catalog(args)
    scans, _ = _scans(args, catalog)
    due = catalog.due(policy, scans, receipt_log=args.receipts)
    if args.json:
        _emit_json(due)
        return OK
    name = lambda t: _cryo.table_name(t["namespace"], t["name"])  # noqa: E731
    _emit(f"policy {policy.fingerprint[:12]} at {_when(due['now_ms'])}: {len(due['tables'])} tables due")
    for t in due["tables"]:
        _emit(f"  {name(t['table'])}: {', '.join(t['operations'])} (preset {t['preset']} on {t['destination']})")
    for b in due["backing_off"]:
        _emit(
            f"  backing off: {name(b['table'])} {b['operation']} after {b['failures']} failures in a row, "
            f"until {_when(b['retry_at_ms'])}; last error: {b.get('last_error') or '-'}"
        )
    for table, reason in due["paused"]:
        _emit(f"  paused: {name(table)}: {reason}")
    if due.get("next_due_ms") is not None:
        _emit(f"next due: {_when(due['next_due_ms'])}")
    return OK


def cmd_advise(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    scans, _ = _scans(args, catalog)
    advice = catalog.advise(scans)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(advice.to_json())
    if args.json:
        _emit(advice.to_json())
        return OK
    d = advice.to_dict()
    _emit(f"advice {advice.fingerprint[:12]}: {advice.change_count} property changes on {len(d['tables'])} tables")
    for t in d["tables"]:
        _emit(f"  {_cryo.table_name(t['table']['namespace'], t['table']['name'])}")
        for c in t["changes"]:
            then = f", then {c['then']}" if c.get("then") else ""
            was = c["from"] if c["from"] is not None else "unset"
            _emit(f"    {c['key']}: {was} -> {c['to']}  [{c['finding']}{then}]")
    _emit(f"fingerprint {advice.fingerprint}")
    if args.output:
        _emit(f"written to {args.output}; after review: apply-advice --advice {args.output} --approved {advice.fingerprint}")
    return OK


def cmd_apply_advice(args: argparse.Namespace) -> int:
    try:
        with open(args.advice, encoding="utf-8") as f:
            advice = Advice.from_json(f.read())
    except OSError as e:
        raise UsageError(f"cannot read advice {args.advice}: {e.strerror or e}") from None
    catalog = _catalog(args)
    outcome = catalog.apply_advice(advice, args.approved, receipt_log=args.receipts, actor=args.actor)
    failed = any(t["outcome"]["status"] == "failed" for t in outcome["tables"])
    if args.json:
        _emit_json(outcome)
        return FAILED if failed else OK
    for t in outcome["tables"]:
        name = _cryo.table_name(t["table"]["namespace"], t["table"]["name"])
        o = t["outcome"]
        detail = o.get("reason") or ", ".join(f"{c['key']}={c['to']}" for c in t["changes"])
        _emit(f"  {name}: {o['status']}: {detail}")
    if args.receipts:
        _emit(f"receipts appended to {args.receipts}")
    return FAILED if failed else OK


# ---- parser --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    common.add_argument(
        "-v", "--verbose", action="count", default=0, help="log Cryo's events to stderr (-v info, -vv debug)"
    )
    common.add_argument("--progress", action="store_true", help="draw a progress bar on stderr (needs tqdm)")

    source = argparse.ArgumentParser(add_help=False)
    where = source.add_mutually_exclusive_group()
    where.add_argument("--catalog", metavar="FILE", help='catalog JSON: {"name": ..., "properties": {...}}')
    where.add_argument(
        "--catalog-name",
        metavar="NAME",
        help="catalog NAME of PyIceberg's configuration (.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__* variables)",
    )
    where.add_argument("--demo", metavar="DIR", help="use the demo lake in DIR (built if missing)")

    select = argparse.ArgumentParser(add_help=False)
    select.add_argument("--table", action="append", metavar="NS.TABLE", help="only this table (repeatable)")
    select.add_argument("--namespace", action="append", metavar="NS", help="only this namespace (repeatable)")
    select.add_argument(
        "--scan-cache",
        metavar="DIR",
        help="keep scan memos here: the next scan reads only the metadata files written since",
    )

    planning = argparse.ArgumentParser(add_help=False)
    planning.add_argument(
        "--operation", action="append", metavar="OP", help="plan only this operation (repeatable, e.g. compact)"
    )

    stored = argparse.ArgumentParser(add_help=False)
    stored.add_argument("--plan", metavar="FILE", help="a plan written by `plan -o` (default: plan now)")

    parser = argparse.ArgumentParser(
        prog="cryo",
        description="Apache Iceberg table maintenance: scan, grade, plan, render and run.",
        epilog="Exit status: 0 done, 1 failures in a run, 2 bad usage, configuration or input.",
    )
    parser.add_argument("--version", action="version", version=f"cryo {_cryo.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("demo", parents=[common], help="build (or reopen) the demo lake")
    p.add_argument("dir", help="directory for the lake")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("scan", parents=[common, source, select], help="scan table metadata")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("grade", parents=[common, source, select], help="grade tables A-F with the findings")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("plan", parents=[common, source, select, planning], help="plan the maintenance")
    p.add_argument("-o", "--output", metavar="FILE", help="write the plan (JSON) here")
    p.add_argument(
        "--policy", metavar="FILE", help="plan under this policy (a YAML file or a directory of them)"
    )
    p.add_argument(
        "--receipts", metavar="WHERE", help="receipts of earlier runs (for the policy's cadences and cooldowns)"
    )
    p.add_argument("--due", action="store_true", help="with --policy: plan only what is due (cadence, window, backoff)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "advise", parents=[common, source, select], help="the table settings the grades recommend, to approve"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the advice (JSON) here")
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser(
        "apply-advice", parents=[common, source], help="commit approved advice (refused unless --approved matches)"
    )
    p.add_argument("--advice", metavar="FILE", required=True, help="advice written by `advise -o`")
    p.add_argument("--approved", metavar="FINGERPRINT", required=True, help="the fingerprint a person approved")
    p.add_argument("--receipts", metavar="WHERE", help="append a receipt per table here")
    p.add_argument("--actor", help="who applies it, for the receipts")
    p.set_defaults(func=cmd_apply_advice)

    p = sub.add_parser("policy", help="check a policy file, or explain what it does to each table")
    policy_sub = p.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    q = policy_sub.add_parser("check", parents=[common], help="validate a policy (every problem, with file and line)")
    q.add_argument("policy", metavar="FILE", help="a policy YAML file or a directory of them")
    q.set_defaults(func=cmd_policy_check)
    q = policy_sub.add_parser(
        "explain", parents=[common, source, select], help="per table: the preset, why, and what runs next and when"
    )
    q.add_argument("policy", metavar="FILE", help="a policy YAML file or a directory of them")
    q.add_argument("--receipts", metavar="WHERE", help="receipts of earlier runs (when each operation last ran)")
    q.set_defaults(func=cmd_policy_explain)
    q = policy_sub.add_parser(
        "due", parents=[common, source, select], help="the tables and operations due now, and those backing off"
    )
    q.add_argument("policy", metavar="FILE", help="a policy YAML file or a directory of them")
    q.add_argument("--receipts", metavar="WHERE", help="receipts of earlier runs (last runs and failures)")
    q.set_defaults(func=cmd_policy_due)

    p = sub.add_parser("render", parents=[common, source, select, planning, stored], help="the plan as SQL")
    p.add_argument("--dialect", required=True, choices=["trino", "spark"])
    p.add_argument("--sql-catalog", metavar="NAME", help="catalog name the SQL uses")
    p.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="dialect option, e.g. version=478 (repeatable)"
    )
    p.set_defaults(func=cmd_render)

    p = sub.add_parser(
        "run", parents=[common, source, select, planning, stored], help="run a plan (a dry run unless --execute)"
    )
    p.add_argument("--reviewed", metavar="FINGERPRINT", help="refuse unless the plan has this fingerprint")
    p.add_argument("--execute", action="store_true", help="carry the plan out (default: dry run)")
    p.add_argument(
        "--lock-dir",
        metavar="WHERE",
        help="take a lock per table: a directory of file locks (one machine), 'catalog' (the SQL catalog's "
        "PostgreSQL database) or an object-store location such as s3://bucket/cryo/locks (many machines)",
    )
    p.add_argument(
        "--receipts",
        metavar="WHERE",
        help="append receipts to a JSON-lines file, or under an object-store location (s3://…, abfss://…, gs://…)",
    )
    p.add_argument("--actor", help="who runs it, for the receipts")
    p.set_defaults(func=cmd_run)
    return parser


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("cryo")
    logger.addHandler(handler)
    logger.setLevel(level)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    if args.progress:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            parser.error("--progress needs tqdm (pip install tqdm)")
    args.progress = True if args.progress else False
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except UsageError as e:
        print(f"cryo {args.command}: error: {e}", file=sys.stderr)
        return USAGE
    except PolicyError as e:
        problems = getattr(e, "problems", None) or []
        print(f"cryo {args.command}: invalid policy ({len(problems)} problem{'s' if len(problems) != 1 else ''}):", file=sys.stderr)
        for p in problems:
            where = f"{p['file']}:{p['line']}:{p['column']}" if p["line"] else p["file"]
            field = f" `{p['field']}`:" if p["field"] else ""
            print(f"  {where}:{field} {p['message']}", file=sys.stderr)
        return USAGE
    except _USAGE_ERRORS as e:
        print(f"cryo {args.command}: error [{e.code}]: {e}", file=sys.stderr)
        return USAGE
    except CryoError as e:
        print(f"cryo {args.command}: error [{e.code}]: {e}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        print(f"cryo {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `cryo grade ... | head`: the reader left; not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
