/**
 * The real gateway over the generation core and the embedded engine playing the scripted gateway policy
 * (test/fixtures/gateway/policy.ts: think, call `calc`, answer), parsed with qwen25 tool calls and qwen3 reasoning.
 */
import { Layer } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as Results from "./results.ts"

const embeddedEngine = EmbeddedEngine.EmbeddedEngine.layer({
  ...EmbeddedEngine.EmbeddedEngine.instant,
  policy: Policy.policy
})

/**
 * Everything the gateway stands on: the generation core, its forests, the Sessions, the engine and the tokenizer;
 * `engine` is the embedded engine, or a layer over it (test/support/scriptedEngine.ts `wrapGenerate`).
 */
export const generationStackWith = (
  engine: Layer.Layer<Engine.Engine, never, Engine.Engine> | undefined = undefined
) =>
  Generation.Generation.layer({
    toolCallParser: Results.success(ParserRegistry.ToolCallParsers.get("qwen25")),
    reasoningParser: Results.success(ParserRegistry.ReasoningParsers.get("qwen3"))
  }).pipe(
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(Sessions.Sessions.layer),
    Layer.provideMerge(engine === undefined ? embeddedEngine : engine.pipe(Layer.provideMerge(embeddedEngine))),
    Layer.provideMerge(Tokenizer.Tokenizer.layer)
  )

/** {@link generationStackWith} the embedded engine as it is. */
export const generationStack = generationStackWith()

/** The gateway on {@link generationStack}. */
export const gatewayStack = (options: Gateway.GatewayOptions = {}) =>
  Gateway.Gateway.layer(options).pipe(Layer.provideMerge(generationStack))
