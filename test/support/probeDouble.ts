/**
 * The SGLang double the conformance probe's tests run against (test/engine/Probe.test.ts, test/cli/probe.e2e.test.ts):
 * SGLang's behaviour but for `overrides`, with requests ~2.6 s long (256 tokens at 100 a second), long past the
 * probe's 300 ms before it aborts or pauses one, even on a loaded machine; two running slots, `/tokenize`, `/metrics`.
 */
import { Effect } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as FakeSglang from "./FakeSglang.ts"

export const probeServer = (overrides: Partial<FakeSglang.FakeSglangOptions>) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
      prefillTokensPerSecond: 0,
      decodeTokensPerSecond: 100,
      seed: 1,
      model: { eosProbability: 0 }
    })
    return yield* FakeSglang.make({
      engine: model,
      tokenize: tokenizer.encode,
      maxRunningRequests: 2,
      enableMetrics: true,
      ...overrides
    })
  })
