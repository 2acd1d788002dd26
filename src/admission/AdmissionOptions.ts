/**
 * The program-aware KV admission settings (docs/sglang.md "KV scheduling"): Relax's six flags, their defaults, and
 * their ranges, checked only when admission is on (as Relax's agentic validator does).
 *
 * **Details**
 * `--agentic-admission-expected-decode-cap` defaults to `--rollout-max-response-len` (and, when that is unset too, to
 * the completion budget a request gets without it, SGLang's 128). The fixed constants (reconcile every 2 s, lease TTL
 * 600 s, `/metrics` timeout 5 s, stale after 6 s) are Relax's too; they are not flags there either. One is ours: while
 * the queue's head waits on the pressure guard, an attempt that ends has the snapshot read again at once (at most every
 * 250 ms) instead of at the next 2 s period, since only a newer reading can lift that refusal.
 */

/** What the flags give (src/config/RolloutOptions.ts fields of the same names). */
export interface AdmissionFlags {
  readonly agenticProgramAdmission: boolean
  readonly agenticAdmissionHeadroom: number
  readonly agenticAdmissionPressureThreshold: number
  readonly agenticAdmissionExpectedDecodeCap?: number | undefined
  readonly agenticAdmissionMaxWaitS: number
  readonly agenticAdmissionScope: Scope
  readonly rolloutMaxResponseLen?: number | undefined
}

/** `train`: training Sessions' attempts are admitted, Eval's run unreserved; `all`: both. */
export type Scope = "train" | "all"

/** The resolved admission settings an engine decorator runs with. */
export interface AdmissionSettings {
  readonly headroom: number
  readonly pressureThreshold: number
  readonly expectedDecodeCap: number
  readonly maxWaitMs: number
  readonly scope: Scope
  /** Snapshot refresh period. */
  readonly reconcileMs: number
  /**
   * The soonest a snapshot is read again when an attempt ends while the queue's head waits on the pressure guard (ours;
   * Relax waits for the next period).
   */
  readonly pressureRereadMs: number
  /** A snapshot older than this is stale (admission degrades to bypass). */
  readonly staleMs: number
  /** A lease older than this expires (a holder that never released). */
  readonly leaseTtlMs: number
  /** Timeout of one worker's `/metrics`. */
  readonly metricsTimeoutMs: number
}

/** Relax's fixed constants. */
export const constants = {
  reconcileMs: 2000,
  pressureRereadMs: 250,
  staleMs: 6000,
  leaseTtlMs: 600_000,
  metricsTimeoutMs: 5000
} as const

/** The completion budget of a request with no `--rollout-max-response-len` (SGLang's default `max_new_tokens`). */
const DEFAULT_MAX_NEW_TOKENS = 128

/** A flag out of its range: the field, and what is wrong in words. */
export interface AdmissionProblem {
  readonly field: keyof AdmissionFlags
  readonly detail: string
}

const unitInterval = (value: number): boolean => Number.isFinite(value) && value > 0 && value <= 1

/** The first flag out of range, when admission is on; nothing is checked when it is off. */
export const problem = (flags: AdmissionFlags): AdmissionProblem | undefined => {
  if (!flags.agenticProgramAdmission) return undefined
  if (!unitInterval(flags.agenticAdmissionHeadroom)) {
    return {
      field: "agenticAdmissionHeadroom",
      detail: `${flags.agenticAdmissionHeadroom} is out of range: it must be in (0, 1] (a share of the KV pool)`
    }
  }
  if (!unitInterval(flags.agenticAdmissionPressureThreshold)) {
    return {
      field: "agenticAdmissionPressureThreshold",
      detail: `${flags.agenticAdmissionPressureThreshold} is out of range: it must be in (0, 1] (a KV token usage)`
    }
  }
  const cap = flags.agenticAdmissionExpectedDecodeCap
  if (cap !== undefined && cap <= 0) {
    return {
      field: "agenticAdmissionExpectedDecodeCap",
      detail: `${cap} is out of range: it must be > 0 (tokens), or omit it for --rollout-max-response-len`
    }
  }
  if (!(Number.isFinite(flags.agenticAdmissionMaxWaitS) && flags.agenticAdmissionMaxWaitS >= 0)) {
    return {
      field: "agenticAdmissionMaxWaitS",
      detail: `${flags.agenticAdmissionMaxWaitS} is out of range: it must be >= 0 (seconds)`
    }
  }
  return undefined
}

/** The settings admission runs with; `undefined` when it is off. */
export const resolve = (flags: AdmissionFlags): AdmissionSettings | undefined =>
  flags.agenticProgramAdmission
    ? {
      headroom: flags.agenticAdmissionHeadroom,
      pressureThreshold: flags.agenticAdmissionPressureThreshold,
      expectedDecodeCap: flags.agenticAdmissionExpectedDecodeCap ?? flags.rolloutMaxResponseLen ??
        DEFAULT_MAX_NEW_TOKENS,
      maxWaitMs: flags.agenticAdmissionMaxWaitS * 1000,
      scope: flags.agenticAdmissionScope,
      ...constants
    }
    : undefined

/** The settings in one line (`relax-agentic check`, the rollout's startup log). */
export const describe = (settings: AdmissionSettings | undefined): string =>
  settings === undefined
    ? "KV admission: off (--agentic-program-admission not given)"
    : `KV admission: on; headroom ${settings.headroom}, pressure threshold ${settings.pressureThreshold}, ` +
      `expected decode cap ${settings.expectedDecodeCap} tokens, max wait ${settings.maxWaitMs / 1000} s, ` +
      `scope ${settings.scope}; snapshot every ${settings.reconcileMs / 1000} s, stale after ` +
      `${settings.staleMs / 1000} s`
