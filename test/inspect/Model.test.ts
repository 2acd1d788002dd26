import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Inspector from "../../layers/inspect/Inspector.ts"
import * as Drift from "../../src/forest/Drift.ts"
import * as Dump from "../../src/inspect/Dump.ts"
import * as RunView from "../../src/inspect/RunView.ts"
import * as SessionTree from "../../src/inspect/SessionTree.ts"
import * as TempDir from "../support/TempDir.ts"
import * as Fixture from "./fixture.ts"

const runOf = (file: string, text: string) => {
  const lines = Dump.readFile(file, text)
  if (lines instanceof Dump.DumpLineError) throw lines
  return RunView.fromLines("test", lines)
}

describe("inspect: a debug dump as Steps, Groups, Sessions, trees and tokens", () => {
  it("reads a dump into one Session with its exports, counts, tree and drift point", () => {
    const { jsonl, o2, forest } = Fixture.session()
    const run = runOf("debug_0.jsonl", jsonl)
    const overview = RunView.overview(run)
    assert.strictEqual(overview.steps.length, 1)
    assert.strictEqual(overview.groups.length, 1)
    assert.strictEqual(overview.sessions.length, 1)
    const row = overview.sessions[0]!
    assert.deepStrictEqual(row.exports, ["main", "first"])
    assert.deepInclude(row, {
      reward: 1,
      advantage: 0.5,
      turns: 1,
      aborts: 1,
      parser_failures: 1,
      requests: 2,
      branches: 1,
      drift: 1,
      has_forest: true
    })
    assert.deepStrictEqual(row.weight_versions, ["1", "2"])
    assert.strictEqual(row.wall_s, 2)
    const detail = SessionTree.detail(run, run.sessions[0]!, Fixture.vocab)
    assert.strictEqual(detail.tree_source, "forest")
    assert.strictEqual(detail.tree.length, forest.nodes.size)
    const drifted = detail.tree.find((n) => n.hash === o2)!
    assert.strictEqual(drifted.drift?.cause, "text-changed")
    assert.include(drifted.drift?.detail ?? "", "(edited)")
    assert.deepStrictEqual(detail.tree.filter((n) => n.exports.length > 0).map((n) => n.exports), [["first"], ["main"]])
    assert.strictEqual(detail.tree.find((n) => n.request_id === "req-2")?.parser_failures, 1)
  })

  it("shows a Session's admission wait for KV room (0 when its records carry none)", () => {
    const { jsonl } = Fixture.session()
    assert.strictEqual(RunView.overview(runOf("debug_0.jsonl", jsonl)).sessions[0]?.admission_wait_s, 0)
    const waited = jsonl.trim().split("\n").map((line) =>
      JSON.stringify({ ...JSON.parse(line), admission_wait_s: 2.5 })
    )
    const row = RunView.overview(runOf("debug_0.jsonl", waited.join("\n") + "\n")).sessions[0]
    assert.strictEqual(row?.admission_wait_s, 2.5)
  })

  it("gives each sample's tokens their mask, logprobs, turns and the attempts of a resumed turn", () => {
    const { jsonl, samples } = Fixture.session()
    const run = runOf("debug_0.jsonl", jsonl)
    const [main] = SessionTree.detail(run, run.sessions[0]!, Fixture.vocab).samples
    const sample = samples[0]!
    assert.strictEqual(main!.ids.length, sample.tokens.length)
    assert.strictEqual(main!.generated, sample.loss_mask.filter((m) => m === 1).length)
    assert.strictEqual(main!.prompt_length, sample.tokens.length - sample.response_length)
    assert.deepStrictEqual(main!.mask.slice(main!.prompt_length), [...sample.loss_mask])
    assert.strictEqual(main!.text[0], "<900>")
    assert.includeMembers([...main!.special], [0])
    const [turn] = main!.turns
    assert.deepStrictEqual(turn!.attempts, [
      { start: turn!.start, end: turn!.start + 3, weight_version: "1" },
      { start: turn!.start + 3, end: turn!.end, weight_version: "2" }
    ])
    assert.strictEqual(main!.logprob[turn!.start], -1)
    assert.strictEqual(main!.logprob[0], null)
  })

  it("reads a dump written before inspect: the mask and logprobs come from the lineage", () => {
    const { jsonl, samples } = Fixture.session()
    const old = jsonl.split("\n").map((line) => {
      const record = JSON.parse(line) as Record<string, unknown>
      for (
        const key of [
          "status",
          "loss_mask",
          "rollout_log_probs",
          "turn_spans",
          "parser_failures",
          "parser_failures_by_request",
          "forest"
        ]
      ) delete record[key]
      return JSON.stringify(record)
    }).join("\n")
    const run = runOf("debug_0.jsonl", old)
    const detail = SessionTree.detail(run, run.sessions[0]!, Fixture.vocab)
    assert.strictEqual(detail.tree_source, "lineages")
    const [main] = detail.samples
    assert.strictEqual(main!.mask_source, "lineage")
    assert.deepStrictEqual(main!.mask.slice(main!.prompt_length), [...samples[0]!.loss_mask])
    assert.strictEqual(RunView.overview(run).notes.length, 1)
  })

  it("merges training samples with their debug records, and finds Sessions by id or text", () => {
    const { jsonl, samples } = Fixture.session()
    const rollout = samples.map((s) => JSON.stringify(s)).join("\n")
    const lines = [
      ...(Dump.readFile("rollout_0.jsonl", rollout) as ReadonlyArray<Dump.Line>),
      ...(Dump.readFile("debug_0.jsonl", jsonl) as ReadonlyArray<Dump.Line>)
    ]
    const run = RunView.fromLines("dir", lines)
    assert.strictEqual(run.sessions.length, 1)
    assert.strictEqual(run.sessions[0]!.samples.length, 2)
    assert.isTrue(run.sessions[0]!.samples.every((s) => s.debug !== undefined))
    assert.deepStrictEqual(SessionTree.search(run, "S1"), ["0/s1"])
    assert.deepStrictEqual(SessionTree.search(run, "<20><21>"), ["0/s1"])
    assert.deepStrictEqual(SessionTree.search(run, "nowhere"), [])
  })

  it("names the line that is neither a sample nor a debug record", () => {
    const error = Dump.readFile("x.jsonl", "{\"a\": 1}\n")
    assert.instanceOf(error, Dump.DumpLineError)
    assert.include((error as Dump.DumpLineError).message, "x.jsonl:1")
    assert.strictEqual((Dump.readFile("y.jsonl", "not json") as Dump.DumpLineError).reason, "not-json")
  })

  it("reads an Eval file's step from its name", () => {
    const { samples } = Fixture.session()
    const lines = Dump.readFile("/runs/eval_2_arith.jsonl", JSON.stringify(samples[0]))
    assert.strictEqual((lines as ReadonlyArray<Dump.Line>)[0]!.step, "eval_2_arith")
    assert.isTrue(RunView.compareSteps("2", "eval_2_arith") < 0)
    assert.isTrue(RunView.compareSteps("2", "10") < 0)
  })
})

