/**
 * `npm run bench -- inspect`: how `relax-agentic inspect` scales with a run's size (docs/inspect.md "Large runs").
 *
 * **Details**
 * Synthetic debug dumps of 1,000 and 10,000 Sessions (quick: 1,000 and 10,000 Sessions of ~200 tokens; full: ~600
 * tokens), each written by the real pipeline (SessionForest → Sample.build → Records.debugRecords, a forest per
 * Session, every tenth Session with a drift branch and a resumed turn), are read side by side: reading the dump as
 * `inspect` did before (every line decoded in full) and as it does now (a lazy index of the lines without their token
 * arrays; a Session decoded when opened), the overview the page loads first, the page in Chromium until its list shows, scrolling the whole Session
 * list (frame times from requestAnimationFrame), and opening one Session (tree and token view). The ratio column
 * compares the large run with the small one: the page's costs should not grow with the run (virtualized list, details
 * on demand), only reading the files does.
 */
import chromium from "@sparticuz/chromium"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { chromium as playwright } from "playwright-core"
import * as Inspector from "../../layers/inspect/Inspector.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Sample from "../../src/forest/Sample.ts"
import * as Dump from "../../src/inspect/Dump.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as RunView from "../../src/inspect/RunView.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as Harness from "./harness.ts"

const user = (content: string): Canonical.Message => ({ role: "user", content })
const assistant = (content: string): Canonical.Message => ({ role: "assistant", content })

/** Deterministic pseudo-random ids and logprobs. */
const rng = (seed: number) => {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 4294967296
  }
}

/** One Session's dump lines: two turns (every tenth Session: an edited first answer and a resumed second turn). */
const sessionLines = (i: number, scale: number): Array<string> => {
  const random = rng(i + 1)
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 150_000))
  const lps = (n: number) => Array.from({ length: n }, () => Math.fround(-random() * 4))
  const group = Math.floor(i / 8)
  const forest = Forest.make({
    sessionId: `s${String(i).padStart(6, "0")}`,
    groupIndex: group,
    index: i,
    label: null,
    metadata: {}
  })
  const base = { tools: [], chatTemplateKwargs: {}, rolloutId: 0 }
  const o1 = ForestCommit.commitObservation(forest, {
    ...base,
    parent: forest.root,
    messages: [user(`Task ${i}: what is ${i} + ${i}?`)],
    tokens: ids(60 * scale)
  })
  const r1Tokens = ids(50 * scale)
  const r1 = ForestCommit.commitResponse(forest, {
    parent: o1,
    message: assistant(`Answer ${2 * i}.`),
    tokens: r1Tokens,
    logprobs: lps(r1Tokens.length),
    weightVersions: ["0"],
    status: "completed",
    rolloutId: 0,
    requestId: `r${i}a`,
    abortCount: 0,
    wallElapsedS: 1,
    generationElapsedS: 0.8
  })
  const drift = i % 10 === 0
  const o2 = ForestCommit.commitObservation(forest, {
    ...base,
    parent: drift ? o1 : r1,
    messages: drift ? [assistant(`Answer ${2 * i}. (edited)`), user("Check.")] : [user("Check.")],
    tokens: ids(20 * scale)
  })
  const r2Tokens = ids(50 * scale)
  const r2 = ForestCommit.commitResponse(forest, {
    parent: o2,
    message: assistant(`Final ${2 * i}.`),
    tokens: r2Tokens,
    logprobs: lps(r2Tokens.length),
    weightVersions: drift ? ["0", "1"] : ["0"],
    ...(drift ? { attemptLengths: [20, r2Tokens.length - 20] } : {}),
    status: "completed",
    rolloutId: 0,
    requestId: `r${i}b`,
    abortCount: drift ? 1 : 0,
    wallElapsedS: 1,
    generationElapsedS: 0.8
  })
  const sample = {
    ...Sample.build(forest, r2, () => "text", {
      rolloutId: 0,
      exportName: null,
      reward: i % 3 === 0 ? 1 : 0,
      metadata: {}
    }),
    advantage: 0
  }
  const counters = { requests: 2, generations: drift ? 3 : 2, parserFailures: 0, droppedToolCalls: 0 }
  return Records.debugRecords([sample], [{
    view: Sample.debugView(forest, r2),
    counters,
    forest: ForestDump.ofForest(forest)
  }], 0)
    .map((record) => JSON.stringify(record))
}

const writeDump = (dir: string, sessions: number, scale: number): string => {
  const path = join(dir, `debug_${sessions}.jsonl`)
  const lines: Array<string> = []
  for (let i = 0; i < sessions; i++) lines.push(...sessionLines(i, scale))
  writeFileSync(path, lines.join("\n") + "\n")
  return path
}

interface Measured {
  readonly bytes: number
  readonly loadMs: number
  /** CPU time of reading (wall time on a busy machine says more about the machine). */
  readonly loadCpuMs: number
  /** CPU time of reading as `inspect` did before it read lazily: every line decoded in full, then the overview. */
  readonly eagerCpuMs: number
  /** CPU time of opening one Session: decoding its lines in full. */
  readonly openCpuMs: number
  readonly overviewBytes: number
  readonly pageMs: number
  readonly frameP50: number
  readonly frameP95: number
  readonly frames: number
  readonly openMs: number
  readonly domRows: number
}

const collect = Harness.garbageCollector()

/** CPU milliseconds `f` takes (wall time on a busy machine says more about the machine). */
const cpuMs = <A>(f: () => A): { readonly value: A; readonly ms: number } => {
  // What an earlier measurement left behind is collected first, so it does not bill this one.
  collect?.()
  const cpu = process.cpuUsage()
  const value = f()
  const used = process.cpuUsage(cpu)
  return { value, ms: (used.user + used.system) / 1000 }
}

