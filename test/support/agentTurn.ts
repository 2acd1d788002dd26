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
