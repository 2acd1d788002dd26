/**
 * The production combination end to end: a controller (`serve --cluster-database-url` with the trainer RPC), two
 * `relax-agentic runner` processes on `--engine sglang --sglang-router-url`, real agents
 * (test/fixtures/cluster/steps.mjs) and two fake SGLang workers behind the fake router (test/support/FakeSglang.ts:
 * the runners read the worker list from the router). An `UpdateWeights` between the Sessions' first and second turns
 * reaches every worker through every runner, and the samples' tokens are the workers' own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import { makeRpcClient } from "../../src/index.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as Processes from "./processes.ts"

/** The members' flags: the trainer test's gated agent, on SGLang through the router instead of the embedded engine. */
const flags = (ctrl: string, router: string) =>
  Processes.memberFlags({
    agent: "steps.mjs",
    agentEnv: [`CTRL_DIR=${ctrl}`],
    policy: "cluster",
    sglang: { router },
    maxResponseLen: 24,
    labelKey: "label",
    batchSize: 4,
    seed: 7,
    // Each request carries its sampling seed, so the test can generate it again (below).
    extra: ["--agent-timeout", "300", "--sglang-enable-deterministic-inference"]
  })

const marked = (ctrl: string, suffix: string) => Fs.readdirSync(ctrl).filter((f) => f.endsWith(`.${suffix}`))

const decodeGenerate = Schema.decodeUnknownSync(SglangWire.GenerateRequest)

describe("cluster on SGLang behind a router (end to end)", () => {
  it.live(
    "UpdateWeights mid-step reaches every worker through every runner; the step completes, no Group dropped, tokens the workers'",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const model = yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, {
          ...EmbeddedEngine.EmbeddedEngine.instant,
          seed: 1,
          // Every turn runs to its length: an end of turn drawn first would be an empty assistant message (a 500 and
          // a dropped Group by the gateway's rule, test/generation), which is not what this test is about.
          model: { eosProbability: 0 }
        })
        const workers = yield* Effect.forEach([1, 2], () =>
          FakeSglang.make({ engine: model, tokenize: tokenizer.encode }))
        const router = yield* FakeSglang.make({
          routeTo: workers.map((w) =>
            w.url
          )
        })
        const db = yield* EmbeddedPg.start
        const work = yield* Processes.workDir("relax-cluster-sglang-")
        const ctrl = Path.join(work, "ctrl")
        Fs.mkdirSync(ctrl)
        const clusterFlags = Processes.clusterFlags(db.url)
        // A free port each (the runners' connections to the router and the workers take ephemeral ports too).
        const ports = yield* Effect.forEach([1, 2], () => EmbeddedPg.freePort)
        const runners = yield* Effect.forEach(ports, (port) =>
          Processes.runner([...flags(ctrl, router.url), ...clusterFlags, ...Processes.runnerAt(port)]), {
          concurrency: "unbounded"
        })
        const served = yield* Processes.start([
          "serve",
          ...flags(ctrl, router.url),
          ...clusterFlags,
          "--rpc-port",
          "0"
        ])
        const url = (yield* Processes.waitFor(served, /listening on (http:\/\/\S+\/rpc)/))[1]!
        const client = yield* makeRpcClient({ url })

        Fs.writeFileSync(Path.join(ctrl, "gated"), "")
        const step = yield* Effect.forkChild(client.Step({ rolloutId: 0 }))
        // Every Session has had its first turn; the update reaches them between turns, on whichever runner.
        const firstTurns = () =>
          marked(ctrl, "first").length >= 8
        yield* Processes.until(Processes.byName(served, runners), "the 8 agents' first turns", 150, firstTurns)
        assert.strictEqual((yield* client.UpdateWeights({ version: "w1" })).weightVersion, "w1")
        Fs.writeFileSync(Path.join(ctrl, "go1"), "")
        Fs.writeFileSync(Path.join(ctrl, "go2"), "")
        const result = yield* Fiber.join(step)

        assert.strictEqual(result.samples.length, 8)
        assert.strictEqual(result.metrics["rollout/groups_dropped"], 0, served.output().slice(-3000))
        // The first turns ran on the workers' initial weights, the two after the update on the new ones.
        for (const sample of result.samples) {
          assert.deepStrictEqual(sample.weight_versions, ["default", "w1", "w1"])
        }
        // Every worker the router lists was relabelled (SGLang's servers are shared: the controller's engine relabels
        // them for every runner, layers/cluster/HostFleet.ts).
        for (const worker of workers) {
          assert.strictEqual(worker.weightVersion(), "w1")
          assert.isTrue(
            worker.requests.some((r) =>
              r.path === "/update_weight_version"
            ),
            worker.url
          )
        }
        // The runners held the Sessions (none ran on the controller).
        const sessions = new Set(result.samples.map((s) => s.session_id))
        assert.sameMembers([...new Set(runners.flatMap(Processes.hostedBy).filter((s) => sessions.has(s)))], [
          ...sessions
        ])

        // Token-consistent: each turn of a sample is the answer a worker gave to a request for exactly the sample's
        // tokens before it: generating that request again on the workers' model gives the turn's tokens and logprobs.
        // (A Group's Sessions send the same first prompt with their own sampling seeds: one of those requests is it.)
        const generates = workers.flatMap((w) => w.requests.filter((r) => r.path === "/generate")).map((r) =>
          decodeGenerate(r.body)
        )
        const regenerate = (request: SglangWire.GenerateRequest) =>
          model.generate(FakeSglang.engineRequest(model, request, request.input_ids, `again-${request.rid}`))
        for (const sample of result.samples) {
          assert.lengthOf(sample.turn_spans, 3)
          const promptLength = sample.tokens.length - sample.response_length
          for (const [start, end] of sample.turn_spans) {
            const before = JSON.stringify(sample.tokens.slice(0, promptLength + start))
            const turn = {
              tokens: sample.tokens.slice(promptLength + start, promptLength + end),
              logprobs: sample.rollout_log_probs.slice(start, end)
            }
            const answers = yield* Effect.forEach(
              generates.filter((g) => JSON.stringify(g.input_ids) === before),
              (request) =>
                Effect.map(regenerate(request), (again) => ({
                  tokens: [...again.outputIds],
                  logprobs: [...again.logprobs]
                }))
            )
            assert.isNotEmpty(answers, `${sample.session_id}: no worker saw the input of its turn at ${start}`)
            assert.deepInclude(answers, turn, `${sample.session_id}: turn at ${start} is no worker's answer`)
            assert.deepStrictEqual(sample.loss_mask.slice(start, end), turn.tokens.map(() => 1))
          }
        }
        yield* client.Shutdown({})
        assert.strictEqual(yield* served.exited, 0, served.output().slice(-3000))
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(Tokenizer.Tokenizer.layer))),
    600_000
  )
})
