/**
 * The SGLang double (test/support/FakeSglang.ts) as most SGLang tests run it: on the embedded model, instant, with the
 * bundled tokenizer for its `/tokenize`.
 */
import { Effect } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as FakeSglang from "./FakeSglang.ts"

/**
 * A worker generating with an instant embedded model of `model`'s settings (its seed, at least), and the model itself
 * (for a test that generates a request again); `options` set the rest of the double.
 */
export const instantWorker = (
  model: EmbeddedEngine.EmbeddedEngineOptions & { readonly seed: number },
  options: Omit<FakeSglang.FakeSglangOptions, "engine" | "tokenize"> = {}
) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const engine = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
      ...EmbeddedEngine.EmbeddedEngine.instant,
      ...model
    })
    const worker = yield* FakeSglang.make({ engine, tokenize: tokenizer.encode, ...options })
    return { model: engine, worker }
  })
