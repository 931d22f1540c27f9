'use strict'
// Cryo's errors: one class per kind of failure, all under CryoError.
//
// Every error carries `code` (cryo-core's stable error code, e.g. "commit_conflict") and
// `retryable` (whether the same call may succeed if tried again); `cause` holds the underlying
// errors (an HTTP or storage failure), each with its message. Messages never contain credentials:
// cryo-core removes configured secrets and URI passwords from everything it reports, the cause
// chain included.
//
// The native addon marks its errors with a `[cryo:<code>]` (or `[cryo:<code>:retryable]`) prefix;
// `fromNative` strips it and builds the matching class. Everything else passes through unchanged.

class CryoError extends Error {
  constructor(message, options) {
    super(message, options && options.cause !== undefined ? { cause: options.cause } : undefined)
    this.name = new.target.name
    /** cryo-core's stable error code. */
    this.code = (options && options.code) || 'internal'
    /** Whether trying the same call again may succeed. */
    this.retryable = Boolean(options && options.retryable)
  }
}

/** A configuration value is missing, malformed or contradictory. */
class ConfigError extends CryoError {}
/** Input (options, a plan, a policy) failed validation. */
class ValidationError extends CryoError {}
/** A policy file is invalid; the message lists every problem with its file, line and field. */
class PolicyError extends ConfigError {}
/** The catalog refused or failed a request. */
class CatalogError extends CryoError {}
/** A namespace or table does not exist. */
class NotFoundError extends CryoError {}
/** Reading or writing storage failed. */
class StorageError extends CryoError {}
/** Table metadata is corrupt or violates the Iceberg spec. */
class MetadataError extends CryoError {}
/** The table uses something Cryo does not support (yet). */
class UnsupportedError extends CryoError {}
/** A plan cannot be rendered for an engine. */
class RenderError extends CryoError {}
/** Another writer committed first and the change could not be retried. */
class CommitConflictError extends CryoError {}
/** A destructive operation refused to run because it could lose data; nothing was changed. */
class RefusedError extends CryoError {}
/** An engine Cryo submitted work to (Trino, Spark) failed or could not be reached. */
class EngineError extends CryoError {}
/** A bug in Cryo; please report it. */
class InternalError extends CryoError {}

/** Error class by cryo-core code (`Error::code()`); an unknown code falls back to CryoError. */
const CLASSES = {
  config: ConfigError,
  validation: ValidationError,
  policy: PolicyError,
  catalog: CatalogError,
  not_found: NotFoundError,
  storage: StorageError,
  metadata: MetadataError,
  unsupported: UnsupportedError,
  render: RenderError,
  commit_conflict: CommitConflictError,
  refused: RefusedError,
  engine: EngineError,
  internal: InternalError,
}

const MARK = /^\[cryo:([a-z_]+)(:retryable)?\] /

/** The cause chain of a native error as plain Errors (message and cause; no native frames). */
function causes(err, depth = 0) {
  if (!(err instanceof Error) || depth > 8) return undefined
  const cause = causes(err.cause, depth + 1)
  const link = new Error(err.message, cause === undefined ? undefined : { cause })
  link.stack = `Error: ${err.message}`
  return link
}

/** The CryoError for a native error (unchanged if it is not one of Cryo's). Its stack is the
 * caller's: it is built where the wrapper caught the native error. */
function fromNative(err) {
  if (!(err instanceof Error) || err instanceof CryoError) return err
  const m = MARK.exec(err.message)
  if (m === null) return err
  const Class = CLASSES[m[1]] || CryoError
  return new Class(err.message.slice(m[0].length), {
    code: m[1],
    retryable: m[2] !== undefined,
    cause: causes(err.cause),
  })
}

module.exports = {
  CryoError,
  ConfigError,
  ValidationError,
  PolicyError,
  CatalogError,
  NotFoundError,
  StorageError,
  MetadataError,
  UnsupportedError,
  RenderError,
  CommitConflictError,
  RefusedError,
  EngineError,
  InternalError,
  CLASSES,
  fromNative,
}
