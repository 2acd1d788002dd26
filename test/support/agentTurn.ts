/**
 * One model request of an in-process test agent: its conversation so far, canonicalized, through the generation core
 * (Chat Completions semantics, no tools, not streamed).
 */
import { Effect, Result } from "effect"
import type { GenerationShape } from "../../layers/generation/Generation.ts"
import type { SessionEntry } from "../../layers/schedule/Sessions.ts"
import * as Canonical from "../../src/protocol/canonical.ts"

export const agentTurn = (
  generation: GenerationShape,
  entry: SessionEntry,
  messages: ReadonlyArray<unknown>,
  maxTokens?: number
) =>
  Effect.gen(function*() {
    const state = Canonical.canonicalize({ messages, tools: [], chat_template_kwargs: {} })
    if (Result.isFailure(state)) return yield* Effect.die(state.failure)
    return yield* generation.generate(entry, {
      state: state.success,
      model: "m",
      stream: false,
      stop: [],
      logprobs: false,
      toolCallIdPrefix: "call_",
      ...(maxTokens === undefined ? {} : { maxTokens })
    })
  })
