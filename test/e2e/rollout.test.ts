import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import { makeRollout, memorySink, Rollout, type RolloutOptionsInput } from "../../src/index.ts"
import * as TempDir from "../support/TempDir.ts"

const fixtures = resolve(import.meta.dirname, "../fixtures/rollout")

const options = (extra: Partial<RolloutOptionsInput>): RolloutOptionsInput => ({
  promptData: join(fixtures, "train.jsonl"),
  labelKey: "label",
  agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
  agentCwd: fixtures,
  agentTimeout: 60,
  embeddedPolicy: join(fixtures, "policy.mjs"),
  nSamplesPerPrompt: 2,
  rolloutBatchSize: 2,
  rolloutMaxResponseLen: 32,
  ...extra
})

const readJsonl = (path: string): Array<Record<string, unknown>> =>
  readFileSync(path, "utf8").trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)

const numbers = (value: unknown): Array<number> => (Array.isArray(value) ? value.map(Number) : [])

describe("rollout end to end (real agent processes, gateway, embedded engine)", () => {
  it.live("runs two steps with prelaunch and Eval, and writes samples that agree with the forest dump", () => {
    const dir = TempDir.forTest("relax-e2e-")
    const sink = memorySink()
    return Effect.gen(function*() {
      const rollout = yield* Rollout
      const summary = yield* rollout.run
      assert.strictEqual(summary.steps, 2)
      assert.strictEqual(summary.evals, 1)
      for (const rolloutId of [0, 1]) {
        const samples = readJsonl(join(dir, `rollout_${rolloutId}.jsonl`))
        const dump = readJsonl(join(dir, `debug_${rolloutId}.jsonl`))
        assert.strictEqual(samples.length, 4)
        samples.forEach((sample, i) => {
          const tokens = numbers(sample["tokens"])
          const mask = numbers(sample["loss_mask"])
          const logprobs = numbers(sample["rollout_log_probs"])
          const length = Number(sample["response_length"])
          assert.strictEqual(sample["rollout_id"], rolloutId)
          // The command advances the weight version between steps: step N's samples ran on version N.
          assert.deepStrictEqual(new Set(sample["weight_versions"] as Array<string>), new Set([String(rolloutId)]))
          assert.strictEqual(sample["index"], i)
          assert.strictEqual(sample["group_index"], Math.floor(i / 2))
          assert.strictEqual(mask.length, length)
          assert.strictEqual(logprobs.length, length)
          mask.forEach((m, t) => (m === 0 ? assert.strictEqual(logprobs[t], 0) : assert.isAtMost(logprobs[t]!, 0)))
          const spans = sample["turn_spans"] as Array<[number, number]>
          assert.strictEqual(spans.length, 2)
          assert.strictEqual(spans.reduce((n, [s, e]) => n + e - s, 0), mask.filter((m) => m === 1).length)
          for (const [s, e] of spans) assert.isTrue(mask.slice(s, e).every((m) => m === 1))
          // The dump holds the same lineage: same tokens, same leaf, generated-token count per turn.
          const record = dump[i]!
          assert.deepStrictEqual(numbers(record["tokens"]), tokens)
          assert.strictEqual(record["session_id"], sample["session_id"])
          const trace = (sample["metadata"] as Record<string, Record<string, unknown>>)["agentic_trace"]!
          assert.strictEqual(record["leaf_state_hash"], trace["leaf_state_hash"])
          assert.strictEqual(record["turn_count"], 2)
          const turns = record["turns"] as Array<{ response_length: number }>
          assert.deepStrictEqual(turns.map((t) => t.response_length), spans.map(([s, e]) => e - s))
          const kinds = (record["state_hashes"] as Array<{ kind: string }>).map((h) => h.kind)
          assert.deepStrictEqual(kinds.slice(-4), ["obs", "resp", "obs", "resp"])
          assert.isString(sample["prompt"])
          assert.include(String(sample["prompt"]), "What is")
          assert.strictEqual(typeof sample["advantage"], "number")
          assert.strictEqual((sample["metadata"] as Record<string, unknown>)["rollout_mode"], "train")
        })
      }
      const metrics = readJsonl(join(dir, "metrics.jsonl"))
      assert.deepStrictEqual(metrics.map((m) => m["rollout_id"]), [0, 1])
      const evalSamples = readJsonl(join(dir, "eval_2_arith.jsonl"))
      assert.strictEqual(evalSamples.length, 4)
      assert.deepStrictEqual(evalSamples.map((s) => s["index"]), [0, 1, 2, 3])
      assert.isTrue(evalSamples.every((s) => s["advantage"] === null))
      assert.isTrue(evalSamples.every((s) => (s["metadata"] as Record<string, unknown>)["rollout_mode"] === "eval"))
      const lines = sink.captured.lines
      assert.isTrue(
        lines.some((l) =>
          l.startsWith("AGENTIC ROLLOUT event=accounting_start rollout=0 sessions=4 groups=2 final_backfill=False")
        )
      )
      assert.isTrue(
        lines.some((l) => l.startsWith("AGENTIC ROLLOUT event=accounting_end rollout=0 groups=2 rows=4 debt=0"))
      )
      assert.isTrue(
        lines.some((l) => l.startsWith("AGENTIC ROLLOUT event=accounting_end rollout=1 groups=2 rows=4 debt=0"))
      )
      assert.isTrue(lines.some((l) => l.startsWith("First rollout sample: ")))
    }).pipe(
      Effect.provide(makeRollout(
        options({
          numRollout: 2,
          agenticPrelaunch: true,
          agenticConcurrency: 3,
          outputDir: dir,
          saveDebugRolloutData: join(dir, "debug_{rollout_id}.jsonl"),
          evalPromptData: [{ name: "arith", path: join(fixtures, "eval.jsonl") }],
          nSamplesPerEvalPrompt: 2,
          evalInterval: 2,
          skipEvalBeforeTrain: true
        }),
        { telemetry: sink, embedded: EmbeddedEngine.EmbeddedEngine.instant }
      ))
    )
  }, { timeout: 60_000 })

  it.live("drops the Group of a crashing agent and refills the step", () => {
    const sink = memorySink()
    return Effect.gen(function*() {
      const rollout = yield* Rollout
      const step = yield* rollout.runStep(0)
      assert.strictEqual(step.groups.dropped, 1)
      assert.strictEqual(step.groups.accepted, 2)
      assert.strictEqual(step.samples.length, 4)
      assert.isTrue(step.samples.every((s) => !String(s.prompt).includes("1 + 1")))
      const text = sink.captured.lines.join("\n")
      assert.include(text, "Dropping group train:prepare_group_0 because an agent exited before every first IR existed")
      assert.include(text, "error_type=AgentExecutionError\nManaged command agent exited with code 3.")
      assert.include(text, "agent: crashing on purpose before its first request")
      assert.include(sink.captured.lines, "AGENTIC Dropped 1 group")
    }).pipe(Effect.provide(makeRollout(
      options({ promptData: join(fixtures, "crash.jsonl") }),
      { telemetry: sink, embedded: EmbeddedEngine.EmbeddedEngine.instant }
    )))
  }, { timeout: 60_000 })

  it.live(
    "exports several contexts explicitly and credits them with the custom advantage hook",
    () =>
      Effect.gen(function*() {
        const rollout = yield* Rollout
        const step = yield* rollout.runStep(0)
        assert.deepStrictEqual(step.samples.map((s) => s.export_name), ["main", "searcher_0", "main", "searcher_0"])
        const outcomes = step.samples.filter((s) => s.export_name === "main").map((s) => Number(s.metadata["outcome"]))
        const mean = (outcomes[0]! + outcomes[1]!) / 2
        assert.deepStrictEqual(step.samples.map((s) => s.advantage), [
          outcomes[0]! - mean,
          outcomes[0]! * 0.5,
          outcomes[1]! - mean,
          outcomes[1]! * 0.5
        ])
        assert.include(step.samples[1]!.prompt, "Search notes for")
        assert.notStrictEqual(step.microBatches, null)
      }).pipe(Effect.provide(makeRollout(
        options({
          promptData: join(fixtures, "explicit.jsonl"),
          rolloutBatchSize: 1,
          agenticCustomAdvantagePath: join(fixtures, "advantage.mjs"),
          useDynamicBatchSize: true,
          maxTokensPerGpu: 4096
        }),
        { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
      ))),
    { timeout: 60_000 }
  )

  it.live("holds every first request until all Sessions of the Group have sent theirs", () =>
    Effect.gen(function*() {
      const rollout = yield* Rollout
      const step = yield* rollout.runStep(0)
      assert.strictEqual(step.samples.length, 6)
      for (const groupIndex of [0, 1]) {
        const group = step.samples.filter((s) => s.group_index === groupIndex)
        const lastSent = Math.max(...group.map((s) => Number(s.metadata["sent_at"])))
        const firstAnswer = Math.min(...group.map((s) => Number(s.metadata["received_at"])))
        assert.isAtLeast(firstAnswer, lastSent)
      }
    }).pipe(Effect.provide(makeRollout(
      options({ promptData: join(fixtures, "barrier.jsonl"), nSamplesPerPrompt: 3 }),
      { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
    ))), { timeout: 60_000 })

  it.live(
    "answers a request over --rollout-max-context-len with a context-length error the agent can handle",
    () =>
      Effect.gen(function*() {
        const rollout = yield* Rollout
        const step = yield* rollout.runStep(0)
        assert.strictEqual(step.samples.length, 2)
        for (const sample of step.samples) {
          assert.strictEqual(sample.metadata["status"], 400)
          assert.include(String(sample.metadata["context_error"]), "maximum context length")
          assert.strictEqual(sample.turn_spans.length, 1)
        }
      }).pipe(Effect.provide(makeRollout(
        options({ promptData: join(fixtures, "context.jsonl"), rolloutBatchSize: 1, rolloutMaxContextLen: 120 }),
        { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
      ))),
    { timeout: 60_000 }
  )
})
