import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as SupportSessions from "../support/sessions.ts"

describe("Sessions", () => {
  it.effect("issues 128-bit random ids as 32 lowercase hex characters, never the same twice", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions.Sessions
      const ids = yield* Effect.all(Array.from({ length: 256 }, () => sessions.newSessionId))
      for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/)
      assert.strictEqual(new Set(ids).size, ids.length)
    }).pipe(Effect.provide(Sessions.Sessions.layer)))

  it.effect("finds a registered Session only by its exact id; a near miss is unknown", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions.Sessions
      const id = yield* sessions.newSessionId
      yield* sessions.register(SupportSessions.sessionEntry(id))
      assert.strictEqual((yield* sessions.lookup(id)).sessionId, id)
      const nearMiss = id.slice(0, -1) + (id.endsWith("0") ? "1" : "0")
      const missed = yield* sessions.lookup(nearMiss).pipe(Effect.result)
      assert.isTrue(Result.isFailure(missed) && missed.failure._tag === "UnknownSessionError")
      const prefix = yield* sessions.lookup(id.slice(0, 16)).pipe(Effect.result)
      assert.isTrue(Result.isFailure(prefix) && prefix.failure._tag === "UnknownSessionError")
    }).pipe(Effect.provide(Sessions.Sessions.layer)))

  it.effect("answers a closed Session as closed, and forgets a removed one", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions.Sessions
      const id = yield* sessions.newSessionId
      yield* sessions.register(SupportSessions.sessionEntry(id))
      yield* sessions.close(id)
      const closed = yield* sessions.lookup(id).pipe(Effect.result)
      assert.isTrue(Result.isFailure(closed) && closed.failure._tag === "SessionClosedError")
      yield* sessions.remove(id)
      const removed = yield* sessions.lookup(id).pipe(Effect.result)
      assert.isTrue(Result.isFailure(removed) && removed.failure._tag === "UnknownSessionError")
    }).pipe(Effect.provide(Sessions.Sessions.layer)))

  it.effect("remembers only the most recently closed Sessions, so a long run's registry does not grow", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions.makeWith({ closedMemory: 3 })
      const ids = yield* Effect.all(Array.from({ length: 5 }, () => sessions.newSessionId))
      for (const id of ids) {
        yield* sessions.register(SupportSessions.sessionEntry(id))
        yield* sessions.close(id)
      }
      const tags = yield* Effect.forEach(
        ids,
        (id) =>
          sessions.lookup(id).pipe(Effect.result, Effect.map((r) => Result.isFailure(r) ? r.failure._tag : "live"))
      )
      assert.deepStrictEqual(tags, [
        "UnknownSessionError",
        "UnknownSessionError",
        "SessionClosedError",
        "SessionClosedError",
        "SessionClosedError"
      ])
    }))
})
