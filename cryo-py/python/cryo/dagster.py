"""Dagster integration for Cryo: a resource and an asset factory.

    defs = dg.Definitions(
        assets=cryo_maintenance_assets(dry_run=False, receipt_log="/var/cryo/receipts.jsonl"),
        resources={"cryo": CryoResource(catalog_name="prod", properties={"type": "rest", ...})},
    )

``cryo_grade`` scans and grades the catalog and plans its maintenance (its value is the plan JSON;
metadata: grade per table, counts, fingerprint); ``cryo_run`` runs that plan after checking it is
intact and carries the graded fingerprint (metadata: receipt counts, failed tables). Requires
``dagster`` (imported here only: ``import cryo`` does not need Dagster).
"""

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import dagster as dg

from . import Catalog, Plan, Policy, grade

__all__ = ["CryoResource", "cryo_maintenance_assets"]


class CryoResource(dg.ConfigurableResource):
    """A catalog: its name and PyIceberg-style properties (use ``dg.EnvVar`` for secrets)."""

    catalog_name: str
    properties: dict[str, str]

    def catalog(self) -> Catalog:
        return Catalog(self.catalog_name, **self.properties)


def cryo_maintenance_assets(
    *,
    name: str = "cryo",
    resource_key: str = "cryo",
    key_prefix: Optional[Sequence[str]] = None,
    group_name: Optional[str] = "cryo",
    namespaces: Optional[list[str]] = None,
    plan_options: Optional[Mapping[str, Any]] = None,
    grade_options: Optional[Mapping[str, Any]] = None,
    dry_run: bool = True,
    lock_dir: Optional[str] = None,
    receipt_log: Optional[str] = None,
    fail_on_failed_tables: bool = True,
    policy_path: Optional[str] = None,
    only_due: bool = False,
) -> list[dg.AssetsDefinition]:
    """Two assets, ``<name>_grade`` and ``<name>_run`` (which depends on the grade's plan).

    ``dry_run`` is True unless set False; ``lock_dir`` and ``receipt_log`` go to
    :meth:`cryo.Catalog.run`. The run asset fails when a table fails if ``fail_on_failed_tables``.
    ``policy_path``: plan under that policy (file or directory; its fingerprint and the tables
    per preset go in the grade's metadata), with ``only_due`` only what is due (cadences and
    failures counted in ``receipt_log``); plan and grade options then come from the policy.
    """
    if policy_path and (plan_options or grade_options):
        raise ValueError("policy_path: the policy gives the plan and grade options; leave them out")
    plan_opts = dict(plan_options or {})
    grade_opts = dict(grade_options or {})
    prefix = list(key_prefix or [])
    grade_key = dg.AssetKey([*prefix, f"{name}_grade"])

    @dg.asset(
        key=grade_key,
        group_name=group_name,
        required_resource_keys={resource_key},
        description="Scan and grade the catalog (metadata only) and plan its maintenance; value: the plan JSON.",
    )
    def grade_asset(context: dg.AssetExecutionContext) -> dg.Output[str]:
        catalog = getattr(context.resources, resource_key).catalog()
        fleet = catalog.scan_fleet(namespaces=namespaces or None)
        reports = [grade(t, **grade_opts) for t in fleet.tables]
        policy_md: dict[str, Any] = {}
        if policy_path:
            policy = Policy.load(policy_path)
            plan = catalog.plan(fleet, policy=policy, receipt_log=receipt_log, only_due=only_due)
            policy_md = {
                "policy_fingerprint": policy.fingerprint,
                "presets": dg.MetadataValue.json(policy.resolve(fleet.tables)["presets"]),
            }
        else:
            plan = catalog.plan(fleet, grade_options=grade_opts, **plan_opts)
        rows = "\n".join(f"| {r.table} | {r.grade} | {r.score} |" for r in sorted(reports, key=lambda r: r.score))
        return dg.Output(
            plan.to_json(),
            metadata={
                "tables": len(reports),
                "grades": dg.MetadataValue.json({r.table: {"grade": r.grade, "score": r.score} for r in reports}),
                "grade_counts": dg.MetadataValue.json({g: sum(r.grade == g for r in reports) for g in "ABCDF"}),
                "scan_errors": len(fleet.errors),
                "plan_steps": plan.step_count,
                "plan_tables": dg.MetadataValue.json(plan.tables),
                "fingerprint": plan.fingerprint,
                "report": dg.MetadataValue.md("| table | grade | score |\n|---|---|---|\n" + rows),
                **policy_md,
            },
        )

    @dg.asset(
        key=dg.AssetKey([*prefix, f"{name}_run"]),
        group_name=group_name,
        required_resource_keys={resource_key},
        ins={"plan_json": dg.AssetIn(key=grade_key)},
        description="Run the graded plan (a dry run unless configured otherwise); value: the run's summary.",
    )
    def run_asset(context: dg.AssetExecutionContext, plan_json: str) -> dg.Output[dict[str, Any]]:
        plan = Plan.from_json(plan_json)
        graded = context.instance.get_latest_materialization_event(grade_key)
        fingerprint = None
        if graded is not None and graded.asset_materialization is not None:
            value = graded.asset_materialization.metadata.get("fingerprint")
            fingerprint = None if value is None else value.value
        plan.verify(fingerprint)  # intact, and the plan the grade asset recorded
        catalog = getattr(context.resources, resource_key).catalog()
        outcome = catalog.run(plan, dry_run=dry_run, lock_dir=lock_dir, receipt_log=receipt_log, actor=f"dagster:{context.run.run_id}")
        summary = {
            "fingerprint": outcome.plan_fingerprint,
            "dry_run": outcome.dry_run,
            "counts": dict(outcome.counts),
            "failed_tables": list(outcome.failed_tables),
            "receipts": outcome.receipts().num_rows,
        }
        if outcome.failed_tables and fail_on_failed_tables:
            raise dg.Failure(description=f"maintenance failed on {outcome.failed_tables}", metadata={"counts": dg.MetadataValue.json(summary["counts"])})
        return dg.Output(
            summary,
            metadata={
                "fingerprint": outcome.plan_fingerprint,
                "dry_run": outcome.dry_run,
                "counts": dg.MetadataValue.json(summary["counts"]),
                "failed_tables": dg.MetadataValue.json(summary["failed_tables"]),
                "receipts": summary["receipts"],
                "duration_ms": outcome.duration_ms,
            },
        )

    return [grade_asset, run_asset]
