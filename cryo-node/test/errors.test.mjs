// Errors: CryoError subclasses with cryo-core's stable code, `retryable` and the cause chain; a
// planted secret never shows in a message, a stack, a cause, `util.inspect` or a result.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { renameSync } from 'node:fs'
import { join } from 'node:path'
import { inspect } from 'node:util'

import * as cryo from '../index.js'
import { tempDir, stringify } from './helpers.mjs'

const SECRET = 'planted-Secret-9f3a1c'

const CLASSES = {
  ConfigError: 'config',
  ValidationError: 'validation',
  CatalogError: 'catalog',
  NotFoundError: 'not_found',
  StorageError: 'storage',
  MetadataError: 'metadata',
  UnsupportedError: 'unsupported',
  RenderError: 'render',
  CommitConflictError: 'commit_conflict',
  RefusedError: 'refused',
  EngineError: 'engine',
  InternalError: 'internal',
}

/** Every string a person or a log could see of an error, causes included. */
function shown(err) {
  const out = [String(err), err.stack ?? '', inspect(err, { depth: 10 })]
  for (let c = err.cause; c; c = c.cause) out.push(String(c), c.stack ?? '')
  return out
}

test('one Error subclass per cryo-core error code', () => {
  for (const [name, code] of Object.entries(CLASSES)) {
    const Class = cryo[name]
    assert.equal(typeof Class, 'function', name)
    assert.ok(Class.prototype instanceof cryo.CryoError, name)
    assert.ok(Class.prototype instanceof Error, name)
    assert.equal(cryo.CLASSES[code], Class, code)
  }
  // The native marker becomes the class; anything else passes through.
  const native = new Error('[cryo:commit_conflict:retryable] commit conflict on lake.t: moved on')
  const err = cryo.fromNative(native)
  assert.ok(err instanceof cryo.CommitConflictError)
  assert.equal(err.code, 'commit_conflict')
  assert.equal(err.retryable, true)
  assert.equal(err.name, 'CommitConflictError')
  assert.equal(err.message, 'commit conflict on lake.t: moved on')
  const plain = new TypeError('not ours')
  assert.equal(cryo.fromNative(plain), plain)
})

test('errors from every kind of call are typed, with code, retryable and the caller stack', async () => {
  await assert.rejects(cryo.Catalog.connect('x', { type: 'oracle' }), (e) => e instanceof cryo.ConfigError && e.code === 'config' && !e.retryable)
  const lake = await cryo.demoLake(join(tempDir(), 'lake'))
  await assert.rejects(lake.catalog.scan('lake.nope'), (e) => {
    assert.ok(e instanceof cryo.NotFoundError && e instanceof cryo.CryoError && e instanceof Error)
    assert.equal(e.code, 'not_found')
    assert.match(e.message, /lake\.nope/)
    assert.match(e.stack, /errors\.test\.mjs/) // where the caller awaited, not native frames
    return true
  })
  // Synchronous calls throw the same classes.
  assert.throws(() => cryo.Plan.fromJson('{}'), cryo.ValidationError)
  const fleet = await lake.catalog.scanFleet()
  assert.throws(() => lake.catalog.plan(fleet, { chunkBudgetBytes: -1 }), cryo.ValidationError)
  assert.throws(() => cryo.grade(fleet.tables[0], { skipp: [] }), (e) => e instanceof cryo.ValidationError && /unknown option `skipp`/.test(e.message))
})

test('the cause chain: what went wrong underneath, as Errors', async () => {
  const lake = await cryo.demoLake(join(tempDir(), 'lake'))
  const scan = await lake.catalog.scan('lake.healthy')
  const metadata = new URL(scan.toObject().metadata_location).pathname
  renameSync(metadata, `${metadata}.moved`)
  try {
    await assert.rejects(lake.catalog.scan('lake.healthy'), (e) => {
      assert.ok(e instanceof cryo.MetadataError, String(e))
      assert.ok(e.cause instanceof Error, 'a cause')
      const chain = []
      for (let c = e.cause; c; c = c.cause) chain.push(c.message)
      assert.ok(chain.length >= 1)
      assert.ok(chain.some((m) => /No such file|not found/i.test(m)), chain.join(' <- '))
      assert.match(inspect(e, { depth: 10 }), /\[cause\]/)
      return true
    })
  } finally {
    renameSync(`${metadata}.moved`, metadata)
  }
})

test('a planted secret never shows', async () => {
  // A REST catalog nobody serves: connecting fails; the token, the OAuth2 secret and the URI
  // password stay out of the error and its causes.
  const err = await cryo.Catalog.connect('rest', {
    type: 'rest',
    uri: `http://admin:${SECRET}@127.0.0.1:9/`,
    token: SECRET,
    credential: `id:${SECRET}`,
  }).then(
    () => assert.fail('connected to nothing'),
    (e) => e,
  )
  assert.ok(err instanceof cryo.CryoError, String(err))
  for (const s of shown(err)) assert.ok(!s.includes(SECRET), s)

  // A working catalog configured with secrets: its text, errors and results stay clean.
  const lake = await cryo.demoLake(join(tempDir(), 'lake'))
  const cat = await cryo.Catalog.connect('demo', {
    type: 'sql',
    uri: `sqlite:///${lake.root}/catalog.db`,
    warehouse: `file://${lake.root}/warehouse`,
    's3.secret-access-key': SECRET,
    token: SECRET,
  })
  const seen = [String(cat), inspect(cat)]
  await cat.scan('lake.missing').catch((e) => seen.push(...shown(e)))
  assert.ok(seen.length > 2, 'the missing table raised')
  const scan = await cat.scan('lake.orders')
  const compact = await cat.compact('lake.orders', { dryRun: true })
  seen.push(String(scan), stringify(scan.toObject()), String(cryo.grade(scan)), stringify(compact))
  for (const s of seen) assert.ok(!s.includes(SECRET), s)
})
