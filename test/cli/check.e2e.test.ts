import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import * as Cli from "../../src/cli.ts"
import * as Capacity from "../../src/schedule/Capacity.ts"
import * as Example from "../support/example.ts"

const root = Example.root
const exampleFlags = Example.flags()

const settingsOf = (argv: ReadonlyArray<string>) =>
  Cli.parseArgs(argv).pipe(
    Effect.flatMap((values) => Cli.settingsFromFlags(values)),
    Effect.provide(NodeServices.layer)
  )

/** `check` run on `argv`: its report, and the report as printed. */
const checked = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const settings = yield* settingsOf(argv)
    const report = yield* Cli.runCheck(settings)
    return { report, text: Cli.renderCheck(report, settings) }
  })

/** One Eval dataset (`test`, 3 samples per prompt) run every step. */
const evalFlags = [
  "--eval-prompt-data",
  "test",
  "eval.jsonl",
  "--n-samples-per-eval-prompt",
  "3",
  "--eval-interval",
  "1"
]

describe("relax-agentic check", () => {
  it.live("passes every launch check for the arithmetic example agent (a real process)", () =>
    Effect.gen(function*() {
      const { report, text } = yield* checked(exampleFlags)
      assert.deepStrictEqual(
        report.requirements.map((r) => [r.name, r.passed]),
        [
          ["accepts the input", true],
          ["calls a supported model endpoint", true],
          ["completes a full run", true],
          ["writes a final result", true],
          ["exits without error", true]
        ],
        text
      )
      // The example policy calls the calculator, then answers: two turns.
      assert.strictEqual(report.turns, 2)
      assert.strictEqual(report.requests, 2)
      assert.include(text, "[PASS] writes a final result: reward {\"score\":")
      assert.include(text, "(--reward-key score)")
      assert.include(text, "All launch checks passed.")
      assert.include(text, "T (agentic_concurrency * n_samples_per_prompt) = 16")
      assert.include(text, "required slots: external_slots >= T = 16")
      assert.include(text, "KV admission: off")
    }))

  it.live("runs a Relax recipe's six admission flags unchanged and prints the admission settings it uses", () =>
    Effect.gen(function*() {
      const { report, text } = yield* checked([
        ...exampleFlags,
        "--agentic-program-admission",
        "--agentic-admission-headroom",
        "0.8",
        "--agentic-admission-pressure-threshold",
        "0.9",
        "--agentic-admission-expected-decode-cap",
        "64",
        "--agentic-admission-max-wait-s",
        "10",
        "--agentic-admission-scope",
        "all"
      ])
      assert.isTrue(report.requirements.every((r) => r.passed), text)
      assert.include(
        text,
        "KV admission: on; headroom 0.8, pressure threshold 0.9, expected decode cap 64 tokens, max wait 10 s, " +
          "scope all; snapshot every 2 s, stale after 6 s"
      )
    }))

  it.live("fails 'writes a final result' when an object reward has no --reward-key", () =>
    Effect.gen(function*() {
      const { report } = yield* checked(exampleFlags.filter((flag) => flag !== "--reward-key" && flag !== "score"))
      const wrote = report.requirements.find((r) => r.name === "writes a final result")
      assert.isFalse(wrote?.passed)
      assert.include(wrote?.detail, "set --reward-key")
    }))

  it.live("reports an agent that crashes before its first request, with its log tail", () =>
    Effect.gen(function*() {
      const { report, text } = yield* checked([
        ...exampleFlags,
        "--agent-cwd",
        Path.join(root, "test", "fixtures", "agents"),
        "--agent-command",
        "bash fail.sh"
      ])
      assert.deepStrictEqual(
        report.requirements.filter((r) => !r.passed).map((r) => r.name),
        [
          "accepts the input",
          "calls a supported model endpoint",
          "completes a full run",
          "writes a final result",
          "exits without error"
        ]
      )
      assert.include(text, "[FAIL] exits without error: Managed command agent exited with code 3.")
      assert.include(text, "tool crashed: boom")
      assert.include(text, "5 launch check(s) failed.")
    }))

  it.live("reports an --embedded-policy it cannot load as a startup error naming the flag (no agent starts)", () =>
    Effect.gen(function*() {
      const policy = Path.join(Example.dir, "no-such-policy.ts#policy")
      const settings = yield* settingsOf([...exampleFlags, "--embedded-policy", policy])
      const error = yield* Effect.flip(Cli.runCheck(settings))
      assert.strictEqual(error._tag, "CheckStartupError")
      assert.include(error.message, "--embedded-policy")
      assert.include(error.message, "no-such-policy.ts")
    }))

  it.effect("computes the capacity table from the flags and warns below --agent-max-slots", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([
        ...exampleFlags,
        ...evalFlags,
        "--agentic-prelaunch",
        "--agent-max-slots",
        "20"
      ])
      const capacity = Cli.capacityOf(settings)
      // T = 4 * 4; C_d = ceil(16 / 3) = 6, E_d = 18; prelaunch keeps train resident: T + E_peak.
      assert.strictEqual(capacity.trainSessions, 16)
      assert.deepStrictEqual(capacity.evals, [{ name: "test", groupSize: 3, concurrency: 6, sessions: 18 }])
      assert.strictEqual(capacity.rule, "T + E_peak")
      assert.strictEqual(capacity.requiredSlots, 34)
      assert.include(capacity.warning, "--agent-max-slots 20 is below the required 34")
    }))

  it.effect("keeps training Sessions resident during Eval with --partial-rollout or --fully-async, and says why", () =>
    Effect.gen(function*() {
      for (const [flag, rule] of [["--partial-rollout", "T + E_peak"], ["--fully-async", "T + E_peak"]] as const) {
        const capacity = Cli.capacityOf(yield* settingsOf([...exampleFlags, ...evalFlags, flag]))
        assert.strictEqual(capacity.rule, rule)
        assert.strictEqual(capacity.requiredSlots, 34)
        assert.include(Capacity.render(capacity), `train sessions resident during Eval: Yes (${flag})`)
      }
      assert.strictEqual(Cli.capacityOf(yield* settingsOf([...exampleFlags, ...evalFlags])).rule, "max(T, E_peak)")
    }))

  it.effect("counts no Eval Sessions when --eval-interval is not set (no Eval runs then)", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([...exampleFlags, "--eval-prompt-data", "test", "eval.jsonl"])
      assert.strictEqual(Cli.capacityOf(settings).rule, "T")
    }))

  it.effect("refuses to start with a missing --agent-cwd, naming the flag", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([...exampleFlags, "--agent-cwd", Path.join(root, "no-such-dir")])
      const error = yield* Effect.flip(Cli.runCheck(settings))
      assert.match(error.message, /^--agent-cwd: /)
    }))

  it.effect("refuses an unknown parser name, listing the known ones", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([...exampleFlags, "--agentic-tool-call-parser", "qwen9"])
      const error = yield* Effect.flip(Cli.runCheck(settings))
      assert.include(error.message, "--agentic-tool-call-parser: unknown parser \"qwen9\"")
    }))
})
