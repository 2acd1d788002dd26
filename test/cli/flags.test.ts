import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Result } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Cli from "../../src/cli.ts"
import * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as TempDir from "../support/TempDir.ts"

const base = ["--prompt-data", "data.jsonl", "--rollout-batch-size", "2"]

/** Parse a command line the way `relax-agentic rollout` does and resolve it to settings. */
const settingsOf = (argv: ReadonlyArray<string>) =>
  Cli.parseArgs(argv).pipe(
    Effect.flatMap((values) => Cli.settingsFromFlags(values)),
    Effect.provide(NodeServices.layer)
  )

const failureOf = (argv: ReadonlyArray<string>) =>
  settingsOf(argv).pipe(
    Effect.flip,
    Effect.map((error) => error._tag === "RolloutConfigError" ? Cli.configMessage(error) : error.message)
  )

describe("expandMultiValues", () => {
  it("rewrites argparse nargs runs into repeated flags", () => {
    assert.deepStrictEqual(
      Cli.expandMultiValues(["--agent-env", "A=1", "B=2", "--num-rollout", "3"]),
      ["--agent-env", "A=1", "--agent-env", "B=2", "--num-rollout", "3"]
    )
  })

  it("ends a run at the next flag, a short flag, or --", () => {
    assert.deepStrictEqual(Cli.expandMultiValues(["--sglang-url", "u1", "-h"]), ["--sglang-url", "u1", "-h"])
    assert.deepStrictEqual(
      Cli.expandMultiValues(["--rollout-stop", "a", "--", "b", "c"]),
      ["--rollout-stop", "a", "--", "b", "c"]
    )
  })

  it("leaves single-value flags and their positional neighbours alone", () => {
    assert.deepStrictEqual(Cli.expandMultiValues(["--prompt-data", "a", "b"]), ["--prompt-data", "a", "b"])
  })
})

describe("lastOccurrenceWins", () => {
  it("keeps the last value of a repeated single-value flag, as argparse does", () => {
    assert.deepStrictEqual(
      Cli.lastOccurrenceWins(["--agent-cwd", "/a", "--num-rollout", "2", "--agent-cwd=/b"]),
      ["--num-rollout", "2", "--agent-cwd=/b"]
    )
  })

  it("drops an earlier boolean flag with or without its value, and keeps repeated multi-value flags", () => {
    assert.deepStrictEqual(
      Cli.lastOccurrenceWins([
        "--agentic-prelaunch",
        "false",
        "--agent-env",
        "A=1",
        "--agent-env",
        "B=2",
        "--agentic-prelaunch"
      ]),
      ["--agent-env", "A=1", "--agent-env", "B=2", "--agentic-prelaunch"]
    )
  })
})

describe("the flag table", () => {
  it("has a flag for every RolloutOptions field, each named once", () => {
    const fields = new Set<string>(Cli.rolloutFlags.flatMap((spec) => spec.field === null ? [] : [spec.field]))
    for (const field of Object.keys(RolloutOptions.RolloutOptions.fields)) {
      assert.isTrue(fields.has(field), `no flag fills ${field}`)
    }
    const names = Cli.rolloutFlags.map((spec) => spec.name)
    assert.strictEqual(new Set(names).size, names.length)
  })

  it("keeps the guide's and Relax's flag names", () => {
    const names = new Set(Cli.rolloutFlags.map((spec) => `--${spec.name}`))
    for (
      const flag of [
        "--use-agentic-rollout",
        "--agent-command",
        "--agent-cwd",
        "--agent-env",
        "--agent-timeout",
        "--agentic-concurrency",
        "--agentic-prelaunch",
        "--agentic-eval-concurrency",
        "--eval-prompt-data",
        "--agentic-custom-advantage-path",
        "--agentic-tool-call-parser",
        "--agentic-reasoning-parser",
        "--agentic-strict-match",
        "--save-debug-rollout-data",
        "--sglang-url",
        "--embedded-policy"
      ]
    ) assert.isTrue(names.has(flag), flag)
  })

  it("shows the decoded default in every flag's help", () => {
    const help = (name: string) => Cli.describeFlag(Cli.rolloutFlags.find((spec) => spec.name === name)!)
    assert.include(help("agent-timeout"), "Default: 1800.")
    assert.include(help("rollout-top-k"), "Default: -1.")
    assert.include(help("agentic-concurrency"), "Default: --over-sampling-batch-size.")
    assert.include(help("agent-env"), "Several values may follow the flag")
  })
})

