/**
 * The real gateway over the generation core and the embedded engine playing the scripted gateway policy
 * (test/fixtures/gateway/policy.ts: think, call `calc`, answer), parsed with qwen25 tool calls and qwen3 reasoning.
 */
import { Layer } from "effect"
import { EmbeddedEngine } from "../../layers/engine/EmbeddedEngine.ts"
import { Gateway, type GatewayOptions } from "../../layers/gateway/Gateway.ts"
import { Forests } from "../../layers/generation/Forests.ts"
import { Generation } from "../../layers/generation/Generation.ts"
import { Sessions } from "../../layers/schedule/Sessions.ts"
import { Tokenizer } from "../../layers/tokenizer/Tokenizer.ts"
import * as Parsers from "../../src/parsers/registry.ts"
import { policy } from "../fixtures/gateway/policy.ts"
import * as Results from "./results.ts"

/** Everything the gateway stands on: the generation core, its forests, the Sessions, the engine and the tokenizer. */
export const generationStack = Generation.layer({
  toolCallParser: Results.success(Parsers.ToolCallParsers.get("qwen25")),
  reasoningParser: Results.success(Parsers.ReasoningParsers.get("qwen3"))
}).pipe(
  Layer.provideMerge(Forests.layer),
  Layer.provideMerge(Sessions.layer),
  Layer.provideMerge(EmbeddedEngine.layer({ ...EmbeddedEngine.instant, policy })),
  Layer.provideMerge(Tokenizer.layer)
)

/** The gateway on {@link generationStack}. */
export const gatewayStack = (options: GatewayOptions = {}) =>
  Gateway.layer(options).pipe(Layer.provideMerge(generationStack))
