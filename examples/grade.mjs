// Grade Cryo's demo lake from Node and print the report (the same text the Rust quickstart and
// `python -m cryo grade` print).
//
//   npm --prefix cryo-node ci && npm --prefix cryo-node run build   # once: the native addon
//   node examples/grade.mjs [DIR]                                   # DIR: ./demo-lake by default
//
// In an application, `import * as cryo from 'cryo-iceberg'` and connect to your own catalog with
// PyIceberg's properties: `await cryo.Catalog.connect('prod', { type: 'rest', uri, warehouse })`.
import * as cryo from '../cryo-node/index.js'

const dir = process.argv[2] ?? 'demo-lake'
const lake = await cryo.demoLake(dir) // built on first use, reopened after
console.log(`${lake.built ? 'built' : 'opened'} demo lake at ${lake.root} (${lake.tables.length} tables)\n`)

const fleet = await lake.catalog.scanFleet() // metadata only
const reports = fleet.tables.map((scan) => cryo.grade(scan))
console.log(cryo.report.fleetTable(fleet, reports))
const errors = cryo.report.scanErrors(fleet)
if (errors) console.log(errors)

// Worst first, every deduction with its fix and the monthly cost.
for (const report of [...reports].sort((a, b) => a.score - b.score || a.table.localeCompare(b.table))) {
  console.log(cryo.report.healthReport(report))
}

const plan = lake.catalog.plan(fleet)
console.log(`plan ${plan.fingerprint}: ${plan.stepCount} steps on ${plan.tables.length} tables (render it with plan.render('trino', { catalog, version }))`)