describe("flags to settings", () => {
  it.effect("fills the reference defaults for flags left out", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf(base)
      assert.strictEqual(settings.nSamplesPerPrompt, 1)
      assert.strictEqual(settings.rolloutBatchSize, 2)
      assert.strictEqual(settings.overSamplingBatchSize, 2)
      assert.strictEqual(settings.agenticConcurrency, 2)
      assert.strictEqual(settings.numRollout, 1)
      assert.strictEqual(settings.agentTimeout, 1800)
      assert.strictEqual(settings.inputKey, "input")
      assert.strictEqual(settings.metadataKey, "metadata")
      assert.strictEqual(settings.rolloutTemperature, 1)
      assert.strictEqual(settings.rolloutTopP, 1)
      assert.strictEqual(settings.rolloutTopK, -1)
      assert.strictEqual(settings.rolloutSeed, 42)
      assert.strictEqual(settings.engine, "embedded")
      assert.strictEqual(settings.host, "127.0.0.1")
      assert.strictEqual(settings.port, 0)
      assert.isFalse(settings.agenticPrelaunch)
      assert.isFalse(settings.groupRm)
      assert.strictEqual(settings.rewardKey, undefined)
      assert.deepStrictEqual(settings.evalDatasets, [])
    }))

  it.effect("reads --agentic-max-consecutive-drops, 0 included, and defaults it from --agentic-concurrency", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        (yield* settingsOf([...base, "--agentic-max-consecutive-drops", "0"])).agenticMaxConsecutiveDrops,
        0
      )
      assert.strictEqual((yield* settingsOf([...base, "--agentic-concurrency", "5"])).agenticMaxConsecutiveDrops, 10)
    }))

  it.effect("derives --agentic-concurrency from --over-sampling-batch-size", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([...base, "--over-sampling-batch-size", "3"])
      assert.strictEqual(settings.agenticConcurrency, 3)
    }))

  it.effect("reads multi-value flags written the argparse way and the repeated way alike", () =>
    Effect.gen(function*() {
      const sglang = [...base, "--engine", "sglang", "--tokenizer", "/models/qwen"]
      const nargs = yield* settingsOf([
        ...sglang,
        "--agent-env",
        "FOO=bar",
        "BAZ=qux=1",
        "--eval-prompt-data",
        "gsm8k",
        "a.jsonl",
        "math",
        "b.jsonl",
        "--rollout-stop-token-ids",
        "7",
        "8",
        "--sglang-url",
        "http://a:1",
        "http://b:2",
        "--rollout-stop",
        "</answer>",
        "STOP"
      ])
      const repeated = yield* settingsOf([
        ...sglang,
        "--agent-env",
        "FOO=bar",
        "--agent-env",
        "BAZ=qux=1",
        "--eval-prompt-data",
        "gsm8k",
        "--eval-prompt-data",
        "a.jsonl",
        "--eval-prompt-data",
        "math",
        "--eval-prompt-data",
        "b.jsonl",
        "--rollout-stop-token-ids",
        "7",
        "--rollout-stop-token-ids",
        "8",
        "--sglang-url",
        "http://a:1",
        "--sglang-url",
        "http://b:2",
        "--rollout-stop",
        "</answer>",
        "--rollout-stop",
        "STOP"
      ])
      assert.deepStrictEqual(nargs, repeated)
      assert.deepStrictEqual(nargs.agentEnvVars, { FOO: "bar", BAZ: "qux=1" })
      assert.deepStrictEqual(nargs.evalDatasets, [
        { name: "gsm8k", path: "a.jsonl", nSamplesPerEvalPrompt: 1 },
        { name: "math", path: "b.jsonl", nSamplesPerEvalPrompt: 1 }
      ])
      assert.deepStrictEqual(nargs.rolloutStopTokenIds, [7, 8])
      assert.deepStrictEqual(nargs.sglangUrls, ["http://a:1", "http://b:2"])
      assert.deepStrictEqual(nargs.rolloutStop, ["</answer>", "STOP"])
    }))

  it.effect("accepts a Relax recipe's agentic flags, --use-agentic-rollout included", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([
        ...base,
        "--use-agentic-rollout",
        "--agent-cwd",
        "/srv/agent",
        "--agent-command",
        "bash run_agent_app.sh",
        "--agentic-prelaunch",
        "--agent-timeout",
        "90.5",
        "--n-samples-per-prompt",
        "4",
        "--reward-key",
        "score",
        "--agentic-tool-call-parser",
        "qwen25",
        "--agentic-reasoning-parser",
        "qwen3",
        "--agentic-strict-match",
        "--multimodal-keys",
        "{\"image\":\"images\"}",
        "--use-dynamic-batch-size",
        "--max-tokens-per-gpu",
        "4096"
      ])
      assert.strictEqual(settings.agentCwd, "/srv/agent")
      assert.strictEqual(settings.agentCommand, "bash run_agent_app.sh")
      assert.isTrue(settings.agenticPrelaunch)
      assert.strictEqual(settings.agentTimeout, 90.5)
      assert.strictEqual(settings.nSamplesPerPrompt, 4)
      assert.strictEqual(settings.rewardKey, "score")
      assert.strictEqual(settings.agenticToolCallParser, "qwen25")
      assert.strictEqual(settings.agenticReasoningParser, "qwen3")
      assert.isTrue(settings.strictMatch)
      assert.deepStrictEqual(settings.multimodalKeys, { image: "images" })
      assert.isTrue(settings.useDynamicBatchSize)
      assert.strictEqual(settings.maxTokensPerGpu, 4096)
    }))

  it.effect("lets a later single-value flag override an earlier one", () =>
    Effect.gen(function*() {
      const settings = yield* settingsOf([...base, "--num-rollout", "2", "--num-rollout", "5"])
      assert.strictEqual(settings.numRollout, 5)
    }))

  it.effect("reads a --config file and lets command-line flags win", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("cli-config-")
      const file = Path.join(dir, "rollout.json")
      Fs.writeFileSync(
        file,
        JSON.stringify({
          "prompt-data": "from-file.jsonl",
          "rollout-batch-size": 4,
          nSamplesPerPrompt: 3,
          "eval-prompt-data": [{ name: "test", path: "eval.jsonl" }],
          "agent-env": ["A=1"]
        })
      )
      const settings = yield* settingsOf(["--config", file, "--rollout-batch-size", "5"])
      assert.strictEqual(settings.promptData, "from-file.jsonl")
      assert.strictEqual(settings.rolloutBatchSize, 5)
      assert.strictEqual(settings.nSamplesPerPrompt, 3)
      assert.deepStrictEqual(settings.agentEnvVars, { A: "1" })
      assert.deepStrictEqual(settings.evalDatasets, [{ name: "test", path: "eval.jsonl", nSamplesPerEvalPrompt: 1 }])
    }))
})

