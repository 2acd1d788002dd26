/**
 * Releasing an ended Session's cache on SGLang (`--agentic-session-lifecycle`): `POST /close_session {session_id}` on
 * every worker, and the step's counters.
 *
 * **Details**
 * The whole fan-out of one Session gets 2 seconds (Relax's constant). A failed close is counted
 * (`agentic_kv/session/close_failure`) and logged, never fatal: the server evicts the entries by LRU instead.
 */
import { Effect } from "effect"
import type * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import type * as Engine from "../Engine.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** Closing Sessions, and the counters since the last step. */
export interface SessionClose {
  readonly close: (sessionId: string) => Effect.Effect<void>
  readonly takeStepMetrics: Effect.Effect<Readonly<Record<string, number>>>
}

/** The whole `/close_session` fan-out of one Session gets this long (Relax's constant). */
const closeSessionTimeout = "2 seconds"

/** Session closing, a no-op unless `enabled`. */
export const make = (http: Http.Http, workers: Workers.Workers, enabled: boolean): SessionClose => {
  const closes = { close: 0, failure: 0 }

  const closeOn = (url: string, sessionId: string): Effect.Effect<void, Engine.EngineError> =>
    http.request(url, "/close_session", "POST", { session_id: sessionId } satisfies SglangWire.CloseSessionRequest)
      .pipe(
        Effect.flatMap(Http.ok(url, "/close_session")),
        Effect.asVoid
      )

  const close = (sessionId: string): Effect.Effect<void> =>
    !enabled ? Effect.void : Effect.gen(function*() {
      closes.close++
      const all = yield* workers.controlTargets(false)
      const failed = yield* Effect.forEach(
        all,
        (url) => closeOn(url, sessionId).pipe(Effect.as(0), Effect.catch(() => Effect.succeed(1))),
        { concurrency: "unbounded" }
      ).pipe(
        Effect.map((results) => results.reduce((a, b) => a + b, 0)),
        Effect.timeoutOrElse({ duration: closeSessionTimeout, orElse: () => Effect.succeed(all.length) })
      )
      if (failed > 0) {
        closes.failure++
        yield* Effect.logWarning(
          `close_session: ${failed}/${all.length} call(s) failed for session ${sessionId}; its cache entries ` +
            "fall back to LRU eviction"
        )
      }
    })

  const takeStepMetrics = Effect.sync((): Readonly<Record<string, number>> => {
    if (!enabled) return {}
    const metrics = {
      "agentic_kv/session/lifecycle_enabled": 1,
      "agentic_kv/session/close": closes.close,
      "agentic_kv/session/close_failure": closes.failure
    }
    closes.close = 0
    closes.failure = 0
    return metrics
  })
  return { close, takeStepMetrics }
}
