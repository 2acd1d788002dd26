/**
 * The fake SGLang server (FakeSglang.ts) as a process of its own, so a test can SIGKILL a worker as production loses
 * one: `node test/support/fakeSglangProcess.ts '{"port":0,"decodeTokensPerSecond":50,"seed":1}'` prints
 * `listening <url>` once it serves, and runs until killed. The model is the embedded engine over the bundled Qwen3
 * tokenizer that never ends a turn early (with `seed`, the same model a test builds in its own process to check the
 * tokens).
 */
import { Effect, Layer, Schema } from "effect"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as FakeSglang from "./FakeSglang.ts"

/** What the process is started with (its one argument, as JSON); `decodeTokensPerSecond` 0 is instant. */
const WorkerProcessOptions = Schema.Struct({
  port: Schema.Int,
  seed: Schema.Int,
  decodeTokensPerSecond: Schema.Number
})

const options = Schema.decodeUnknownSync(Schema.fromJsonString(WorkerProcessOptions))(process.argv[2] ?? "{}")

const program = Effect.gen(function*() {
  const tokenizer = yield* Tokenizer.Tokenizer
  const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
    prefillTokensPerSecond: 0,
    decodeTokensPerSecond: options.decodeTokensPerSecond,
    seed: options.seed,
    // Every response runs to its token limit, so a worker killed mid-step has generations in flight.
    model: { eosProbability: 0 }
  })
  const server = yield* FakeSglang.make({ engine: model, tokenize: tokenizer.encode, port: options.port })
  process.stdout.write(`listening ${server.url}\n`)
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer)))

Effect.runFork(program)
