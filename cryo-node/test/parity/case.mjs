// One parity case from Node: connect, scan the fleet, grade every table, plan, render for Trino
// and Spark; write what came out as JSON. `case.py` does the same from Python.
//
//   node case.mjs spec.json out.json [other-plan.json]
// spec: { name, properties, trino: {...}, spark: {...} } (render options in cryo-core's names).
// With other-plan.json (a plan the other binding wrote), also read it back and render it.
import { readFileSync, writeFileSync } from 'node:fs'

import * as cryo from '../../index.js'

const [specPath, outPath, otherPlan] = process.argv.slice(2)
const spec = JSON.parse(readFileSync(specPath, 'utf8'))
const catalog = await cryo.Catalog.connect(spec.name, spec.properties)
const fleet = await catalog.scanFleet()
const reports = fleet.tables.map((t) => cryo.grade(t))
const plan = catalog.plan(fleet)
const out = {
  tables: reports.map((r) => ({ table: r.table, grade: r.grade, score: r.score, report: r.toObject() })),
  errors: fleet.errors,
  plan: plan.toJson(),
  fingerprint: plan.fingerprint,
  trino: plan.render('trino', spec.trino),
  spark: plan.render('spark', spec.spark),
}
if (spec.policy) {
  // The same policy file: the same fingerprint, resolution and plan under it.
  const policy = cryo.Policy.load(spec.policy)
  const underPolicy = catalog.plan(fleet, undefined, undefined, undefined, policy)
  out.policy = { fingerprint: policy.fingerprint, resolved: policy.resolve(fleet), plan: underPolicy.toJson() }
}
if (otherPlan) {
  const other = cryo.Plan.fromJson(readFileSync(otherPlan, 'utf8'))
  out.other = { fingerprint: other.fingerprint, trino: other.render('trino', spec.trino), spark: other.render('spark', spec.spark) }
}
// Snapshot ids beyond 2^53 become the same doubles JSON.parse makes of Python's exact digits.
writeFileSync(outPath, JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? Number(v) : v)))
