"""Airflow DAG: grade the demo lake, wait for a person to approve the plan, run it.

    export CRYO_DEMO_LAKE=/tmp/cryo-demo     # built on first use (cryo.demo_lake)
    python examples/airflow_dag.py           # dag.test(); or drop the file in $AIRFLOW_HOME/dags

grade  -> writes the plan to $CRYO_DEMO_LAKE/plans/<run id>.json and pushes it (and its fingerprint)
review -> a sensor: waits until the reviewer, having read the plan, writes the fingerprint they
          approve (the grade task logs it and pushes it to XCom) to <plan>.json.approved
run    -> runs the plan only if it is still the approved one (dry run unless the DAG param
          dry_run is false), locks under the lake, appends receipts to receipts.jsonl
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, Param, PokeReturnValue, task

import cryo
from cryo.airflow import CryoGradeFleetOperator, CryoRunPlanOperator

LAKE = os.environ.get("CRYO_DEMO_LAKE", "/tmp/cryo-demo")
PROPERTIES = cryo.demo_lake(LAKE).to_dict()["catalog"]["properties"]

with DAG(
    dag_id="cryo_maintenance",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    params={
        "dry_run": Param(True, type="boolean", description="False to change the tables"),
    },
    render_template_as_native_obj=True,
    tags=["cryo"],
) as dag:
    grade = CryoGradeFleetOperator(
        task_id="grade",
        catalog_name="demo",
        catalog_properties=PROPERTIES,
        plan_path=f"{LAKE}/plans/{{{{ run_id | replace(':', '_') | replace('+', '_') }}}}.json",
    )

    @task.sensor(task_id="review", poke_interval=1, timeout=3600, mode="poke")
    def review(ti=None) -> PokeReturnValue:
        """Done when the reviewer has written the approved fingerprint next to the plan."""
        path = ti.xcom_pull(task_ids="grade", key="summary")["plan_path"] + ".approved"
        if not os.path.exists(path):
            return PokeReturnValue(is_done=False)
        with open(path, encoding="utf-8") as f:
            return PokeReturnValue(is_done=True, xcom_value=f.read().strip())

    run = CryoRunPlanOperator(
        task_id="run",
        catalog_name="demo",
        catalog_properties=PROPERTIES,
        plan_from_task_id="grade",
        reviewed_fingerprint="{{ ti.xcom_pull(task_ids='review') }}",
        dry_run="{{ params.dry_run }}",
        lock_dir=f"{LAKE}/locks",
        receipt_log=f"{LAKE}/receipts.jsonl",
        actor="airflow:{{ dag.dag_id }}/{{ run_id }}",
    )

    grade >> review() >> run


if __name__ == "__main__":
    dag.test()
