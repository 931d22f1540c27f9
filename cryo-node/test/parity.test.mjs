// Parity: Python (`cryo`, cryo-py) and Node (this package) return the same grades, plans,
// fingerprints, rendered SQL (Trino and Spark) and, under examples/policy.yaml, policy
// fingerprints, resolutions and plans for the same tables: Cryo's demo lake and, when
// present, the fixture tables PyIceberg and Spark wrote (target/cryo-fixtures, CRYO_FIXTURES).
//
// Grading and planning read the clock (snapshot ages, a plan's `created_at_ms`, expiry cut-offs),
// so the exact comparison runs both bindings with the same frozen clock (libfaketime's
// `faketime`, the wall clock only); a second test compares across a live clock: each binding
// reads the other's plan JSON (same fingerprint, same SQL) and grades match letter and score.
//
// Needs the peers' Python with `cryo` installed (scripts/test.sh does both); skips, saying why,
// without them, and fails instead when CRYO_REQUIRE_PEERS=1.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import * as cryo from '../index.js'
import { peersPython, requirePeers, tempDir } from './helpers.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..', '..')
const FIXTURES = process.env.CRYO_FIXTURES || join(REPO, 'target', 'cryo-fixtures')
const POLICY = join(REPO, 'examples', 'policy.yaml')
const RENDER = {
  trino: { catalog: 'iceberg', version: 478 },
  spark: { catalog: 'demo', spark_version: '3.5.9', iceberg_version: '1.10.2' },
}

const { python, reason: noPython } = peersPython()
let pythonReason = noPython
let cases = []
let fixturesReason

/** Skip a test saying why, or fail when the peers are required. */
function unavailable(t, reason) {
  if (requirePeers) assert.fail(`${reason} (CRYO_REQUIRE_PEERS=1)`)
  t.skip(reason)
}

function run(command, args, env = process.env) {
  const r = spawnSync(command, args, { env, encoding: 'utf8', timeout: 180_000 })
  if (r.error) throw r.error
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${r.status}:\n${r.stderr}`)
  return r
}

before(async () => {
  if (python) {
    const r = spawnSync(python, ['-c', 'import cryo'], { encoding: 'utf8' })
    if (r.status !== 0) pythonReason = `the peers' Python cannot import cryo (maturin develop -m cryo-py/Cargo.toml): ${r.stderr.trim().split('\n').at(-1)}`
  }
  const dir = tempDir()
  const lake = await cryo.demoLake(join(dir, 'lake'))
  cases.push({
    label: 'demo lake',
    name: 'demo',
    properties: { type: 'sql', uri: `sqlite:///${lake.root}/catalog.db`, warehouse: `file://${lake.root}/warehouse` },
  })
  const manifest = join(FIXTURES, 'manifest.json')
  if (existsSync(manifest)) {
    const { catalogs } = JSON.parse(readFileSync(manifest, 'utf8'))
    // The local catalogs; the S3 and REST ones need running services and are Python's to test.
    for (const name of ['fixtures', 'hadoop']) {
      const c = catalogs[name]
      if (!c) continue
      const properties = Object.fromEntries(Object.entries(c).filter(([k]) => ['type', 'uri', 'warehouse'].includes(k)))
      cases.push({ label: `fixtures: ${name} (${c.type})`, name, properties })
    }
    if (cases.length === 1) fixturesReason = `${manifest} lists no local catalog`
  } else {
    fixturesReason = `no fixtures at ${FIXTURES} (scripts/test.sh makes them with tests/fixtures/make_fixtures.py)`
  }
  cases = cases.map((c, i) => {
    const spec = join(dir, `spec-${i}.json`)
    // The demo lake's policy file on every case: the same policy, resolved and planned under.
    writeFileSync(spec, JSON.stringify({ name: c.name, properties: c.properties, policy: POLICY, ...RENDER }))
    return { ...c, spec, dir }
  })
})

/** Compare two case outputs field by field, naming the case. */
function assertSame(node, py, label) {
  assert.deepEqual(node.tables.map((t) => t.table), py.tables.map((t) => t.table), `${label}: tables`)
  for (let i = 0; i < node.tables.length; i++) {
    assert.deepEqual(node.tables[i], py.tables[i], `${label}: ${node.tables[i].table} graded the same`)
  }
  assert.deepEqual(node.errors, py.errors, `${label}: scan errors`)
  assert.equal(node.plan, py.plan, `${label}: plan JSON`)
  assert.equal(node.fingerprint, py.fingerprint, `${label}: fingerprint`)
  assert.equal(node.trino, py.trino, `${label}: Trino SQL`)
  assert.equal(node.spark, py.spark, `${label}: Spark SQL`)
  assert.ok(node.policy && node.policy.fingerprint.length === 64, `${label}: planned under the policy`)
  assert.equal(JSON.parse(node.policy.plan).policy, node.policy.fingerprint, `${label}: the plan records the policy`)
  assert.deepEqual(node.policy, py.policy, `${label}: the policy's fingerprint, resolution and plan`)
}

