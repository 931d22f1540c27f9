"""``cryo.airflow`` and ``cryo.dagster`` with the real orchestrators, on a demo lake in a tmp dir.

Airflow and Dagster live in their own venv (scripts/peers.sh: $ORCHESTRATORS_PYTHON), not in the
peers venv; scripts/test.sh installs the cryo wheel over it and runs this file with it:

    $ORCHESTRATORS_PYTHON -m pytest tests/py/test_orchestrators.py -q

What is proved:

- Airflow (``dag.test()`` of examples/airflow_dag.py, AIRFLOW_HOME and its sqlite db in tmp): the grade
  task pushes the plan and its fingerprint, the review sensor waits for a person's approval, the run
  task runs the approved plan for real and its receipts are in the receipt log; an approval carrying
  another fingerprint fails the run task and changes nothing; secrets of the catalog properties stay out
  of XCom; ``import cryo`` does not import Airflow.
- Dagster (``materialize`` of ``cryo_maintenance_assets`` with ``CryoResource``): grade and run assets
  materialize with their metadata (grades, plan fingerprint, receipt counts) and the receipts are written.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_MISSING = [m for m in ("airflow", "dagster", "cryo", "pyarrow") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"needs the orchestrators venv with cryo installed (missing {_MISSING}): bash scripts/peers.sh, "
    "then scripts/test.sh (or: pip install the cryo wheel there and run with $ORCHESTRATORS_PYTHON)",
)


def test_import_cryo_does_not_import_orchestrators():
    code = "import sys, cryo; print(any(m.split('.')[0] in ('airflow', 'dagster') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- Airflow --------------------------------------------------------------------------------

_AIRFLOW_RUN = r"""
import json, os, sys, threading, time, glob
sys.path.insert(0, sys.argv[1])
import airflow_dag
from airflow.sdk import DagRunState
lake, approve_with = os.environ["CRYO_DEMO_LAKE"], sys.argv[2]

def reviewer():  # a person reading the plan, then approving a fingerprint (as long as the DAG runs)
    while True:
        plans = glob.glob(os.path.join(lake, "plans", "*.json"))
        if plans:
            plan = json.load(open(plans[0]))
            fp = approve_with if approve_with != "reviewed" else airflow_dag.cryo.Plan.from_json(json.dumps(plan)).fingerprint
            open(plans[0] + ".approved", "w").write(fp)
            return
        time.sleep(0.2)
threading.Thread(target=reviewer, daemon=True).start()
dr = airflow_dag.dag.test(run_conf={"dry_run": False})
states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
print("RESULT " + json.dumps({"state": str(dr.state), "tasks": states}))
"""


def _airflow_env(tmp: Path) -> dict:
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(tmp / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp / 'airflow' / 'airflow.db'}",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "examples"),
        CRYO_DEMO_LAKE=str(tmp / "lake"),
    )
    return env


@pytest.fixture(scope="module")
def airflow_db(tmp_path_factory) -> Path:
    """Airflow's sqlite db, migrated once for the module; each DAG test starts from a copy."""
    tmp = tmp_path_factory.mktemp("airflow-template")
    (tmp / "airflow").mkdir()
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=_airflow_env(tmp), check=True, capture_output=True)
    return tmp / "airflow" / "airflow.db"


