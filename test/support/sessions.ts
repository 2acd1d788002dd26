/**
 * Live-Session fixtures: the `SessionEntry` a test registers with `Sessions` or hands to the generation core.
 */
import { Effect } from "effect"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"

/** Training sampling as the rollout configures it by default: temperature 1, no top-p/top-k cut, no stops. */
export const sampling = (overrides: Partial<Engine.SamplingParams> = {}): Engine.SamplingParams => ({
  maxNewTokens: 64,
  temperature: 1,
  topP: 1,
  topK: -1,
  stop: [],
  stopTokenIds: [],
  ...overrides
})

/** A training Session of Group `g0` in rollout step 0, already leased, with fresh counters; fields overridable. */
export const sessionEntry = (
  sessionId: string,
  overrides: Partial<Sessions.SessionEntry> = {}
): Sessions.SessionEntry => ({
  sessionId,
  groupId: "g0",
  mode: "train",
  sampling: sampling(),
  maxContextLen: undefined,
  rolloutId: () => 0,
  awaitLease: Effect.void,
  counters: Sessions.emptyCounters(),
  ...overrides
})

/** A `sessionEntry` with a fresh random id whose empty SessionForest is created in `Forests`. */
export const sessionWithForest = (overrides: Partial<Sessions.SessionEntry> = {}) =>
  Effect.gen(function*() {
    const sessionId = `s${Math.random().toString(16).slice(2)}`
    yield* (yield* Forests.Forests).create(sessionId)
    return sessionEntry(sessionId, overrides)
  })

/** Register a `sessionEntry` under a fresh id with its empty SessionForest; returns the id (the Session's API key). */
export const registeredSession = (overrides: Partial<Sessions.SessionEntry> = {}) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions.Sessions
    const sessionId = yield* sessions.newSessionId
    yield* (yield* Forests.Forests).create(sessionId)
    yield* sessions.register(sessionEntry(sessionId, overrides))
    return sessionId
  })
