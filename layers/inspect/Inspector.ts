/**
 * `relax-agentic inspect`: read a run's files, and serve the inspector page on loopback or write it as one
 * self-contained HTML file (docs/inspect.md).
 *
 * **Details**
 * {@link load} reads an output directory (every `.jsonl` but the metric files: samples, Eval samples and any debug
 * dump written there) or one file, with the tokenizer that gives each token its text. It reads lazily: the list comes
 * from every line without its token arrays, and a Session's lines are decoded in full only when it is opened. The
 * server answers the page (`/`, `/app.js`, `/app.css`, shipped beside this file in `page/`), the run's overview
 * (`/api/overview`), one Session's detail (`/api/session?key=`), a search (`/api/search?q=`) and the timeline of where
 * each Session's time went (`/api/timeline`, src/replay/Timeline.ts, as the Chrome trace); details are built
 * when asked, so a large run opens at the cost of its summaries. {@link html} inlines the page, the overview and every Session's detail
 * (each in its own JSON script element, parsed when opened): nothing is fetched, from the network or otherwise.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { join, resolve } from "node:path"
import * as Dump from "../../src/inspect/Dump.ts"
import * as RunView from "../../src/inspect/RunView.ts"
import * as SessionTree from "../../src/inspect/SessionTree.ts"
import type * as Tokens from "../../src/inspect/Tokens.ts"
import * as Recorded from "../../src/replay/Recorded.ts"
import * as Timeline from "../../src/replay/Timeline.ts"
import type * as Tokenizer from "../tokenizer/Tokenizer.ts"

/** The run cannot be read. */
export class InspectError extends Data.TaggedError("InspectError")<{
  readonly reason: "not-found" | "no-records" | "bad-line"
  readonly path: string
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message() {
    switch (this.reason) {
      case "not-found":
        return `inspect ${this.path}: no such file or directory (${this.detail}); give an --output-dir or a --save-debug-rollout-data file`
      case "no-records":
        return `inspect ${this.path}: no samples or debug-dump records found (${this.detail}); give an --output-dir or a --save-debug-rollout-data file`
      case "bad-line":
        return this.detail
    }
  }
}

/** The files `load` reads at `path`: the readable `.jsonl` files of a directory, or the file itself. */
export const filesAt = (path: string): Effect.Effect<ReadonlyArray<string>, InspectError> =>
  Effect.try({
    try: () => {
      const full = resolve(path)
      if (!statSync(full).isDirectory()) return [full]
      return readdirSync(full)
        .filter(Dump.isReadable)
        .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }))
        .map((name) => join(full, name))
    },
    catch: (error) => new InspectError({ reason: "not-found", path, detail: String(error), cause: error })
  })

/** Where a line is: its file (position in the run's files) and its character range in that file's text. */
interface LineRef {
  readonly file: number
  readonly start: number
  readonly end: number
}

/** The character ranges of a text's lines (without their `\n`), blank ones included. */
const lineRanges = (text: string): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  let start = 0
  for (;;) {
    const end = text.indexOf("\n", start)
    out.push([start, end === -1 ? text.length : end])
    if (end === -1) return out
    start = end + 1
  }
}

const badLine = (error: Dump.DumpLineError) =>
  new InspectError({ reason: "bad-line", path: error.file, detail: error.message, cause: error })

/**
 * Read a run lazily: its files' records merged into Steps → Groups → Sessions from each line without its token arrays
 * (`Dump.withoutArrays`: a cheap index that has every summary row and the search), and each Session decoded in full
 * (`Run.open`) only when it is opened. The files' text stays in memory for that.
 */
