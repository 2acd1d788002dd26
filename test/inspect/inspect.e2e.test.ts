import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Inspector from "../../layers/inspect/Inspector.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import { makeRollout, memorySink, Rollout } from "../../src/index.ts"
import * as TempDir from "../support/TempDir.ts"
import * as Browser from "./browser.ts"

const fixtures = resolve(import.meta.dirname, "fixtures")

interface DumpLine {
  readonly session_id: string
  readonly group_index: number
  readonly rollout_id: number
  readonly export_name: string | null
  readonly loss_mask: ReadonlyArray<number>
  readonly turn_spans: ReadonlyArray<readonly [number, number]>
  readonly parser_failures: number
  readonly forest?: { readonly nodes: ReadonlyArray<unknown> }
  readonly replay?: { readonly requests: ReadonlyArray<{ readonly attempts: ReadonlyArray<unknown> }> }
}

const readDump = (path: string): Array<DumpLine> =>
  readFileSync(path, "utf8").trim().split("\n").map((line) => JSON.parse(line) as DumpLine)

/**
 * A real rollout: two steps of three Groups of two Sessions; per step one Group answers normally, one edits the
 * answer it got before sending it back (drift: the forest branches, both contexts exported by name) and one makes a
 * tool call the parser cannot read.
 */
const rolloutInto = (dir: string) =>
  Effect.gen(function*() {
    const rollout = yield* Rollout
    yield* rollout.run
  }).pipe(Effect.provide(makeRollout(
    {
      promptData: join(fixtures, "train.jsonl"),
      labelKey: "label",
      agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
      agentCwd: fixtures,
      agentTimeout: 60,
      embeddedPolicy: join(fixtures, "policy.mjs"),
      agenticToolCallParser: "qwen25",
      agenticCustomAdvantagePath: join(fixtures, "advantage.mjs"),
      useDynamicBatchSize: true,
      maxTokensPerGpu: 4096,
      nSamplesPerPrompt: 2,
      rolloutBatchSize: 3,
      rolloutMaxResponseLen: 64,
      numRollout: 2,
      outputDir: dir,
      saveDebugRolloutData: join(dir, "debug_{rollout_id}.jsonl")
    },
    { telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant }
  )))

const text = (page: import("playwright-core").Page, selector: string) =>
  Effect.promise(async () => (await page.textContent(selector)) ?? "")