describe("the cross-step flags (partial rollout, fully async)", () => {
  it.effect("read from the command line and from a --config file alike", () =>
    Effect.gen(function*() {
      const argv = yield* settingsOf([
        ...base,
        "--partial-rollout",
        "--partial-rollout-max-aborted-count",
        "3",
        "--fully-async"
      ])
      const dir = yield* TempDir.scoped("cli-config-")
      const file = Path.join(dir, "rollout.json")
      Fs.writeFileSync(
        file,
        JSON.stringify({ "partial-rollout": true, "partial-rollout-max-aborted-count": 3, "fully-async": true })
      )
      const config = yield* settingsOf([...base, "--config", file])
      for (const settings of [argv, config]) {
        assert.deepStrictEqual(Settings.retentionMode(settings), {
          partialRollout: true,
          fullyAsync: true,
          maxAbortedCount: 3
        })
      }
    }))

  it.effect("--normalize-advantages with --fully-async is refused at startup with the reason", () =>
    Effect.gen(function*() {
      assert.match(
        yield* failureOf([...base, "--fully-async", "--normalize-advantages"]),
        /^--normalize-advantages: cannot be used with --fully-async: global advantage whitening/
      )
      assert.match(
        yield* failureOf([...base, "--partial-rollout-max-aborted-count", "2"]),
        /^--partial-rollout-max-aborted-count: only applies with --partial-rollout/
      )
    }))
})