test('same grades, plans, fingerprints and SQL from Python and Node (frozen clock)', async (t) => {
  if (pythonReason) return unavailable(t, pythonReason)
  if (spawnSync('faketime', ['--version']).status !== 0) {
    return unavailable(t, 'faketime is not installed (apt-get install faketime; scripts/test.sh does)')
  }
  // Now, to the second: after every table was written, the same instant for both bindings.
  const frozen = new Date().toISOString().replace('T', ' ').slice(0, 19)
  const env = { ...process.env, TZ: 'UTC', FAKETIME_DONT_FAKE_MONOTONIC: '1' }
  for (const c of cases) {
    const nodeOut = join(c.dir, `node-${c.name}.json`)
    const pyOut = join(c.dir, `py-${c.name}.json`)
    run('faketime', ['-f', frozen, process.execPath, join(HERE, 'parity', 'case.mjs'), c.spec, nodeOut], env)
    run('faketime', ['-f', frozen, python, join(HERE, 'parity', 'case.py'), c.spec, pyOut], env)
    const node = JSON.parse(readFileSync(nodeOut, 'utf8'))
    const py = JSON.parse(readFileSync(pyOut, 'utf8'))
    assert.ok(node.tables.length > 0, `${c.label}: tables scanned`)
    assertSame(node, py, c.label)
    t.diagnostic(`${c.label}: ${node.tables.length} tables, ${JSON.parse(node.plan).tables.length} planned, fingerprint ${node.fingerprint.slice(0, 12)}… identical`)
  }
  const demo = JSON.parse(readFileSync(join(cases[0].dir, 'node-demo.json'), 'utf8'))
  assert.ok(JSON.parse(demo.plan).tables.length > 0, 'the demo lake gets a plan with steps')
  if (fixturesReason) unavailable(t, `fixture part: ${fixturesReason}`)
})

test('each binding reads the other\'s plan: same fingerprint, same SQL; same grades (live clock)', async (t) => {
  if (pythonReason) return unavailable(t, pythonReason)
  for (const c of cases) {
    // Node first, in this process.
    const catalog = await cryo.Catalog.connect(c.name, c.properties)
    const fleet = await catalog.scanFleet()
    const plan = catalog.plan(fleet)
    const nodePlan = join(c.dir, `node-plan-${c.name}.json`)
    writeFileSync(nodePlan, plan.toJson())
    const pyOut = join(c.dir, `py-live-${c.name}.json`)
    run(python, [join(HERE, 'parity', 'case.py'), c.spec, pyOut, nodePlan])
    const py = JSON.parse(readFileSync(pyOut, 'utf8'))

    // Python read Node's plan: it verified and kept the fingerprint, and renders the same SQL.
    assert.equal(py.other.fingerprint, plan.fingerprint, `${c.label}: Python's fingerprint of Node's plan`)
    assert.equal(py.other.trino, plan.render('trino', RENDER.trino), `${c.label}: Trino SQL of Node's plan`)
    assert.equal(py.other.spark, plan.render('spark', RENDER.spark), `${c.label}: Spark SQL of Node's plan`)
    // Node reads Python's plan the same way.
    const theirs = cryo.Plan.fromJson(py.plan)
    assert.equal(theirs.fingerprint, py.fingerprint, `${c.label}: Node's fingerprint of Python's plan`)
    assert.equal(theirs.toJson(), py.plan)
    assert.equal(theirs.render('trino', RENDER.trino), py.trino, `${c.label}: Trino SQL of Python's plan`)
    assert.equal(theirs.render('spark', RENDER.spark), py.spark, `${c.label}: Spark SQL of Python's plan`)
    // Grades seconds apart: letters, scores and findings agree (measured ages move with the clock).
    const summary = (tables) => tables.map((r) => [r.table, r.grade, r.score, r.report.findings.map((f) => [f.code, f.points])])
    const ours = fleet.tables.map((s) => {
      const r = cryo.grade(s)
      return { table: r.table, grade: r.grade, score: r.score, report: r.toObject() }
    })
    assert.deepEqual(summary(ours), summary(py.tables), `${c.label}: grades`)
  }
  if (fixturesReason) unavailable(t, `fixture part: ${fixturesReason}`)
})