describe("drift: why an echoed assistant message differs from the committed response", () => {
  it("tells dropped reasoning, re-serialized tool arguments, changed tool calls and changed text apart", () => {
    const committed = Fixture.assistant("Let me add.", {
      reasoning_content: "2 + 2",
      tool_calls: [Fixture.call("{\"a\":2,\"b\":2}")]
    })
    assert.strictEqual(
      Drift.diverge(committed, Fixture.assistant("Let me add.", { tool_calls: [Fixture.call("{\"a\":2,\"b\":2}")] }))
        .cause,
      "reasoning-dropped"
    )
    assert.strictEqual(Drift.diverge(committed, { ...committed, reasoning_content: "2+2" }).cause, "reasoning-changed")
    const reserialized = Drift.diverge(committed, { ...committed, tool_calls: [Fixture.call("{\"a\": 2, \"b\": 2}")] })
    assert.strictEqual(reserialized.cause, "tool-arguments-reserialized")
    assert.include(reserialized.detail, "tool call 0")
    assert.strictEqual(
      Drift.diverge(committed, { ...committed, tool_calls: [Fixture.call("{\"a\":3}")] }).cause,
      "tool-calls-changed"
    )
    assert.strictEqual(Drift.diverge(committed, { ...committed, content: "Let me add!" }).cause, "text-changed")
  })

  it("marks an observation that starts with an assistant message, and only under a committed response", () => {
    const committed = Fixture.assistant("Four.")
    assert.isUndefined(Drift.atObservation([committed], [Fixture.user("next")]))
    assert.isUndefined(Drift.atObservation([], [Fixture.assistant("Four!")]))
    assert.strictEqual(
      Drift.atObservation([committed], [Fixture.assistant("Four!"), Fixture.user("next")])?.cause,
      "text-changed"
    )
    assert.strictEqual(Drift.atObservation([committed], [Fixture.user("inserted"), committed])?.cause, undefined)
    assert.strictEqual(
      Drift.atObservation([committed], [Fixture.assistant("other"), committed])?.cause,
      "messages-reordered"
    )
  })
})

describe("inspect: a run read lazily (Inspector.load)", () => {
  it.effect("lists from lines without their token arrays, and decodes a Session in full when it is opened", () =>
    Effect.gen(function*() {
      const { jsonl } = Fixture.session()
      const dir = yield* TempDir.scoped("inspect-lazy-")
      // A blank line and a training-sample-free dump: the list still has every row.
      writeFileSync(join(dir, "debug_0.jsonl"), `\n${jsonl}`)
      const lazy = yield* Inspector.load(dir)
      const eager = runOf("debug_0.jsonl", jsonl)
      assert.deepStrictEqual(RunView.overview(lazy).sessions, RunView.overview(eager).sessions)
      const listed = lazy.sessions[0]!
      // The index holds no token arrays...
      assert.isTrue(listed.samples.every((s) => s.tokens.length === 0))
      assert.isTrue((listed.forest?.nodes ?? []).every((n) => n.tokens.length === 0))
      // ...the opened Session has them all, as an eager read does.
      const opened = lazy.open(listed.key)
      assert(opened !== undefined && !(opened instanceof Dump.DumpLineError))
      assert.deepStrictEqual(
        SessionTree.detail(lazy, opened, Fixture.vocab),
        SessionTree.detail(eager, eager.sessions[0]!, Fixture.vocab)
      )
      assert.isUndefined(lazy.open("0/nobody"))
    }))
})
