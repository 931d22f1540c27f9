"""Airflow operators for Cryo: grade a fleet, then run the plan a person reviewed.

    grade = CryoGradeFleetOperator(task_id="grade", conn_id="cryo_lake")
    run = CryoRunPlanOperator(
        task_id="run",
        conn_id="cryo_lake",
        plan_from_task_id="grade",
        reviewed_fingerprint="{{ ti.xcom_pull(task_ids='review') }}",
        dry_run=False,
    )

Configuration comes from an Airflow Connection (``conn_id``: its ``extra`` JSON holds the catalog
properties, PyIceberg's names; a ``host`` becomes ``uri``, a ``password`` becomes ``token`` unless
the extra names ``password_property``) or from ``catalog_properties``. Property values whose key
looks secret are registered with Airflow's secrets masker; properties never go to XCom.

Requires ``apache-airflow>=3`` (imported here only: ``import cryo`` does not need Airflow).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from airflow.exceptions import AirflowException
from airflow.sdk import BaseHook, BaseOperator

from . import Catalog, Plan, Policy, grade

__all__ = ["CryoGradeFleetOperator", "CryoRunPlanOperator", "catalog_properties_from_connection"]

_SECRET_WORDS = ("secret", "password", "token", "credential", "access-key", "session", "key-id", "sas", "signer")


def _is_secret(key: str) -> bool:
    key = key.lower()
    return any(word in key for word in _SECRET_WORDS)


def _mask(properties: Mapping[str, Any]) -> None:
    from airflow.sdk.log import mask_secret

    for key, value in properties.items():
        if _is_secret(key) and value not in (None, ""):
            mask_secret(str(value), key)


def catalog_properties_from_connection(conn_id: str) -> dict[str, Any]:
    """Catalog properties from an Airflow Connection: ``extra`` (JSON object) is the properties;
    ``host`` (if set) becomes ``uri`` and ``password`` becomes ``token`` (or the property named by
    the extra's ``password_property``), unless the extra already sets them."""
    conn = BaseHook.get_connection(conn_id)
    properties: dict[str, Any] = dict(conn.extra_dejson or {})
    password_property = properties.pop("password_property", "token")
    if conn.host and "uri" not in properties:
        properties["uri"] = conn.host
    if conn.password and password_property not in properties:
        properties[password_property] = conn.password
    _mask(properties)
    return properties


def _flag(value: Any) -> bool:
    """A templated boolean: a bool, or its rendering as a string."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "off", "")
    return bool(value)


class _CryoCatalogMixin:
    conn_id: Optional[str]
    catalog_name: str
    catalog_properties: Optional[Mapping[str, Any]]

    def _catalog(self) -> Catalog:
        if self.conn_id:
            properties = catalog_properties_from_connection(self.conn_id)
            properties.update(self.catalog_properties or {})
        elif self.catalog_properties:
            properties = dict(self.catalog_properties)
        else:
            raise AirflowException("give conn_id or catalog_properties")
        _mask(properties)
        return Catalog(self.catalog_name, **properties)


class CryoGradeFleetOperator(_CryoCatalogMixin, BaseOperator):
    """Scan a catalog (metadata only), grade every table and plan their maintenance.

    XCom: ``return_value`` (and key ``summary``) a summary (tables, grade per table, step count,
    scan errors), key ``plan`` the plan as JSON, key ``fingerprint`` its fingerprint.
    ``plan_path`` (optional) also writes the plan JSON there, for a reviewer.
    ``policy_path`` (optional): plan under that policy file or directory (each table with its
    preset; the summary then carries ``policy_fingerprint`` and the tables per preset), and with
    ``only_due`` only what is due (cadences and failures counted in ``receipt_log``).
    """

    template_fields: Sequence[str] = ("catalog_name", "conn_id", "plan_path", "namespaces", "policy_path", "receipt_log")

    def __init__(
        self,
        *,
        catalog_name: str = "cryo",
        conn_id: Optional[str] = None,
        catalog_properties: Optional[Mapping[str, Any]] = None,
        namespaces: Optional[list[str]] = None,
        plan_options: Optional[Mapping[str, Any]] = None,
        grade_options: Optional[Mapping[str, Any]] = None,
        plan_path: Optional[str] = None,
        policy_path: Optional[str] = None,
        only_due: bool = False,
        receipt_log: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy_path = policy_path
        self.only_due = only_due
        self.receipt_log = receipt_log
        self.catalog_name = catalog_name
        self.conn_id = conn_id
        self.catalog_properties = catalog_properties
        self.namespaces = namespaces
        self.plan_options = dict(plan_options or {})
        self.grade_options = dict(grade_options or {})
        self.plan_path = plan_path

    def execute(self, context: Any) -> dict[str, Any]:
        catalog = self._catalog()
        fleet = catalog.scan_fleet(namespaces=self.namespaces or None)
        policy = Policy.load(self.policy_path) if self.policy_path else None
        if policy is not None:
            if self.plan_options or self.grade_options:
                raise ValueError("policy_path: the policy gives the plan and grade options; leave them out")
            reports = [grade(t, cost=policy.to_dict().get("prices") or None) for t in fleet.tables]
            plan = catalog.plan(fleet, policy=policy, receipt_log=self.receipt_log, only_due=self.only_due)
        else:
            reports = [grade(t, **self.grade_options) for t in fleet.tables]
            plan = catalog.plan(fleet, grade_options=self.grade_options, **self.plan_options)
        summary: dict[str, Any] = {
            "catalog": catalog.name,
            "tables": len(reports),
            "grades": {r.table: {"grade": r.grade, "score": r.score} for r in reports},
            "grade_counts": {g: sum(r.grade == g for r in reports) for g in "ABCDF"},
            "scan_errors": len(fleet.errors),
            "plan_tables": plan.tables,
            "plan_steps": plan.step_count,
            "fingerprint": plan.fingerprint,
        }
        if policy is not None:
            summary["policy_fingerprint"] = policy.fingerprint
            summary["presets"] = policy.resolve(fleet.tables)["presets"]
        if self.plan_path:
            os.makedirs(os.path.dirname(os.path.abspath(self.plan_path)), exist_ok=True)
            # Whole or not at all: a reviewer watching the directory never reads half a plan.
            tmp = f"{self.plan_path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(plan.to_json())
            os.replace(tmp, self.plan_path)
            summary["plan_path"] = self.plan_path
        self.log.info(
            "graded %d tables of %s: %s; plan %s has %d steps on %d tables",
            len(reports), catalog.name, summary["grade_counts"], plan.fingerprint, plan.step_count, len(plan.tables),
        )
        ti = context["ti"]
        ti.xcom_push(key="summary", value=summary)
        ti.xcom_push(key="plan", value=plan.to_json())
        ti.xcom_push(key="fingerprint", value=plan.fingerprint)
        return summary


class CryoRunPlanOperator(_CryoCatalogMixin, BaseOperator):
    """Run a reviewed plan: refuse unless its fingerprint equals ``reviewed_fingerprint``.

    The plan comes from ``plan`` (JSON, templated), ``plan_path`` or the XCom key ``plan`` of
    ``plan_from_task_id``. ``dry_run`` is True unless set False. ``lock_dir`` and ``receipt_log``
    are passed to :meth:`cryo.Catalog.run`. The task fails when a table fails only if
    ``fail_on_failed_tables`` (the default). XCom ``return_value``: counts, failed tables,
    receipts, dry run, fingerprint.
    """

    template_fields: Sequence[str] = (
        "catalog_name", "conn_id", "plan", "plan_path", "plan_from_task_id", "reviewed_fingerprint",
        "lock_dir", "receipt_log", "actor", "dry_run",
    )

    def __init__(
        self,
        *,
        reviewed_fingerprint: str,
        catalog_name: str = "cryo",
        conn_id: Optional[str] = None,
        catalog_properties: Optional[Mapping[str, Any]] = None,
        plan: Optional[str] = None,
        plan_path: Optional[str] = None,
        plan_from_task_id: Optional[str] = None,
        dry_run: bool = True,
        lock_dir: Optional[str] = None,
        receipt_log: Optional[str] = None,
        actor: Optional[str] = None,
        fail_on_failed_tables: bool = True,
        run_options: Optional[Mapping[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.reviewed_fingerprint = reviewed_fingerprint
        self.catalog_name = catalog_name
        self.conn_id = conn_id
        self.catalog_properties = catalog_properties
        self.plan = plan
        self.plan_path = plan_path
        self.plan_from_task_id = plan_from_task_id
        self.dry_run = dry_run
        self.lock_dir = lock_dir
        self.receipt_log = receipt_log
        self.actor = actor
        self.fail_on_failed_tables = fail_on_failed_tables
        self.run_options = dict(run_options or {})

    def _load_plan(self, context: Any) -> Plan:
        if self.plan:
            text = self.plan
        elif self.plan_path:
            with open(self.plan_path, encoding="utf-8") as f:
                text = f.read()
        elif self.plan_from_task_id:
            text = context["ti"].xcom_pull(task_ids=self.plan_from_task_id, key="plan")
            if not text:
                raise AirflowException(f"task {self.plan_from_task_id!r} pushed no plan to XCom")
        else:
            raise AirflowException("give plan, plan_path or plan_from_task_id")
        return Plan.from_json(text)

    def execute(self, context: Any) -> dict[str, Any]:
        plan = self._load_plan(context)
        reviewed = str(self.reviewed_fingerprint or "").strip()
        if not reviewed or reviewed == "None":
            raise AirflowException("refusing to run: no reviewed_fingerprint was given")
        plan.verify(reviewed)  # cryo.ValidationError unless intact and the reviewed plan
        catalog = self._catalog()
        outcome = catalog.run(
            plan,
            dry_run=_flag(self.dry_run),
            lock_dir=self.lock_dir or None,
            receipt_log=self.receipt_log or None,
            actor=self.actor or None,
            **self.run_options,
        )
        receipts = outcome.receipts()
        result = {
            "fingerprint": outcome.plan_fingerprint,
            "dry_run": outcome.dry_run,
            "duration_ms": outcome.duration_ms,
            "counts": dict(outcome.counts),
            "failed_tables": list(outcome.failed_tables),
            "receipts": receipts.num_rows,
            "receipt_log": self.receipt_log or None,
        }
        self.log.info("ran plan %s: %s", outcome.plan_fingerprint, json.dumps(result["counts"], sort_keys=True))
        if outcome.failed_tables and self.fail_on_failed_tables:
            raise AirflowException(f"maintenance failed on {len(outcome.failed_tables)} tables: {outcome.failed_tables}")
        return result
