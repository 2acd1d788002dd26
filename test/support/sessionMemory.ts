/**
 * Retained memory per stored token of many Sessions after their turns through the generation core (the embedded
 * engine, its per-Session prefix cache included): the workload of the memory guard (test/forest/MemoryBudget.e2e.test.ts)
 * and of `sessionMemoryProbe.ts`.
 *
 * **Details**
 * Each Session sends the `sessions` benchmark's first turn (a ~2 KB, 6-message history, 356 tokens) and then, with the
 * answer and one more user message, a second turn. Bytes are `heapUsed + external` after forced full collections,
 * taken on a later turn of the event loop (a `WeakRef` target stays alive until the job that made it ends), from
 * after 50 warm-up Sessions (compiled and optimized code left out) and the Sessions' empty forests to after the
 * turns, as the `sessions` benchmark counts a first turn's bytes. Run in a process of its own (`sessionMemoryProbe.ts`).
 */
import { Context, Effect, Layer, Result } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import * as Conversation from "../bench/conversation.ts"
import * as SupportSessions from "./sessions.ts"

export interface SessionMemory {
  readonly sessions: number
  readonly storedTokens: number
  readonly bytes: number
  readonly bytesPerToken: number
}

const HISTORY = Conversation.conversation(6, 300)
const WARM_UP = 50

const request = (messages: ReadonlyArray<unknown>) => {
  const decoded = Chat.adapter.decode({ model: "memory", messages, max_tokens: 16 })
  if (Result.isFailure(decoded)) throw new Error(`workload request does not decode: ${decoded.failure.message}`)
  return decoded.success
}

const stack = Layer.mergeAll(Generation.Generation.layer(), Sessions.Sessions.layer).pipe(
  Layer.provideMerge(Forests.Forests.layer),
  Layer.provideMerge(
    EmbeddedEngine.EmbeddedEngine.layer({
      ...EmbeddedEngine.EmbeddedEngine.instant,
      policy: (r) => (r.messages[r.messages.length - 1]?.role === "assistant" ? "?" : "ok")
    })
  ),
  Layer.provideMerge(Tokenizer.Tokenizer.layer),
  Layer.provide(FairScheduler.layer())
)

/**
 * `sessions` Sessions of two turns each; what they retain per stored token. `atMeasure` runs right after each of the
 * two measurements ("before", "after"): the probe writes heap snapshots there.
 */
export const measure = (
  sessions: number,
  gc: () => void,
  atMeasure: (at: "before" | "after") => void = () => {}
): Promise<SessionMemory> => {
  const settled = Effect.promise(async () => {
    // A later turn of the loop first: objects a WeakRef was made to or dereferenced in this job are kept until it ends.
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    gc()
    const usage = process.memoryUsage()
    return usage.heapUsed + usage.external
  })
  const first = request(HISTORY)
  const second = request([...HISTORY, { role: "assistant", content: "ok" }, {
    role: "user",
    content: Conversation.text(7, 300)
  }])
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(stack)
    const generation = Context.get(context, Generation.Generation)
    const forests = Context.get(context, Forests.Forests)
    const converse = (id: string) =>
      Effect.gen(function*() {
        const entry = SupportSessions.sessionEntry(id, { sampling: SupportSessions.sampling({ maxNewTokens: 16 }) })
        yield* generation.generate(entry, first)
        yield* generation.generate(entry, second)
        return yield* forests.get(id)
      })
    // Warm-up Sessions: the code of the path compiled and optimized before the measurement.
    for (let i = 0; i < WARM_UP; i++) {
      yield* forests.create(`warm-up${i}`)
      yield* converse(`warm-up${i}`)
    }
    const ids = Array.from({ length: sessions }, (_, i) => `s${i}`)
    // The Sessions' empty forests are the registry's (the `sessions` benchmark counts them apart).
    yield* Effect.forEach(ids, (id) => forests.create(id), { discard: true })
    const before = yield* settled
    atMeasure("before")
    const held = yield* Effect.forEach(ids, converse)
    const after = yield* settled
    atMeasure("after")
    let storedTokens = 0
    for (const forest of held) {
      for (const leaf of Forest.leaves(forest)) storedTokens += Forest.trainTokenCount(forest, leaf)
    }
    return { sessions, storedTokens, bytes: after - before, bytesPerToken: (after - before) / storedTokens }
  })))
}