describe("flag errors name the flag and the fix", () => {
  it.effect("an odd number of --eval-prompt-data values", () =>
    Effect.gen(function*() {
      const message = yield* failureOf([...base, "--eval-prompt-data", "gsm8k", "a.jsonl", "math"])
      assert.include(message, "--eval-prompt-data: expects NAME PATH pairs, got 3 value(s)")
    }))

  it.effect("a reserved RELAX_ key in --agent-env", () =>
    Effect.gen(function*() {
      const message = yield* failureOf([...base, "--agent-env", "OK=1", "RELAX_BASE_URL=x"])
      assert.include(message, "--agent-env: key 'RELAX_BASE_URL'")
      assert.include(message, "reserved")
    }))

  it.effect("an --agent-env entry without =", () =>
    Effect.gen(function*() {
      assert.include(yield* failureOf([...base, "--agent-env", "FOO"]), "--agent-env")
    }))

  it.effect("a missing dataset and a missing batch size", () =>
    Effect.gen(function*() {
      assert.match(yield* failureOf(["--rollout-batch-size", "1"]), /^--prompt-data: a training dataset is required/)
      assert.match(yield* failureOf(["--prompt-data", "d.jsonl"]), /^--rollout-batch-size: required/)
    }))

  it.effect("an out-of-range number, leading with its flag", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        yield* failureOf(["--prompt-data", "d.jsonl", "--rollout-batch-size", "0"]),
        "--rollout-batch-size: Expected a value greater than 0"
      )
      assert.match(yield* failureOf([...base, "--rollout-top-p", "1.5"]), /^--rollout-top-p: /)
    }))

  it.effect("an element of a list flag leads with the flag; a deeper path keeps the whole message", () =>
    Effect.gen(function*() {
      const messageOf = (input: unknown) => Settings.resolve(input).pipe(Effect.flip, Effect.map(Cli.configMessage))
      const options = { promptData: "d.jsonl", rolloutBatchSize: 2 }
      assert.strictEqual(
        yield* messageOf({ ...options, rolloutStopTokenIds: [1, "x"] }),
        "--rollout-stop-token-ids: Expected number"
      )
      assert.strictEqual(
        yield* messageOf({ ...options, evalPromptData: [{ name: "a", path: 3 }] }),
        "configuration: Expected string\n  at --eval-prompt-data[0]--path"
      )
      assert.strictEqual(yield* messageOf("not an object"), "configuration: Expected object")
    }))

  it.effect("a negative --agentic-max-consecutive-drops", () =>
    Effect.gen(function*() {
      assert.match(
        yield* failureOf([...base, "--agentic-max-consecutive-drops", "-1"]),
        /^--agentic-max-consecutive-drops: Expected a value greater than or equal to 0/
      )
    }))

  it.effect("--over-sampling-batch-size below --rollout-batch-size", () =>
    Effect.gen(function*() {
      assert.match(
        yield* failureOf([...base, "--over-sampling-batch-size", "1"]),
        /^--over-sampling-batch-size: 1 is below/
      )
    }))

  it.effect("--engine sglang without --sglang-url, in Relax's spelling", () =>
    Effect.gen(function*() {
      assert.match(yield* failureOf([...base, "--engine", "sglang", "--tokenizer", "/models/qwen"]), /^--sglang-url: /)
      assert.match(
        yield* failureOf([...base, "--engine", "sglang", "--sglang-url", "http://w:1"]),
        /^--tokenizer: is required/
      )
    }))

  it.effect("invalid JSON in --multimodal-keys", () =>
    Effect.gen(function*() {
      const message = yield* failureOf([...base, "--multimodal-keys", "{image: images}"])
      assert.match(message, /^--multimodal-keys: "\{image: images\}" is not valid JSON/)
    }))

  it.effect("an unknown key in a --config file", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("cli-config-")
      const file = Path.join(dir, "bad.json")
      Fs.writeFileSync(file, JSON.stringify({ "rollout-batchsize": 2 }))
      const message = yield* failureOf(["--config", file])
      assert.include(message, "--config:")
      assert.include(message, "unknown option \"rollout-batchsize\"")
    }))

  it.effect("an unknown flag or a value of the wrong type is a parse error", () =>
    Effect.gen(function*() {
      // effect/cli reports parse errors inside ShowHelp (the help is shown with them).
      const errorsOf = (argv: ReadonlyArray<string>) =>
        Cli.parseArgs(argv).pipe(
          Effect.flip,
          Effect.map((error) => error._tag === "ShowHelp" ? error.errors.map((e) => e._tag) : [error._tag]),
          Effect.provide(NodeServices.layer)
        )
      assert.deepStrictEqual(yield* errorsOf([...base, "--rollout-batchsize", "2"]), ["UnrecognizedOption"])
      assert.deepStrictEqual(yield* errorsOf(["--num-rollout", "two"]), ["InvalidValue"])
    }))

  it("optionsFromFlags leaves out every flag that was not given", () => {
    const options = Cli.optionsFromFlags({ "num-rollout": Option.some(3), "agent-env": Option.none() })
    assert.deepStrictEqual(Result.getOrThrow(options), { numRollout: 3 })
  })
})