describe("relax-agentic inspect (a real rollout's files in a real browser)", () => {
  it.live(
    "shows the run's Steps, Groups and Sessions, a Session's tree and tokens, and filters them",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-inspect-")
        yield* rolloutInto(dir)
        const dump = [...readDump(join(dir, "debug_0.jsonl")), ...readDump(join(dir, "debug_1.jsonl"))]
        const sessions = new Set(dump.map((d) => `${d.rollout_id}/${d.session_id}`))
        const groups = new Set(dump.map((d) => `${d.rollout_id}/${d.group_index}`))
        // Every Session's forest is dumped once, with its first context.
        assert.strictEqual(dump.filter((d) => d.forest !== undefined).length, sessions.size)

        const run = yield* Inspector.load(dir)
        const vocab = Inspector.vocabulary(yield* Tokenizer.load())
        // The server lives as long as the test's scope.
        const server = Context.get(yield* Layer.build(Inspector.Inspector.layer(run, vocab)), Inspector.Inspector)
        assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/$/)

        const b = yield* Browser.browser
        const { page, errors } = yield* Browser.open(b, server.url)
        assert.strictEqual(yield* text(page, "#count-steps"), "2")
        assert.strictEqual(yield* text(page, "#count-groups"), String(groups.size))
        assert.strictEqual(yield* text(page, "#count-sessions"), String(sessions.size))
        assert.strictEqual(yield* text(page, "#count-samples"), String(dump.length))
        assert.strictEqual(yield* text(page, "#shown-count"), String(sessions.size))

        // The drift Session: its whole forest as a tree, the branch point marked, both exports, its tokens.
        const drifted = dump.find((d) => d.export_name === "main" && d.rollout_id === 0)!
        const driftedForest = dump.find((d) => d.session_id === drifted.session_id && d.forest !== undefined)!.forest!
        const first = dump.find((d) => d.session_id === drifted.session_id)!
        yield* Effect.promise(() => page.click(`.row.session[data-key="0/${drifted.session_id}"]`))
        yield* Effect.promise(() => page.waitForSelector("#view-0 .token-view .tok"))
        assert.strictEqual(yield* Effect.promise(() => page.locator("#tree .node").count()), driftedForest.nodes.length)
        assert.strictEqual(yield* Effect.promise(() => page.locator("#tree .mark.branch").count()), 1)
        assert.strictEqual(yield* Effect.promise(() => page.locator("#tree .mark.export").count()), 2)
        assert.include(yield* text(page, "#tree .mark.drift"), "text-changed")
        const generated = first.loss_mask.filter((m) => m === 1).length
        assert.strictEqual(yield* Effect.promise(() => page.locator("#view-0 .tok.m1").count()), generated)
        assert.isAbove(yield* Effect.promise(() => page.locator("#view-0 .tok.special").count()), 0)
        assert.strictEqual(
          yield* Effect.promise(() => page.locator("#view-0 .turn-mark").count()),
          first.turn_spans.length
        )
        // Selecting the drift node shows the edited message; hovering a token shows its numbers.
        yield* Effect.promise(() => page.click("#tree .node:has(.mark.drift)"))
        assert.include(yield* text(page, "#node-detail"), "(edited)")
        yield* Effect.promise(() => page.hover("#view-0 .tok.m1"))
        assert.match(yield* text(page, "#tip"), /logprob -?\d+\.\d{4}/)
        // A second sample of the Group side by side.
        yield* Effect.promise(() => page.selectOption(".view-pick[data-slot=\"1\"]", { index: 3 }))
        yield* Effect.promise(() => page.waitForSelector("#view-1 .token-view .tok"))
        assert.isTrue(yield* Effect.promise(() => page.locator(".views.two").isVisible()))
        yield* Effect.promise(() => page.mouse.move(5, 5))
        yield* Browser.screenshot(page, "session.png")

        // Filters: parser failures, export name, status, search.
        const parserSessions = new Set(
          dump.filter((d) => d.parser_failures > 0).map((d) => `${d.rollout_id}/${d.session_id}`)
        )
        assert.isAbove(parserSessions.size, 0)
        yield* Effect.promise(() => page.check("#filter-parser"))
        assert.strictEqual(yield* text(page, "#shown-count"), String(parserSessions.size))
        yield* Effect.promise(() => page.uncheck("#filter-parser"))
        yield* Effect.promise(() => page.selectOption("#filter-export", "main"))
        const mains = dump.filter((d) => d.export_name === "main").length
        assert.strictEqual(yield* text(page, "#shown-count"), String(mains))
        yield* Effect.promise(() => page.selectOption("#filter-export", ""))
        yield* Effect.promise(() => page.selectOption("#filter-status", "truncated"))
        assert.strictEqual(yield* text(page, "#shown-count"), "0")
        yield* Effect.promise(() => page.selectOption("#filter-status", ""))
        yield* Effect.promise(() => page.click("#steps button[data-step=\"1\"]"))
        assert.strictEqual(
          yield* text(page, "#shown-count"),
          String(
            dump.filter((d) => d.rollout_id === 1).map((d) => d.session_id).filter((s, i, all) => all.indexOf(s) === i)
              .length
          )
        )
        yield* Effect.promise(() => page.click("#steps button[data-step=\"\"]"))
        yield* Effect.promise(() => page.fill("#search", drifted.session_id.slice(0, 10)))
        yield* Effect.promise(() => page.waitForSelector(`body[data-searched="${drifted.session_id.slice(0, 10)}"]`))
        assert.strictEqual(yield* text(page, "#shown-count"), "1")
        yield* Effect.promise(() => page.fill("#search", "(edited)"))
        yield* Effect.promise(() => page.waitForSelector("body[data-searched=\"(edited)\"]"))
        assert.strictEqual(yield* text(page, "#shown-count"), String(mains))
        yield* Effect.promise(() => page.fill("#search", ""))
        yield* Effect.promise(() => page.waitForSelector("body[data-searched=\"\"]"))
        // A Session whose tool call the parser could not read: the failure is marked on its response.
        yield* Effect.promise(() => page.check("#filter-parser"))
        yield* Effect.promise(() => page.click("#list .row.session"))
        yield* Effect.promise(() => page.waitForSelector("#tree .node .mark.parser"))
        assert.include(yield* text(page, "#tree"), "parser ×1")
        yield* Effect.promise(() => page.mouse.move(5, 5))
        yield* Browser.screenshot(page, "parser.png")
        assert.deepStrictEqual(errors, [])

        // The shared HTML file: self-contained, the same counts, a Session opens from the embedded data.
        const htmlPath = join(dir, "inspect.html")
        writeFileSync(htmlPath, yield* Inspector.html(run, vocab))
        const shared = yield* Browser.open(b, pathToFileURL(htmlPath).href)
        assert.strictEqual(yield* text(shared.page, "#count-sessions"), String(sessions.size))
        yield* Effect.promise(() => shared.page.click(`.row.session[data-key="0/${drifted.session_id}"]`))
        yield* Effect.promise(() => shared.page.waitForSelector("#view-0 .token-view .tok"))
        assert.strictEqual(yield* Effect.promise(() => shared.page.locator("#view-0 .tok.m1").count()), generated)
        yield* Effect.promise(() => shared.page.fill("#search", "(edited)"))
        yield* Effect.promise(() => shared.page.waitForSelector("body[data-searched=\"(edited)\"]"))
        assert.strictEqual(yield* text(shared.page, "#shown-count"), String(mains))
        assert.deepStrictEqual(shared.errors, [])
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )

  it.live(
    "shows where each Session's time went as a timeline, and a Session's row opens its view",
    () =>
      Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-inspect-timeline-")
        yield* rolloutInto(dir)
        const dump = [...readDump(join(dir, "debug_0.jsonl")), ...readDump(join(dir, "debug_1.jsonl"))]
        const sessions = new Set(dump.map((d) => `${d.rollout_id}/${d.session_id}`))
        const groups = new Set(dump.map((d) => `${d.rollout_id}/${d.group_index}`))
        // Each Session's replay record (on its first record): its model attempts, as the timeline must show them.
        const attempts = new Map(
          dump.filter((d) => d.replay !== undefined).map((
            d
          ) => [`${d.rollout_id}/${d.session_id}`, d.replay!.requests.reduce((n, r) => n + r.attempts.length, 0)])
        )
        assert.strictEqual(attempts.size, sessions.size)

        const run = yield* Inspector.load(dir)
        const vocab = Inspector.vocabulary(yield* Tokenizer.load())
        const server = Context.get(yield* Layer.build(Inspector.Inspector.layer(run, vocab)), Inspector.Inspector)
        const b = yield* Browser.browser
        const { page, errors } = yield* Browser.open(b, server.url)
        const count = (selector: string) => Effect.promise(() => page.locator(selector).count())

        yield* Effect.promise(() => page.click("#show-timeline"))
        yield* Effect.promise(() => page.waitForSelector("#timeline .tl-session"))
        assert.deepStrictEqual(
          yield* Effect.promise(() =>
            page.locator(".tl-legend .tl-key").evaluateAll((els) => els.map((e) => e.textContent))
          ),
          ["agent start", "lease/admission wait", "model", "parked", "agent time", "reward"]
        )
        assert.strictEqual(yield* count("#timeline .tl-step"), 2)
        assert.strictEqual(yield* count("#timeline .tl-group"), groups.size)
        assert.strictEqual(yield* count("#timeline .tl-session"), sessions.size)
        for (const [key, n] of attempts) {
          const row = `#timeline .tl-session[data-key="${key}"]`
          // One model span per engine attempt; every Session starts its agent, waits for its lease and is rewarded.
          assert.strictEqual(yield* count(`${row} .tl-span.ph-model`), n, key)
          assert.strictEqual(yield* count(`${row} .tl-span.ph-agent_start`), 1, key)
          assert.isAtLeast(yield* count(`${row} .tl-span.ph-wait`), 1, key)
          assert.strictEqual(yield* count(`${row} .tl-span.ph-reward`), 1, key)
        }
        // Spans sit on their step's axis: from 0% to 100% of its width.
        const styles = yield* Effect.promise(() =>
          page.locator("#timeline .tl-span").evaluateAll((els) => els.map((e) => e.getAttribute("style") ?? ""))
        )
        for (const style of styles) {
          const [, left, width] = /left:([\d.]+)%;width:([\d.]+)%/.exec(style) ?? []
          assert.isTrue(Number(left) >= 0 && Number(left) + Number(width) <= 100.001, style)
        }
        yield* Effect.promise(() => page.mouse.move(5, 5))
        yield* Browser.screenshot(page, "timeline.png")

        // A Session's row opens that Session's view.
        const key = [...attempts.keys()].find((k) => k.startsWith("1/"))
        const sessionId = key!.slice(2)
        yield* Effect.promise(() => page.click(`#timeline .tl-session[data-key="${key}"] .tl-label`))
        yield* Effect.promise(() => page.waitForSelector("#view-0 .token-view .tok"))
        assert.isTrue(yield* Effect.promise(() => page.locator("#timeline").isHidden()))
        assert.strictEqual(yield* text(page, "#detail h2"), sessionId)
        assert.deepStrictEqual(errors, [])

        // The shared HTML file carries the same timeline.
        const htmlPath = join(dir, "inspect.html")
        writeFileSync(htmlPath, yield* Inspector.html(run, vocab))
        const shared = yield* Browser.open(b, pathToFileURL(htmlPath).href)
        yield* Effect.promise(() => shared.page.click("#show-timeline"))
        yield* Effect.promise(() => shared.page.waitForSelector("#timeline .tl-session"))
        assert.strictEqual(
          yield* Effect.promise(() => shared.page.locator("#timeline .tl-session").count()),
          sessions.size
        )
        assert.deepStrictEqual(shared.errors, [])
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )
})