export const load = (path: string, options: RunView.Options = {}): Effect.Effect<RunView.Run, InspectError> =>
  Effect.gen(function*() {
    const files = yield* filesAt(path)
    const texts: Array<string> = []
    const refs = new Map<string, Array<LineRef>>()
    const lines: Array<Dump.Line> = []
    for (const [f, file] of files.entries()) {
      const text = yield* Effect.try({
        try: () => readFileSync(file, "utf8"),
        catch: (error) => new InspectError({ reason: "not-found", path: file, detail: String(error), cause: error })
      })
      texts.push(text)
      const ranges = lineRanges(text)
      // The same lines without their token arrays (blank ones kept, so a bad line's number is the file's).
      const light = Dump.withoutArrays(text).split("\n")
      const read = Dump.readLines(file, light)
      if (read instanceof Dump.DumpLineError) return yield* badLine(read)
      let k = 0
      for (const [i, [start, end]] of ranges.entries()) {
        if (light[i]!.trim() === "") continue
        const line = read[k++]!
        const id = line._tag === "Debug" ? line.record.session_id : line.sample.session_id
        const key = RunView.sessionKey(line.step, id)
        const list = refs.get(key)
        if (list === undefined) refs.set(key, [{ file: f, start, end }])
        else list.push({ file: f, start, end })
      }
      lines.push(...read)
    }
    if (lines.length === 0) {
      return yield* new InspectError({ reason: "no-records", path, detail: `read ${files.length} file(s)` })
    }
    const source = resolve(path)
    const index = RunView.fromLines(source, lines, options)
    const open = (key: string): RunView.Session | Dump.DumpLineError | undefined => {
      const mine = refs.get(key)
      if (mine === undefined) return undefined
      const full: Array<Dump.Line> = []
      for (const f of new Set(mine.map((r) => r.file))) {
        const text = texts[f]!
        const read = Dump.readLines(files[f]!, mine.filter((r) => r.file === f).map((r) => text.slice(r.start, r.end)))
        if (read instanceof Dump.DumpLineError) return read
        full.push(...read)
      }
      return RunView.fromLines(source, full, options).byKey.get(key)
    }
    return { ...index, open }
  }).pipe(Effect.withSpan("Inspector.load", { attributes: { path } }))

/** A Session opened in full, for its detail (the html export and `/api/session`). */
const opened = (run: RunView.Run, key: string): Effect.Effect<RunView.Session | undefined, InspectError> => {
  const session = run.open(key)
  return session instanceof Dump.DumpLineError ? Effect.fail(badLine(session)) : Effect.succeed(session)
}

/**
 * The run's timeline (src/replay/Timeline.ts) from the replay records of its debug dumps, with a note where there are
 * none or they cannot be read (a training sample file has none; rerun with --save-debug-rollout-data).
 */
export const timeline = (
  run: RunView.Run
): Effect.Effect<Timeline.View & { readonly note?: string | undefined }, InspectError> =>
  Effect.gen(function*() {
    const sessions: Array<Recorded.Session> = []
    for (const file of yield* filesAt(run.source)) {
      const text = yield* Effect.try({
        try: () => readFileSync(file, "utf8"),
        catch: (error) => new InspectError({ reason: "not-found", path: file, detail: String(error), cause: error })
      })
      const read = Recorded.readFile(file, text)
      if (read instanceof Recorded.ReplayFormatError) return { ...Timeline.view([]), note: read.message }
      sessions.push(...read.sessions)
    }
    return sessions.length > 0 ? Timeline.view(sessions.map(Timeline.traced)) : {
      ...Timeline.view([]),
      note: "no replay record in these files: the timeline needs a debug dump (--save-debug-rollout-data)"
    }
  })

/** Token texts from a tokenizer, one decode per distinct id (special tokens kept, so they show). */
export const vocabulary = (tokenizer: Tokenizer.TokenizerShape): Tokens.Vocabulary => {
  const texts = new Map<number, string>()
  return {
    text: (id) => {
      let text = texts.get(id)
      if (text === undefined) {
        text = tokenizer.decode([id], { skipSpecialTokens: false })
        texts.set(id, text)
      }
      return text
    },
    special: (id) => tokenizer.specialTokenIds.has(id)
  }
}

const pageDir = join(import.meta.dirname, "page")
const asset = (name: string): string => readFileSync(join(pageDir, name), "utf8")

/** JSON safe inside a `<script>` element (no `</script>`, no `<!--`). */
const scriptJson = (value: unknown): string => JSON.stringify(value).replace(/</g, "\\u003c")

/**
 * The inspector as one self-contained HTML file: the page's script and style inline, the overview, the timeline and
 * every Session's detail as JSON script elements (a Session's is parsed only when it is opened).
 */
