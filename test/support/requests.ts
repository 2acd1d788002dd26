/**
 * Canonical requests for tests that call the generation core directly: Chat Completions defaults (model `m`, not
 * streamed, no stops, no logprobs, `call_` tool-call ids), any field overridable.
 */
import * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Results from "./results.ts"

/** The canonical request of a conversation (`messages`, and `tools` when it has any). */
export const canonicalRequest = (
  conversation: { readonly messages: ReadonlyArray<unknown>; readonly tools?: ReadonlyArray<unknown> },
  extra: Partial<Completion.CanonicalRequest> = {}
): Completion.CanonicalRequest => ({
  state: Results.success(Canonical.canonicalize(conversation)),
  model: "m",
  stream: false,
  stop: [],
  logprobs: false,
  toolCallIdPrefix: "call_",
  ...extra
})
