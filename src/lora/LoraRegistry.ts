/**
 * The LoRA version registry: which adapter versions exist, which one new Sessions bind, which Session holds which, and
 * which versions own engine resources (docs/lora.md "Versioned mode"; Relax's `relax/agentic/session/lora_version.py`).
 *
 * **Details**
 * A single writer that does no I/O: every operation checks, then either refuses with a {@link LoraRegistryError}
 * (changing nothing) or applies its transition. The service around it (layers/lora/) does the engine calls between
 * the steps: `publish` (LOADING) → every worker loads the adapter (`loaded`) → `commit` (PUBLISHED, the default; the
 * old default RETIRED) → when no Session holds a RETIRED version any more, `claimReclaimable` (RECLAIMING) → every
 * worker unloads it → `reclaimed` (RECLAIMED) or `reclaimUnconfirmed` (UNCONFIRMED: its slot stays counted until a
 * later reclaim confirms it).
 * - A slot is owned by every version in LOADING, PUBLISHED, RETIRED, RECLAIMING, UNCONFIRMED and FATAL; at most
 *   `capacity` (default 2) versions own one, so a publication beyond it is refused (`capacity`), naming the Sessions
 *   that hold the versions in the way.
 * - Idempotent by digest: publishing content already known returns its version (`no-op`; the default never moves
 *   back); a version id given by the caller must be a positive integer and may not name other content.
 * - Every per-attempt call names the current attempt (`attempt-conflict`): a late commit of an earlier attempt never
 *   changes the default. A commit also needs every worker of the fleet loaded (`not-ready`) and the default unmoved
 *   since the publication began (`revision-conflict`).
 * - A Session binds the default at its first model request and keeps it for life (sticky); a Session released before
 *   it bound is tombstoned, so a late bind is refused (`session-closed`). There is never a fallback to the base model
 *   (`no-published-version`).
 */
import { Data } from "effect"

/** Where a version is in its life. */
export type VersionState =
  | "loading"
  | "published"
  | "retired"
  | "reclaiming"
  | "reclaimed"
  | "unconfirmed"
  | "failed"
  | "fatal"

/** One adapter version. */
export interface Version {
  readonly id: number
  readonly digest: string
  /** The adapter name the engines know it by: `<prefix>@<epoch>-<id>-<digest16>`. */
  readonly name: string
  readonly state: VersionState
  /** Its publication attempt (1, then one more per retry after a retryable failure). */
  readonly attempt: number
  /** The workers that confirmed loading it in the current attempt. */
  readonly loadedOn: ReadonlySet<string>
  /** The default's revision when the current attempt began (a commit needs it unchanged). */
  readonly baseRevision: number
}

/** Why an operation was refused. */
export type LoraRegistryReason =
  | "invalid-version"
  | "invalid-digest"
  | "publication-blocked"
  | "capacity"
  | "publication-in-progress"
  | "version-conflict"
  | "unknown-version"
  | "attempt-conflict"
  | "not-ready"
  | "revision-conflict"
  | "reclaim-ambiguous"
  | "session-closed"
  | "no-published-version"
  | "session-still-bound"

/** A refused registry operation: `reason` says which rule, `detail` says what to do. */
export class LoraRegistryError extends Data.TaggedError("LoraRegistryError")<{
  readonly reason: LoraRegistryReason
  readonly detail: string
  /** With `capacity`: the Sessions holding the versions that own the slots (what a reclaim waits for). */
  readonly holders?: ReadonlyArray<string> | undefined
}> {
  override get message(): string {
    return this.detail
  }
}

/** What `publish` did. */
export type Publication =
  /** A new version (or a retry of a failed one) is LOADING: the caller loads it on every worker, then commits. */
  | { readonly _tag: "Loading"; readonly version: Version }
  /** The content is already known: nothing to load (it may be the default, an older version, or reclaimed). */
  | { readonly _tag: "NoOp"; readonly version: Version }

export interface RegistryOptions {
  /** The run's epoch (Relax: 12 random hex digits), so a name from an earlier run never collides. */
  readonly epoch: string
  /** The adapter names' prefix (default `relax_policy_lora`). */
  readonly prefix?: string | undefined
  /** Versions that may own engine resources at once (default 2). */
  readonly capacity?: number | undefined
}