export const html = (run: RunView.Run, vocab: Tokens.Vocabulary): Effect.Effect<string, InspectError> =>
  Effect.gen(function*() {
    const parts: Array<string> = []
    parts.push(`<script type="application/json" id="inspect-overview">${scriptJson(RunView.overview(run))}</script>`)
    parts.push(`<script type="application/json" id="inspect-timeline">${scriptJson(yield* timeline(run))}</script>`)
    for (const { key } of run.sessions) {
      const session = yield* opened(run, key)
      if (session === undefined) continue
      parts.push(
        `<script type="application/json" class="inspect-session" data-key="${escapeAttribute(key)}">` +
          `${scriptJson(SessionTree.detail(run, session, vocab))}</script>`
      )
    }
    return asset("index.html")
      .replace(`<link rel="stylesheet" href="app.css">`, () => `<style>\n${asset("app.css")}</style>`)
      .replace(`<script src="app.js"></script>`, () => `${parts.join("\n")}\n<script>\n${asset("app.js")}</script>`)
  })

const escapeAttribute = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;")

/** The running inspector server. */
export interface InspectorShape {
  /** `http://127.0.0.1:PORT/`. */
  readonly url: string
  readonly port: number
}

export interface ServeOptions {
  /** Loopback only: `127.0.0.1` (default) or `::1`, `localhost`. */
  readonly host?: string | undefined
  /** 0 (default): any free port. */
  readonly port?: number | undefined
}

/** The query parameter `name` of the request being served ("" when absent). */
const queryParam = (name: string) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    return new URL(request.url, "http://inspect").searchParams.get(name) ?? ""
  })

const json = (value: unknown) =>
  HttpServerResponse.text(JSON.stringify(value), { contentType: "application/json; charset=utf-8" })

const routesOf = (run: RunView.Run, vocab: Tokens.Vocabulary) => {
  const overview = JSON.stringify(RunView.overview(run))
  const page = (name: string, contentType: string) =>
    HttpRouter.add(
      "GET",
      `/${name === "index.html" ? "" : name}`,
      Effect.sync(() => HttpServerResponse.text(asset(name), { contentType }))
    )
  return Layer.mergeAll(
    page("index.html", "text/html; charset=utf-8"),
    page("app.js", "text/javascript; charset=utf-8"),
    page("app.css", "text/css; charset=utf-8"),
    HttpRouter.add(
      "GET",
      "/api/overview",
      Effect.succeed(HttpServerResponse.text(overview, { contentType: "application/json; charset=utf-8" }))
    ),
    HttpRouter.add(
      "GET",
      "/api/session",
      Effect.gen(function*() {
        const key = yield* queryParam("key")
        const session = run.open(key)
        if (session === undefined) {
          return json({ error: `no Session ${key} in this run` }).pipe(HttpServerResponse.setStatus(404))
        }
        if (session instanceof Dump.DumpLineError) {
          return json({ error: session.message }).pipe(HttpServerResponse.setStatus(500))
        }
        return json(SessionTree.detail(run, session, vocab))
      })
    ),
    HttpRouter.add(
      "GET",
      "/api/timeline",
      timeline(run).pipe(
        Effect.map(json),
        Effect.catch((error) => Effect.succeed(json({ error: error.message }).pipe(HttpServerResponse.setStatus(500))))
      )
    ),
    HttpRouter.add(
      "GET",
      "/api/search",
      Effect.map(queryParam("q"), (q) => json({ keys: SessionTree.search(run, q) }))
    )
  )
}

/** The inspector server: serves one run on loopback for the lifetime of the layer. */
export class Inspector extends Context.Service<Inspector, InspectorShape>()("relax-agentic/Inspector") {
  static readonly layer = (run: RunView.Run, vocab: Tokens.Vocabulary, options: ServeOptions = {}) => {
    const host = options.host ?? "127.0.0.1"
    const served = HttpRouter.serve(routesOf(run, vocab), { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provideMerge(
        NodeHttpServer.layer(createServer, { host, port: options.port ?? 0, gracefulShutdownTimeout: "1 second" })
      )
    )
    return Layer.effect(
      Inspector,
      Effect.gen(function*() {
        const address = (yield* HttpServer.HttpServer).address
        const port = address._tag === "UnixPathAddress" ? 0 : address.port
        return Inspector.of({ port, url: `http://${host.includes(":") ? `[${host}]` : host}:${port}/` })
      })
    ).pipe(Layer.provide(served))
  }
}
