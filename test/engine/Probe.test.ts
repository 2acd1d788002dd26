/**
 * `relax-agentic check --probe-engine` (layers/engine/sglang/Probe.ts) against the SGLang double on loopback: every
 * row passes against the double as it follows SGLang, and each deliberate divergence is reported by exactly its row.
 * The probe talks to a live server in real time (it lets a request run before aborting or pausing it, and waits for
 * an idle connection to close), so these run live; each waits seconds on the double and hardly uses the CPU, so they
 * run concurrently, each against its own double on its own port.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Probe from "../../layers/engine/sglang/Probe.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ProbeReport from "../../src/engine/sglang/ProbeReport.ts"
import * as FakeSglang from "../support/FakeSglang.ts"
import * as ProbeDouble from "../support/probeDouble.ts"

/** The probe against the double (test/support/probeDouble.ts); with `router`, through a `--dp-aware` router. */
const probeDouble = (overrides: Partial<FakeSglang.FakeSglangOptions>, router?: { readonly dpSize: number }) =>
  Effect.gen(function*() {
    const tokenizer = yield* Tokenizer.Tokenizer
    const server = yield* ProbeDouble.probeServer(overrides)
    const routerServer = router === undefined
      ? undefined
      : yield* FakeSglang.make({ routeTo: [server.url], dpSize: router.dpSize })
    const report = yield* Probe.run({
      ...(routerServer === undefined ? { workerUrls: [server.url] } : { routerUrl: routerServer.url }),
      tokenizer: { source: "bundled Qwen3", encode: tokenizer.encode },
      sessionLifecycle: true,
      admission: false,
      budget: 40,
      idleWait: "4500 millis"
    })
    return { report, server }
  })

/** The rows that are not `ok` (skipped ones aside: no LoRA flag, no router). */
const reported = (report: ProbeReport.Report) =>
  report.rows.filter((row) => row.verdict !== "ok" && row.verdict !== "skipped").map((row) => [row.name, row.verdict])

describe.concurrent("check --probe-engine against the SGLang double", () => {
  it.live("every row passes, within the budget, and the server is left as found", () =>
    Effect.gen(function*() {
      const { report, server } = yield* probeDouble({})
      assert.deepStrictEqual(reported(report), [])
      assert.deepStrictEqual(
        report.rows.filter((row) => row.verdict === "skipped").map((row) => row.name),
        ["LoRA lora_path", "router worker list"]
      )
      assert.isFalse(ProbeReport.breaks(report))
      assert.isAtMost(report.requests, 40)
      // Left as found: its version, nothing running or queued, the probe's session closed.
      assert.strictEqual(server.weightVersion(), "default")
      assert.strictEqual(server.running() + server.queued(), 0)
      assert.deepStrictEqual(server.closedSessions, ["relax-probe-session"])
      assert.include(ProbeReport.render(report), "[OK    ] abort of a running request")
    }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)), { timeout: 120_000 })

  it.live(
    "through a --dp-aware router: its worker list is read, the @rank form reported as handled",
    () =>
      Effect.gen(function*() {
        const { report, server } = yield* probeDouble({}, { dpSize: 2 })
        assert.deepStrictEqual(reported(report), [["router worker list", "differs-but-handled"]])
        assert.include(report.rows.find((row) => row.name === "router worker list")?.seen, "2 with a dp-aware @rank")
        assert.strictEqual(server.weightVersion(), "default")
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)),
    { timeout: 120_000 }
  )

  const divergences: ReadonlyArray<readonly [string, Partial<FakeSglang.FakeSglangOptions>, string, string]> = [
    [
      "no partial ids on abort",
      { divergence: { noPartialIdsOnAbort: true } },
      "abort of a running request",
      "differs-but-handled"
    ],
    [
      "version labelled at arrival",
      { divergence: { labelVersionAtArrival: true } },
      "weight_version labels",
      "differs-but-handled"
    ],
    ["/tokenize missing", { tokenize: undefined }, "tokenizer parity", "differs-but-handled"],
    ["/metrics gauges missing", { enableMetrics: false }, "/metrics KV gauges", "differs-but-handled"],
    ["idle connections closed after 3 s", { keepAliveTimeoutMs: 3000 }, "idle keep-alive close", "breaks"]
  ]
  for (const [divergence, overrides, row, verdict] of divergences) {
    it.live(`${divergence}: exactly the row "${row}" is reported`, () =>
      Effect.gen(function*() {
        const { report } = yield* probeDouble(overrides)
        assert.deepStrictEqual(reported(report), [[row, verdict]])
        assert.strictEqual(ProbeReport.breaks(report), verdict === "breaks")
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer)), { timeout: 120_000 })
  }
})
