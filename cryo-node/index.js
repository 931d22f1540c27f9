'use strict'
// cryo-iceberg: Apache Iceberg table maintenance from Node.
//
// The native addon (`native.js`, the loader napi-rs generates) with Cryo's errors: every native
// function and method is wrapped so that what it throws, or the Promise it returns rejects with,
// becomes the matching CryoError subclass (errors.js). Nothing else is added here: defaults,
// validation and logic are cryo-core's. Types: index.d.ts (generated from the Rust sources).

const { inspect } = require('node:util')

const native = require('./native.js')
const errors = require('./errors.js')

/** An options object with a `CommitFence` given as `commitFence` passed as the plain
 * `{ dir, wait_ms }` cryo-core reads (the addon reads options as plain objects). */
function fenceOption(arg) {
  if (arg === null || typeof arg !== 'object' || Array.isArray(arg)) return arg
  for (const key of ['commitFence', 'commit_fence']) {
    if (arg[key] instanceof native.CommitFence) return { ...arg, [key]: arg[key].toOption() }
  }
  return arg
}

/** `fn` with native errors (thrown or rejected) turned into CryoErrors. */
function guard(fn) {
  const guarded = function (...args) {
    let result
    try {
      result = fn.apply(this, args.map(fenceOption))
    } catch (err) {
      throw errors.fromNative(err)
    }
    if (result instanceof Promise) {
      return result.catch((err) => {
        throw errors.fromNative(err)
      })
    }
    return result
  }
  Object.defineProperty(guarded, 'name', { value: fn.name })
  Object.defineProperty(guarded, 'length', { value: fn.length })
  return guarded
}

/** Guard every method, static method and getter of a native class, in place (instances the
 * addon creates share the prototype). */
function guardClass(cls) {
  for (const target of [cls, cls.prototype]) {
    for (const key of Object.getOwnPropertyNames(target)) {
      if (['constructor', 'prototype', 'length', 'name', 'arguments', 'caller'].includes(key)) continue
      const d = Object.getOwnPropertyDescriptor(target, key)
      if (!d.configurable) continue
      if (typeof d.value === 'function') d.value = guard(d.value)
      if (typeof d.get === 'function') d.get = guard(d.get)
      Object.defineProperty(target, key, d)
    }
  }
  // The state lives in Rust, so `console.log(x)` shows the summary `toString()` gives.
  Object.defineProperty(cls.prototype, inspect.custom, {
    value() {
      return this.toString()
    },
  })
}

for (const cls of [
  native.Catalog,
  native.TableScan,
  native.FleetScan,
  native.HealthReport,
  native.Plan,
  native.Policy,
  native.Advice,
  native.RunOutcome,
  native.FleetOutcome,
  native.CommitFence,
  native.WriterFence,
]) {
  guardClass(cls)
}

/** `cls` whose constructor throws CryoErrors too (`new CommitFence('')`). */
function guardConstructor(cls) {
  return new Proxy(cls, {
    construct(target, args, newTarget) {
      try {
        return Reflect.construct(target, args, newTarget)
      } catch (err) {
        throw errors.fromNative(err)
      }
    },
  })
}

const report = {}
for (const [key, fn] of Object.entries(native.report)) report[key] = guard(fn)
Object.freeze(report)

// Named exports one by one, so that ESM `import { Catalog } from 'cryo-iceberg'` sees them.
module.exports.Catalog = native.Catalog
module.exports.TableScan = native.TableScan
module.exports.FleetScan = native.FleetScan
module.exports.HealthReport = native.HealthReport
module.exports.Plan = native.Plan
module.exports.Policy = native.Policy
module.exports.Advice = native.Advice
module.exports.RunOutcome = native.RunOutcome
module.exports.FleetOutcome = native.FleetOutcome
module.exports.CommitFence = guardConstructor(native.CommitFence)
module.exports.WriterFence = native.WriterFence
module.exports.demoLake = guard(native.demoLake)
module.exports.loadCatalog = guard(native.loadCatalog)
module.exports.grade = guard(native.grade)
module.exports.readReceipts = guard(native.readReceipts)
module.exports.tableName = guard(native.tableName)
module.exports.version = guard(native.version)
module.exports.report = report
module.exports.__napiBindingTarget = native.__napiBindingTarget
module.exports.CryoError = errors.CryoError
module.exports.ConfigError = errors.ConfigError
module.exports.ValidationError = errors.ValidationError
module.exports.PolicyError = errors.PolicyError
module.exports.CatalogError = errors.CatalogError
module.exports.NotFoundError = errors.NotFoundError
module.exports.StorageError = errors.StorageError
module.exports.MetadataError = errors.MetadataError
module.exports.UnsupportedError = errors.UnsupportedError
module.exports.RenderError = errors.RenderError
module.exports.CommitConflictError = errors.CommitConflictError
module.exports.RefusedError = errors.RefusedError
module.exports.EngineError = errors.EngineError
module.exports.InternalError = errors.InternalError
module.exports.CLASSES = errors.CLASSES
module.exports.fromNative = errors.fromNative
