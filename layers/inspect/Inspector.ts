/**
 * `relax-agentic inspect`: read a run's files, and serve the inspector page on loopback or write it as one
 * self-contained HTML file (docs/inspect.md).
 *
 * **Details**
 * {@link load} reads an output directory (every `.jsonl` but the metric files: samples, Eval samples and any debug
 * dump written there) or one file, with the tokenizer that gives each token its text. The server answers the page
 * (`/`, `/app.js`, `/app.css`, shipped beside this file in `page/`), the run's overview (`/api/overview`), one
 * Session's detail (`/api/session?key=`) and a search (`/api/search?q=`); details are built when asked, so a large
 * run opens at the cost of its summaries. {@link html} inlines the page, the overview and every Session's detail
 * (each in its own JSON script element, parsed when opened): nothing is fetched, from the network or otherwise.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { join, resolve } from "node:path"
import * as Dump from "../../src/inspect/Dump.ts"
import * as Model from "../../src/inspect/Model.ts"
import * as SessionTree from "../../src/inspect/SessionTree.ts"
import type * as Tokens from "../../src/inspect/Tokens.ts"
import type { TokenizerShape } from "../tokenizer/Tokenizer.ts"

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

/** Read a run: its files' records merged into Steps → Groups → Sessions. */
export const load = (path: string, options: Model.Options = {}): Effect.Effect<Model.Run, InspectError> =>
  Effect.gen(function*() {
    const files = yield* filesAt(path)
    const lines: Array<Dump.Line> = []
    for (const file of files) {
      const text = yield* Effect.try({
        try: () => readFileSync(file, "utf8"),
        catch: (error) => new InspectError({ reason: "not-found", path: file, detail: String(error), cause: error })
      })
      const read = Dump.readFile(file, text)
      if (read instanceof Dump.DumpLineError) {
        return yield* new InspectError({ reason: "bad-line", path: file, detail: read.message, cause: read })
      }
      lines.push(...read)
    }
    if (lines.length === 0) {
      return yield* new InspectError({ reason: "no-records", path, detail: `read ${files.length} file(s)` })
    }
    return Model.fromLines(resolve(path), lines, options)
  }).pipe(Effect.withSpan("Inspector.load", { attributes: { path } }))

/** Token texts from a tokenizer, one decode per distinct id (special tokens kept, so they show). */
export const vocabulary = (tokenizer: TokenizerShape): Tokens.Vocabulary => {
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
 * The inspector as one self-contained HTML file: the page's script and style inline, the overview and every Session's
 * detail as JSON script elements (a Session's is parsed only when it is opened).
 */
export const html = (run: Model.Run, vocab: Tokens.Vocabulary): string => {
  const parts: Array<string> = []
  parts.push(`<script type="application/json" id="inspect-overview">${scriptJson(Model.overview(run))}</script>`)
  for (const session of run.sessions) {
    parts.push(
      `<script type="application/json" class="inspect-session" data-key="${escapeAttribute(session.key)}">` +
        `${scriptJson(SessionTree.detail(run, session, vocab))}</script>`
    )
  }
  return asset("index.html")
    .replace(`<link rel="stylesheet" href="app.css">`, () => `<style>\n${asset("app.css")}</style>`)
    .replace(`<script src="app.js"></script>`, () => `${parts.join("\n")}\n<script>\n${asset("app.js")}</script>`)
}

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

const json = (value: unknown) =>
  HttpServerResponse.text(JSON.stringify(value), { contentType: "application/json; charset=utf-8" })

const routesOf = (run: Model.Run, vocab: Tokens.Vocabulary) => {
  const overview = JSON.stringify(Model.overview(run))
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
        const request = yield* HttpServerRequest.HttpServerRequest
        const key = new URL(request.url, "http://inspect").searchParams.get("key") ?? ""
        const session = run.byKey.get(key)
        if (session === undefined) {
          return json({ error: `no Session ${key} in this run` }).pipe(HttpServerResponse.setStatus(404))
        }
        return json(SessionTree.detail(run, session, vocab))
      })
    ),
    HttpRouter.add(
      "GET",
      "/api/search",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const q = new URL(request.url, "http://inspect").searchParams.get("q") ?? ""
        return json({ keys: SessionTree.search(run, q) })
      })
    )
  )
}

/** The inspector server: serves one run on loopback for the lifetime of the layer. */
export class Inspector extends Context.Service<Inspector, InspectorShape>()("relax-agentic/Inspector") {
  static readonly layer = (run: Model.Run, vocab: Tokens.Vocabulary, options: ServeOptions = {}) => {
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
