/** Base class of every error Cryo throws. */
export declare class CryoError extends Error {
  constructor(message: string, options?: { code?: string; retryable?: boolean; cause?: unknown })
  /** cryo-core's stable error code (`config`, `validation`, `not_found`, `commit_conflict`, …). */
  readonly code: string
  /** Whether trying the same call again may succeed. */
  readonly retryable: boolean
}
/** A configuration value is missing, malformed or contradictory (`config`). */
export declare class ConfigError extends CryoError {}
/** Input (options, a plan, a policy) failed validation (`validation`). */
export declare class ValidationError extends CryoError {}
/** A policy file is invalid (`policy`); the message lists every problem with its file, line and field. */
export declare class PolicyError extends ConfigError {}
/** The catalog refused or failed a request (`catalog`). */
export declare class CatalogError extends CryoError {}
/** A namespace or table does not exist (`not_found`). */
export declare class NotFoundError extends CryoError {}
/** Reading or writing storage failed (`storage`). */
export declare class StorageError extends CryoError {}
/** Table metadata is corrupt or violates the Iceberg spec (`metadata`). */
export declare class MetadataError extends CryoError {}
/** The table uses something Cryo does not support yet (`unsupported`). */
export declare class UnsupportedError extends CryoError {}
/** A plan cannot be rendered for an engine (`render`). */
export declare class RenderError extends CryoError {}
/** Another writer committed first and the change could not be retried (`commit_conflict`). */
export declare class CommitConflictError extends CryoError {}
/** A destructive operation refused to run because it could lose data (`refused`). */
export declare class RefusedError extends CryoError {}
/** An engine Cryo submitted work to failed or could not be reached (`engine`). */
export declare class EngineError extends CryoError {}
/** A bug in Cryo; please report it (`internal`). */
export declare class InternalError extends CryoError {}
/** Error class by cryo-core error code. */
export declare const CLASSES: Readonly<Record<string, typeof CryoError>>
/** The CryoError for an error the native addon threw (anything else is returned unchanged). */
export declare function fromNative(err: unknown): unknown
