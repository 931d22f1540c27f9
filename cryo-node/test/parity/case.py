"""One parity case from Python: the same steps as case.mjs, with the `cryo` package.

    python case.py spec.json out.json [other-plan.json]
"""

import json
import sys

import cryo


def main(spec_path: str, out_path: str, other_plan: str | None = None) -> None:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    catalog = cryo.Catalog(spec["name"], **spec["properties"])
    fleet = catalog.scan_fleet()
    reports = [cryo.grade(t) for t in fleet.tables]
    plan = catalog.plan(fleet)
    out = {
        "tables": [{"table": r.table, "grade": r.grade, "score": r.score, "report": r.to_dict()} for r in reports],
        "errors": fleet.errors,
        "plan": plan.to_json(),
        "fingerprint": plan.fingerprint,
        "trino": plan.render("trino", **spec["trino"]),
        "spark": plan.render("spark", **spec["spark"]),
    }
    if spec.get("policy"):
        policy = cryo.Policy.load(spec["policy"])
        out["policy"] = {
            "fingerprint": policy.fingerprint,
            "resolved": policy.resolve(fleet.tables),
            "plan": catalog.plan(fleet, policy=policy).to_json(),
        }
    if other_plan is not None:
        with open(other_plan, encoding="utf-8") as f:
            other = cryo.Plan.from_json(f.read())
        out["other"] = {
            "fingerprint": other.fingerprint,
            "trino": other.render("trino", **spec["trino"]),
            "spark": other.render("spark", **spec["spark"]),
        }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, allow_nan=False)


if __name__ == "__main__":
    main(*sys.argv[1:])