/** Relax's adapter-name prefix. */
export const defaultPrefix = "relax_policy_lora"

/** Relax's capacity: the default and the version it replaced. */
export const defaultCapacity = 2

/** The engines' name of version `id` with `digest`: `<prefix>@<epoch>-<id>-<digest16>`. */
export const nameOf = (prefix: string, epoch: string, id: number, digest: string): string =>
  `${prefix}@${epoch}-${id}-${digest.slice(0, 16)}`

const ownsSlot = (state: VersionState): boolean =>
  state === "loading" || state === "published" || state === "retired" || state === "reclaiming" ||
  state === "unconfirmed" || state === "fatal"

const refuse = (reason: LoraRegistryReason, detail: string, holders?: ReadonlyArray<string>): LoraRegistryError =>
  new LoraRegistryError({ reason, detail, ...(holders === undefined ? {} : { holders }) })

/**
 * The registry of one run. Operations return the new value or a {@link LoraRegistryError}; a refused one changes
 * nothing.
 */
export class Registry {
  readonly epoch: string
  readonly prefix: string
  readonly capacity: number
  private readonly versions = new Map<number, Version>()
  private readonly byDigest = new Map<string, number>()
  private readonly bindings = new Map<string, number>()
  private readonly tombstones = new Set<string>()
  private defaultId: number | undefined = undefined
  private revisionCount = 0
  private nextId = 1

  constructor(options: RegistryOptions) {
    this.epoch = options.epoch
    this.prefix = options.prefix ?? defaultPrefix
    this.capacity = options.capacity ?? defaultCapacity
  }

  /** The version new Sessions bind; undefined before the first commit. */
  get default(): Version | undefined {
    return this.defaultId === undefined ? undefined : this.versions.get(this.defaultId)
  }

  /** How many times the default moved. */
  get revision(): number {
    return this.revisionCount
  }

  /** Every version, by id. */
  all(): ReadonlyArray<Version> {
    return [...this.versions.values()].sort((a, b) => a.id - b.id)
  }

  version(id: number): Version | undefined {
    return this.versions.get(id)
  }

  /** The versions owning a slot (engine resources): what the capacity counts. */
  live(): ReadonlyArray<Version> {
    return this.all().filter((v) => ownsSlot(v.state))
  }

  /** The Sessions bound to each version that has any, by version id. */
  boundSessions(): ReadonlyMap<number, ReadonlyArray<string>> {
    const out = new Map<number, Array<string>>()
    for (const [session, id] of this.bindings) {
      const list = out.get(id)
      if (list === undefined) out.set(id, [session])
      else list.push(session)
    }
    return out
  }

  /** The version `session` is bound to, if any. */
  bindingOf(session: string): Version | undefined {
    const id = this.bindings.get(session)
    return id === undefined ? undefined : this.versions.get(id)
  }

  /**
   * Begin publishing the adapter with `digest` (as version `id` when the caller numbers versions). See the module's
   * rules: idempotent by digest, a failed version retried with the next attempt, capacity and one publication at a
   * time.
   */
  publish(digest: string, id?: number): Publication | LoraRegistryError {
    if (id !== undefined && (!Number.isSafeInteger(id) || id <= 0)) {
      return refuse("invalid-version", `a LoRA version must be a positive integer, not ${id}`)
    }
    if (!/^[0-9a-f]{16,}$/.test(digest)) {
      return refuse(
        "invalid-digest",
        `a LoRA adapter digest must be at least 16 lower-case hex digits (a SHA-256), not ${JSON.stringify(digest)}`
      )
    }
    const knownId = this.byDigest.get(digest)
    if (id !== undefined) {
      const existing = this.versions.get(id)
      if (existing !== undefined && existing.digest !== digest) {
        return refuse(
          "version-conflict",
          `LoRA version ${id} was published with digest ${existing.digest}, not ${digest}: a version names one content`
        )
      }
    }
    const known = knownId === undefined ? undefined : this.versions.get(knownId)
    if (known !== undefined && (id === undefined || id === known.id)) {
      if (known.state === "loading") return { _tag: "Loading", version: known }
      if (known.state !== "failed") return { _tag: "NoOp", version: known }
      const checked = this.checkNew()
      if (checked !== undefined) return checked
      return { _tag: "Loading", version: this.put({ ...known, ...this.freshAttempt(known.attempt + 1) }) }
    }
    if (known !== undefined && id !== undefined) {
      return refuse(
        "version-conflict",
        `the adapter with digest ${digest} is LoRA version ${known.id} already, not ${id}`
      )
    }
    const checked = this.checkNew()
    if (checked !== undefined) return checked
    const newId = id ?? this.nextId
    this.nextId = Math.max(this.nextId, newId + 1)
    this.byDigest.set(digest, newId)
    return {
      _tag: "Loading",
      version: this.put({
        id: newId,
        digest,
        name: nameOf(this.prefix, this.epoch, newId, digest),
        ...this.freshAttempt(1)
      })
    }
  }