/** Reading as `inspect` did before it read lazily: every line decoded in full (tokens too), then the overview. */
const readEagerly = (path: string): number => {
  const lines = Dump.readFile(path, readFileSync(path, "utf8"))
  if (lines instanceof Dump.DumpLineError) throw lines
  return RunView.overview(RunView.fromLines(path, lines)).sessions.length
}

const measure = async (path: string, page: import("playwright-core").Page): Promise<Measured> => {
  const bytes = statSync(path).size
  const eagerCpuMs = cpuMs(() => readEagerly(path)).ms
  collect?.()
  const started = performance.now()
  const cpu = process.cpuUsage()
  const run = await Effect.runPromise(Inspector.load(path))
  const overviewBytes = JSON.stringify(RunView.overview(run)).length
  const loadMs = performance.now() - started
  const used = process.cpuUsage(cpu)
  const loadCpuMs = (used.user + used.system) / 1000
  const openCpuMs = cpuMs(() => run.open(run.sessions[Math.floor(run.sessions.length / 2)]!.key)).ms
  const vocab = Inspector.vocabulary(await Effect.runPromise(Tokenizer.load()))
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const server = Context.get(yield* Layer.build(Inspector.Inspector.layer(run, vocab)), Inspector.Inspector)
    return yield* Effect.promise(async () => {
      const t0 = performance.now()
      await page.goto(server.url)
      await page.waitForSelector("body[data-ready=true]", { timeout: 120_000 })
      await page.waitForSelector(".row.session")
      const pageMs = performance.now() - t0
      // Scroll the whole list in 120 steps, one per frame, and time the frames.
      // (A string: this file is type-checked without the DOM library.)
      const frames = await page.evaluate<ReadonlyArray<number>>(`(async () => {
        const list = document.getElementById("list")
        const times = []
        let last = performance.now()
        for (let k = 1; k <= 120; k++) {
          list.scrollTop = (list.scrollHeight - list.clientHeight) * (k / 120)
          await new Promise((done) => requestAnimationFrame(() => done()))
          const now = performance.now()
          times.push(now - last)
          last = now
        }
        return times
      })()`)
      const domRows = await page.locator("#list .row").count()
      const t1 = performance.now()
      await page.click("#list .row.session")
      await page.waitForSelector("#view-0 .token-view .tok", { timeout: 120_000 })
      const openMs = performance.now() - t1
      return {
        bytes,
        loadMs,
        loadCpuMs,
        eagerCpuMs,
        openCpuMs,
        overviewBytes,
        pageMs,
        frameP50: Harness.percentile(frames, 50),
        frameP95: Harness.percentile(frames, 95),
        frames: frames.length,
        openMs,
        domRows
      }
    })
  })))
}

const run = async (options: { readonly full: boolean }): Promise<Harness.BenchResult> => {
  const scale = options.full ? 3 : 1
  const dir = mkdtempSync(join(tmpdir(), "bench-inspect-"))
  const smallDump = writeDump(dir, 1_000, scale)
  const largeDump = writeDump(dir, 10_000, scale)
  const browser = await playwright.launch({
    executablePath: await chromium.executablePath(),
    args: chromium.args,
    headless: true
  })
  try {
    // One page for both runs: Chromium from @sparticuz/chromium runs as a single process, which closing its last page ends.
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } })
    const small = await measure(smallDump, page)
    const large = await measure(largeDump, page)
    const row = (what: string, a: number, b: number, format: (x: number) => string) => ({
      measure: what,
      "1,000 Sessions": format(a),
      "10,000 Sessions": format(b),
      "10k / 1k": Harness.formatRatio(b / a)
    })
    return {
      title: `inspect: reading a run and using the page, 1,000 vs 10,000 Sessions (~${
        (180 * scale).toLocaleString()
      } tokens each)`,
      rows: [
        row("dump size", small.bytes, large.bytes, Harness.formatBytes),
        row("before: read + decode everything + overview (CPU)", small.eagerCpuMs, large.eagerCpuMs, Harness.formatMs),
        row("now: read + lazy index + overview (CPU)", small.loadCpuMs, large.loadCpuMs, Harness.formatMs),
        row("now: read + lazy index + overview (wall)", small.loadMs, large.loadMs, Harness.formatMs),
        row("open a Session: decode its lines in full (CPU)", small.openCpuMs, large.openCpuMs, Harness.formatMs),
        row("overview (first load)", small.overviewBytes, large.overviewBytes, Harness.formatBytes),
        row("page until the list shows", small.pageMs, large.pageMs, Harness.formatMs),
        row("scroll frame p50", small.frameP50, large.frameP50, Harness.formatMs),
        row("scroll frame p95", small.frameP95, large.frameP95, Harness.formatMs),
        row("rows in the DOM", small.domRows, large.domRows, String),
        row("open a Session (tree + tokens)", small.openMs, large.openMs, Harness.formatMs)
      ],
      notes: [
        `Lazy reading vs decoding everything up front (CPU, same dump, same run): ${
          Harness.formatRatio(small.loadCpuMs / small.eagerCpuMs)
        } at 1,000 Sessions, ${Harness.formatRatio(large.loadCpuMs / large.eagerCpuMs)} at 10,000.`,
        `Scrolling: ${small.frames} frames from top to bottom of the list; a frame at 60 Hz is 16.7 ms.`,
        "Reading grows with the files (every line read without its token arrays: the index the list comes from); " +
        "the page's costs do not: the list keeps only the rows in view in the DOM, and a Session's lines are " +
        "decoded in full, its tree and tokens built, when it is opened."
      ]
    }
  } finally {
    await browser.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

export const bench: Harness.Bench = { name: "inspect", run }