describe("options the rollout would not use", () => {
  it.effect("are named in startup warnings, with what to add", () =>
    Effect.gen(function*() {
      const warnings = Cli.unusedOptionWarnings(
        yield* settingsOf([
          ...base,
          "--eval-prompt-data",
          "arith",
          "eval.jsonl",
          "--eval-temperature",
          "0",
          "--skip-eval-before-train",
          "--global-batch-size",
          "64",
          "--max-tokens-per-gpu",
          "4096"
        ])
      )
      assert.deepStrictEqual(warnings, [
        "--eval-prompt-data, --eval-temperature, --skip-eval-before-train: no --eval-interval is given, so this " +
        "rollout runs no Eval; add --eval-interval N (or remove them)",
        "--global-batch-size 64 is only used to derive --rollout-batch-size, which is given (2); remove one of the two",
        "--max-tokens-per-gpu is only used with --use-dynamic-batch-size; add it (or remove the budget)"
      ])
    }))

  it.effect("are none for a consistent command line", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(Cli.unusedOptionWarnings(yield* settingsOf([...base, "--global-batch-size", "2"])), [])
      const withEval = yield* settingsOf([
        ...base,
        "--eval-prompt-data",
        "a",
        "a.jsonl",
        "--eval-interval",
        "1",
        "--eval-top-p",
        "0.9"
      ])
      assert.deepStrictEqual(Cli.unusedOptionWarnings(withEval), [])
    }))
})

describe("the subcommands' flag names", () => {
  it("are read from their flags, wrappers (optional, default, repeat) and all, without the arguments", () => {
    assert.deepStrictEqual(Cli.replayFlagNames, [
      "--session",
      "--tokenizer",
      "--agentic-tool-call-parser",
      "--agentic-reasoning-parser",
      "--timed",
      "--sglang-url"
    ])
    assert.deepStrictEqual(Cli.inspectFlagNames, ["--html", "--port", "--tokenizer", "--reward-key", "--chrome-trace"])
    assert.deepStrictEqual(Cli.rescoreFlagNames, [
      "--custom-rm-path",
      "--group-rm",
      "--agentic-custom-advantage-path",
      "--dynamic-sampling-filter-path",
      "--reward-key",
      "--keep-agent-rewards",
      "--disable-grpo-std-normalization",
      "--disable-rewards-normalization",
      "--normalize-advantages",
      "--log-passrate",
      "--output-dir"
    ])
  })
})