  /** Worker `worker` loaded the current attempt of version `id`. */
  loaded(id: number, attempt: number, worker: string): Version | LoraRegistryError {
    const version = this.current(id, attempt)
    if (version instanceof LoraRegistryError) return version
    if (version.state !== "loading") {
      return refuse("attempt-conflict", `LoRA version ${id} is ${version.state}, not loading`)
    }
    return this.put({ ...version, loadedOn: new Set([...version.loadedOn, worker]) })
  }

  /**
   * Make version `id` the default: every worker of `fleet` must have loaded it, and the default must not have moved
   * since the attempt began. The old default is retired (it keeps serving its Sessions). Committing a version already
   * committed returns it unchanged.
   */
  commit(id: number, attempt: number, fleet: ReadonlyArray<string>): Version | LoraRegistryError {
    const version = this.current(id, attempt)
    if (version instanceof LoraRegistryError) return version
    if (version.state !== "loading") {
      return version.state === "failed" || version.state === "fatal"
        ? refuse("attempt-conflict", `LoRA version ${id} failed; publish it again`)
        : version
    }
    const missing = fleet.filter((worker) => !version.loadedOn.has(worker))
    if (missing.length > 0 || fleet.length === 0) {
      return refuse(
        "not-ready",
        `LoRA version ${id} is not loaded on ${missing.length > 0 ? missing.join(", ") : "any worker"}`
      )
    }
    if (version.baseRevision !== this.revisionCount) {
      return refuse(
        "revision-conflict",
        `the default LoRA version moved while version ${id} was loading (revision ${version.baseRevision} → ` +
          `${this.revisionCount})`
      )
    }
    const previous = this.default
    if (previous !== undefined) this.put({ ...previous, state: "retired" })
    this.defaultId = id
    this.revisionCount++
    return this.put({ ...version, state: "published" })
  }

  /** The load of version `id` failed cleanly (every worker confirmed it is gone): retryable, its slot freed. */
  failed(id: number, attempt: number): Version | LoraRegistryError {
    const version = this.current(id, attempt)
    if (version instanceof LoraRegistryError) return version
    if (version.state !== "loading") {
      return refuse("attempt-conflict", `LoRA version ${id} is ${version.state}, not loading`)
    }
    return this.put({ ...version, state: "failed" })
  }

  /**
   * The load of version `id` failed and a worker may still hold it: the slot stays counted and every later
   * publication is refused (`publication-blocked`) — the run cannot tell what the engines hold.
   */
  fatal(id: number): Version | LoraRegistryError {
    const version = this.versions.get(id)
    if (version === undefined) return refuse("unknown-version", `no LoRA version ${id}`)
    return this.put({ ...version, state: "fatal" })
  }

  /** Bind `session` to the default (sticky: a bound Session gets its version again). */
  bind(session: string): Version | LoraRegistryError {
    const bound = this.bindingOf(session)
    if (bound !== undefined) return bound
    if (this.tombstones.has(session)) {
      return refuse("session-closed", `Session ${session} was closed before its first model request bound a version`)
    }
    const current = this.default
    if (current === undefined) {
      return refuse(
        "no-published-version",
        "no LoRA version is published yet: the trainer publishes one (PublishAdapter) before Sessions generate"
      )
    }
    this.bindings.set(session, current.id)
    return current
  }

  /** `session` ended: tombstone it and drop its binding. Returns whether it was bound. Idempotent. */
  release(session: string): boolean {
    this.tombstones.add(session)
    return this.bindings.delete(session)
  }

