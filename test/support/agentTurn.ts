/**
 * One model request of an in-process test agent: its conversation so far, canonicalized, through the generation core
 * (Chat Completions semantics, no tools, not streamed).
 */
import { Effect } from "effect"
import type * as Generation from "../../layers/generation/Generation.ts"
import type * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Requests from "./requests.ts"

export const agentTurn = (
  generation: Generation.GenerationShape,
  entry: Sessions.SessionEntry,
  messages: ReadonlyArray<unknown>,
  maxTokens?: number
) =>
  Effect.gen(function*() {
    return yield* generation.generate(
      entry,
      Requests.canonicalRequest({ messages }, maxTokens === undefined ? {} : { maxTokens })
    )
  })

/**
 * `turns` model turns of a test agent's conversation that starts at `messages`: each answer is followed by "Check your
 * answer." After each turn `afterTurn` runs (the test's fault for that turn: it may fail, or never end).
 */
export const checkedTurns = <E = never>(
  generation: Generation.GenerationShape,
  entry: Sessions.SessionEntry,
  messages: ReadonlyArray<unknown>,
  turns: number,
  afterTurn: (turn: number) => Effect.Effect<void, E> = () => Effect.void
) =>
  Effect.gen(function*() {
    const conversation = [...messages]
    for (let turn = 0; turn < turns; turn++) {
      const completion = yield* agentTurn(generation, entry, conversation)
      conversation.push({ role: "assistant", content: completion.content }, {
        role: "user",
        content: "Check your answer."
      })
      yield* afterTurn(turn)
    }
  })