def _dag_test(tmp: Path, approve_with: str, db: Path) -> dict:
    env = _airflow_env(tmp)
    (tmp / "airflow").mkdir()
    shutil.copyfile(db, tmp / "airflow" / "airflow.db")
    out = subprocess.run(
        [sys.executable, "-c", _AIRFLOW_RUN, str(ROOT / "examples"), approve_with],
        env=env, capture_output=True, text=True, timeout=600,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    result["log"] = out.stdout + out.stderr
    return result


def test_airflow_example_dag_runs_the_reviewed_plan(tmp_path, airflow_db):
    import pyarrow as pa

    import cryo

    result = _dag_test(tmp_path, "reviewed", airflow_db)
    assert result["tasks"] == {"grade": "success", "review": "success", "run": "success"}, result["log"][-3000:]
    assert result["state"] == "success"
    lake = tmp_path / "lake"
    (plan_file,) = (lake / "plans").glob("*.json")
    plan = cryo.Plan.from_json(plan_file.read_text())
    receipts = pa.table(cryo.read_receipts(lake / "receipts.jsonl"))
    assert receipts.num_rows > 0
    assert set(receipts.column("plan_fingerprint").to_pylist()) == {plan.fingerprint}
    statuses = set(receipts.column("status").to_pylist())
    assert "dry_run" not in statuses, statuses  # a real run (the DAG was triggered with dry_run=False)
    actors = set(receipts.column("actor").to_pylist())
    assert all(a.startswith("airflow:cryo_maintenance/") for a in actors), actors
    # the lake changed: the worst table's grade improved
    after = {t.table: cryo.grade(t).score for t in cryo.demo_lake(lake).catalog.scan_fleet().tables}
    assert not cryo.demo_lake(lake).pristine and after["lake.clickstream"] > 0


def test_airflow_tampered_fingerprint_fails_the_run_task(tmp_path, airflow_db):
    import cryo

    result = _dag_test(tmp_path, "0" * 64, airflow_db)
    assert result["tasks"]["grade"] == "success" and result["tasks"]["review"] == "success"
    assert result["tasks"]["run"] == "failed" and result["state"] == "failed"
    lake = tmp_path / "lake"
    assert not (lake / "receipts.jsonl").exists()
    assert cryo.demo_lake(lake).pristine
    # why it failed: the operator refuses the plan whose fingerprint is not the approved one
    from cryo.airflow import CryoRunPlanOperator

    (plan_file,) = (lake / "plans").glob("*.json")
    props = cryo.demo_lake(lake).to_dict()["catalog"]["properties"]
    op = CryoRunPlanOperator(
        task_id="run", catalog_name="demo", catalog_properties=props, plan_path=str(plan_file),
        reviewed_fingerprint="0" * 64, dry_run=False, receipt_log=str(lake / "receipts.jsonl"),
    )
    with pytest.raises(cryo.ValidationError, match="is not the reviewed plan"):
        op.execute({})
    assert not (lake / "receipts.jsonl").exists() and cryo.demo_lake(lake).pristine


def test_airflow_connection_config_keeps_secrets_out(tmp_path, monkeypatch):
    """Catalog properties from an Airflow Connection (env AIRFLOW_CONN_*); a secret property is
    masked and neither it nor any property reaches XCom."""
    import cryo
    from cryo.airflow import CryoGradeFleetOperator, catalog_properties_from_connection

    secret = "planted-Secret-9f3a1c"
    props = cryo.demo_lake(tmp_path / "lake").to_dict()["catalog"]["properties"]
    conn = {"conn_type": "generic", "password": secret, "extra": dict(props, password_property="s3.secret-access-key")}
    for k, v in _airflow_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AIRFLOW_CONN_CRYO_LAKE", json.dumps(conn))
    assert catalog_properties_from_connection("cryo_lake")["s3.secret-access-key"] == secret

    pushed = {}

    class TI:
        def xcom_push(self, key, value):
            pushed[key] = value

    op = CryoGradeFleetOperator(task_id="grade", catalog_name="demo", conn_id="cryo_lake")
    summary = op.execute({"ti": TI()})
    assert summary["tables"] == len(cryo.demo_lake(tmp_path / "lake").tables)
    assert summary["grades"]["lake.healthy"]["grade"] == "A"
    assert cryo.Plan.from_json(pushed["plan"]).fingerprint == pushed["fingerprint"] == summary["fingerprint"]
    assert secret not in json.dumps(pushed)

    # Under the demo lake's policy file: the plan records it, the summary says the presets.
    policy_path = str(Path(__file__).resolve().parents[2] / "examples" / "policy.yaml")
    op = CryoGradeFleetOperator(task_id="grade", catalog_name="demo", conn_id="cryo_lake", policy_path=policy_path)
    assert "policy_path" in op.template_fields
    summary = op.execute({"ti": TI()})
    policy = cryo.Policy.load(policy_path)
    assert summary["policy_fingerprint"] == policy.fingerprint
    assert json.loads(pushed["plan"])["policy"] == policy.fingerprint
    assert summary["presets"]["streaming-hot"] == 1


# ---- Dagster --------------------------------------------------------------------------------


def test_dagster_assets_materialize_with_metadata(tmp_path):
    import dagster as dg
    import pyarrow as pa

    import cryo
    from cryo.dagster import CryoResource, cryo_maintenance_assets

    lake = cryo.demo_lake(tmp_path / "lake")
    props = lake.to_dict()["catalog"]["properties"]
    assets = cryo_maintenance_assets(dry_run=False, receipt_log=str(tmp_path / "receipts.jsonl"), lock_dir=str(tmp_path / "locks"))
    result = dg.materialize(
        assets,
        resources={"cryo": CryoResource(catalog_name="demo", properties=props)},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    mats = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    grade_md = mats["cryo_grade"].materialization.metadata
    run_md = mats["cryo_run"].materialization.metadata
    grades = grade_md["grades"].value
    assert grades["lake.healthy"]["grade"] == "A" and grades["lake.clickstream"]["grade"] == "F"
    assert grade_md["tables"].value == len(lake.tables)
    fingerprint = grade_md["fingerprint"].value
    assert run_md["fingerprint"].value == fingerprint and run_md["dry_run"].value is False
    receipts = pa.table(cryo.read_receipts(tmp_path / "receipts.jsonl"))
    assert run_md["receipts"].value == receipts.num_rows > 0
    assert sum(run_md["counts"].value.values()) == receipts.num_rows
    assert run_md["failed_tables"].value == []
    assert not cryo.demo_lake(tmp_path / "lake").pristine

    # Under a policy, with only what is due: what the run above did is not planned again.
    policy_path = str(Path(__file__).resolve().parents[2] / "examples" / "policy.yaml")
    assets = cryo_maintenance_assets(
        name="policy", policy_path=policy_path, only_due=True, receipt_log=str(tmp_path / "receipts.jsonl")
    )
    result = dg.materialize(
        assets[:1], resources={"cryo": CryoResource(catalog_name="demo", properties=props)}, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert md["policy_fingerprint"].value == cryo.Policy.load(policy_path).fingerprint
    plan = json.loads(result.output_for_node("policy_grade"))
    assert plan["policy"] == md["policy_fingerprint"].value


def test_dagster_example_definitions_load(tmp_path, monkeypatch):
    import dagster as dg

    monkeypatch.setenv("CRYO_DEMO_LAKE", str(tmp_path / "lake"))
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import dagster_defs

    defs = dagster_defs.defs
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral())
    assert result.success
    run_md = [m for m in result.get_asset_materialization_events() if m.asset_key.to_user_string().endswith("run")][0]
    assert run_md.materialization.metadata["dry_run"].value is True  # the example's default