  /** Drop the tombstones of `sessions` (their Group is gone), all or none: a bound one refuses the whole call. */
  forget(sessions: ReadonlyArray<string>): undefined | LoraRegistryError {
    const bound = sessions.filter((s) => this.bindings.has(s))
    if (bound.length > 0) {
      return refuse("session-still-bound", `Sessions still bound to a LoRA version: ${bound.join(", ")}`)
    }
    for (const s of sessions) this.tombstones.delete(s)
    return undefined
  }

  /**
   * The next version to unload (RECLAIMING), handed out once: the lowest retired version no Session holds, else the
   * lowest version whose unload was not confirmed (tried again). Undefined when there is none.
   */
  claimReclaimable(): Version | undefined {
    const held = new Set(this.bindings.values())
    const all = this.all()
    const next = all.find((v) => v.state === "retired" && !held.has(v.id)) ??
      all.find((v) => v.state === "unconfirmed")
    return next === undefined ? undefined : this.put({ ...next, state: "reclaiming" })
  }

  /** Every worker unloaded version `id`: RECLAIMED, its slot freed. Idempotent. */
  reclaimed(id: number): Version | LoraRegistryError {
    const version = this.versions.get(id)
    if (version === undefined) return refuse("unknown-version", `no LoRA version ${id}`)
    if (version.state === "reclaimed") return version
    if (version.state !== "reclaiming") {
      return refuse(
        "reclaim-ambiguous",
        `LoRA version ${id} is ${version.state}: only a claimed reclaim can be confirmed` +
          (version.state === "unconfirmed" ? " (its unload was not confirmed; a later reclaim tries it again)" : "")
      )
    }
    return this.put({ ...version, state: "reclaimed" })
  }

  /** A worker did not confirm unloading version `id`: its slot stays counted (UNCONFIRMED) until a retry confirms it. */
  reclaimUnconfirmed(id: number): Version | LoraRegistryError {
    const version = this.versions.get(id)
    if (version === undefined) return refuse("unknown-version", `no LoRA version ${id}`)
    if (version.state !== "reclaiming") {
      return refuse("reclaim-ambiguous", `LoRA version ${id} is ${version.state}, not being reclaimed`)
    }
    return this.put({ ...version, state: "unconfirmed" })
  }

  private current(id: number, attempt: number): Version | LoraRegistryError {
    const version = this.versions.get(id)
    if (version === undefined) return refuse("unknown-version", `no LoRA version ${id}`)
    if (version.attempt !== attempt) {
      return refuse(
        "attempt-conflict",
        `LoRA version ${id} is at attempt ${version.attempt}; attempt ${attempt} is stale`
      )
    }
    return version
  }

  /** Refusals of a new LOADING entry: a fatal failure, the capacity, another publication in progress. */
  private checkNew(): LoraRegistryError | undefined {
    const all = this.all()
    const fatal = all.find((v) => v.state === "fatal")
    if (fatal !== undefined) {
      return refuse(
        "publication-blocked",
        `LoRA version ${fatal.id} (${fatal.name}) failed in a way the engines may still hold it; restart the run`
      )
    }
    const owners = all.filter((v) => ownsSlot(v.state))
    if (owners.length >= this.capacity) {
      const bound = this.boundSessions()
      const blocking = owners.filter((v) => v.state !== "published" && v.state !== "loading")
      const holders = blocking.flatMap((v) => bound.get(v.id) ?? [])
      const what = blocking.map((v) =>
        v.state === "unconfirmed"
          ? `${v.name} (an unload not confirmed by every worker)`
          : `${v.name} (${(bound.get(v.id) ?? []).length} Session(s))`
      )
      return refuse(
        "capacity",
        `${owners.length} LoRA versions already own engine resources (capacity ${this.capacity}): ` +
          (what.length > 0 ? `waiting for ${what.join(", ")}` : "none can be reclaimed") +
          (holders.length > 0 ? `; held by Sessions ${holders.join(", ")}` : ""),
        holders
      )
    }
    const loading = all.find((v) => v.state === "loading")
    if (loading !== undefined) {
      return refuse("publication-in-progress", `LoRA version ${loading.id} is still being published`)
    }
    return undefined
  }

  private freshAttempt(attempt: number) {
    return { state: "loading" as const, attempt, loadedOn: new Set<string>(), baseRevision: this.revisionCount }
  }

  private put(version: Version): Version {
    this.versions.set(version.id, version)
    return version
  }
}
