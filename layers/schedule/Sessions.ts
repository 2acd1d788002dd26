/**
 * The registry of live Sessions, shared by the gateway (which authenticates every request by session id) and the
 * Group pool (which registers Sessions and decides when their Group holds a Runtime lease).
 *
 * **Details**
 * Session ids are 128-bit random hex strings; they double as the agent's API key. Lookups go through the SHA-256 of the
 * presented token, so the time a lookup takes does not depend on how much of a guessed id matches a real one.
 * A closed Session stays known as closed (404 "finished") instead of disappearing, so a late request gets a clear answer;
 * only the most recently closed ones are remembered (`closedMemory`), so a long run does not grow the registry forever.
 * The live Sessions are the gauge `relax_agentic_sessions_active` (docs/observability.md).
 */
import { Context, Data, Effect, Layer, type Tracer } from "effect"
import { hash, randomBytes } from "node:crypto"
import type * as Drift from "../../src/forest/Drift.ts"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import * as SessionError from "../../src/session/SessionError.ts"
import type * as Engine from "../engine/Engine.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as GenerationGate from "./GenerationGate.ts"

/** Counters the generation core keeps per Session, read by telemetry and debug dumps. */
export interface SessionCounters {
  requests: number
  generations: number
  aborts: number
  parserFailures: number
  droppedToolCalls: number
  toleratedMatches: number
  /** Request id → tool calls the parser dropped or could not read in it; made on the first such request. */
  parserFailedRequests?: Map<string, number> | undefined
  /** Requests whose echoed history diverged from a committed response, by cause; made on the first such request. */
  drift?: Map<Drift.Cause, number> | undefined
  /** Milliseconds its attempts waited for KV room (admission); set on the first wait. */
  admissionWaitMs?: number | undefined
}

export interface SessionEntry {
  readonly sessionId: string
  readonly groupId: string
  readonly mode: AgentSpec.RolloutMode
  /** Sampling from the rollout configuration (request temperature/top_p are ignored). */
  readonly sampling: Engine.SamplingParams
  /** Training-lineage token limit (`--rollout-max-context-len` / eval's); undefined = unlimited. */
  readonly maxContextLen: number | undefined
  /** The rollout step this Session's generations are recorded under. */
  readonly rolloutId: () => number
  /**
   * Called by the generation core on every model request before generating: the first call counts toward the Group's
   * first-request barrier; the effect completes once the Group holds its Runtime lease (at once when unscheduled).
   */
  readonly awaitLease: Effect.Effect<void, SessionError.SessionClosedError>
  /**
   * Whether `awaitLease` would succeed now without doing anything (this Session has arrived at its barrier and its
   * Group holds the lease), so the generation core can skip it; `undefined` or `false`: run `awaitLease`.
   */
  readonly leaseHeld?: (() => boolean) | undefined
  /**
   * The training generation gate (`--partial-rollout` / `--fully-async`): every backend attempt of this Session runs
   * through it, so a step's close can abort and park it. Absent (always open) for Eval and synchronous rollouts.
   */
  readonly gate?: GenerationGate.SessionGate | undefined
  /**
   * With KV admission on: an attempt's demand from its prompt tokens (training prefix + pending output), with the
   * Session's scope and budget hooks (layers/admission/AdmittedEngine.ts). Absent: attempts are not admitted.
   */
  readonly admission?: ((promptTokens: number) => Engine.AdmissionDemand) | undefined
  readonly counters: SessionCounters
  /**
   * The Session's span (`SessionRunner.session`): each model request's trace (root `Gateway.handle`) links to it
   * (docs/observability.md). Absent for Sessions registered without one (tests).
   */
  readonly span?: Tracer.AnySpan | undefined
}

export class UnknownSessionError extends Data.TaggedError("UnknownSessionError")<{}> {
  override get message() {
    return "Unknown session. Use RELAX_SESSION_ID as the API key (Authorization: Bearer <RELAX_SESSION_ID>)."
  }
}

export interface SessionsShape {
  /** A fresh 128-bit random session id (32 hex characters). */
  readonly newSessionId: Effect.Effect<string>
  readonly register: (entry: SessionEntry) => Effect.Effect<void>
  /** The live Session for a presented API key. */
  readonly lookup: (token: string) => Effect.Effect<SessionEntry, UnknownSessionError | SessionError.SessionClosedError>
  /**
   * Whether a live Session has this id, answered at once (cluster mode: a runner's gateway decides in Node's request
   * callback whether to relay a request to another runner).
   */
  readonly holds: (token: string) => boolean
  /** Mark the Session finished: later requests get `SessionClosedError`. */
  readonly close: (sessionId: string) => Effect.Effect<void>
  /** Forget a finished Session entirely (after its results are exported). */
  readonly remove: (sessionId: string) => Effect.Effect<void>
}

// One-shot: no Hash object a request (the lookup runs on every model request).
const digest = (token: string): string => hash("sha256", token, "hex")

export const emptyCounters = (): SessionCounters => ({
  requests: 0,
  generations: 0,
  aborts: 0,
  parserFailures: 0,
  droppedToolCalls: 0,
  toleratedMatches: 0
})

/** How many closed Sessions `make` remembers as closed (about 10 MB of digests at most). */
export const DefaultClosedMemory = 100_000

/** A registry that remembers the last `closedMemory` closed Sessions; older ones become unknown. */
export const makeWith = (options: { readonly closedMemory: number }): Effect.Effect<SessionsShape> =>
  // The gauge is exported from the start (at 0), so a dashboard has the series before the first Session.
  Effect.andThen(
    Instruments.move(Instruments.sessionsActive, 0),
    Effect.sync((): SessionsShape => {
      const live = new Map<string, SessionEntry>()
      // Insertion-ordered: the oldest closed Session is forgotten first.
      const closed = new Set<string>()
      return {
        newSessionId: Effect.sync(() => randomBytes(16).toString("hex")).pipe(Effect.withSpan("Sessions.newSessionId")),
        register: Effect.fn("Sessions.register")(function*(entry) {
          const key = digest(entry.sessionId)
          closed.delete(key)
          if (!live.has(key)) yield* Instruments.move(Instruments.sessionsActive, 1)
          live.set(key, entry)
        }),
        holds: (token) => live.has(digest(token)),
        // A step made when it runs (one primitive and its result without a tracer): it runs on every model request.
        lookup: (token) =>
          StepSpan.stepOf("Sessions.lookup", () => {
            const key = digest(token)
            const entry = live.get(key)
            if (entry !== undefined) return Effect.succeed(entry)
            return Effect.fail(
              closed.has(key) ? new SessionError.SessionClosedError({ sessionId: token }) : new UnknownSessionError()
            )
          }),
        close: Effect.fn("Sessions.close")(function*(sessionId) {
          const key = digest(sessionId)
          if (!live.delete(key)) return
          yield* Instruments.move(Instruments.sessionsActive, -1)
          closed.add(key)
          for (const oldest of closed) {
            if (closed.size <= options.closedMemory) break
            closed.delete(oldest)
          }
        }),
        remove: Effect.fn("Sessions.remove")(function*(sessionId) {
          const key = digest(sessionId)
          if (live.delete(key)) yield* Instruments.move(Instruments.sessionsActive, -1)
          closed.delete(key)
        })
      }
    })
  )

export const make: Effect.Effect<SessionsShape> = makeWith({ closedMemory: DefaultClosedMemory })

export class Sessions extends Context.Service<Sessions, SessionsShape>()("relax-agentic/Sessions") {
  static readonly layer: Layer.Layer<Sessions> = Layer.effect(Sessions, make)
}
