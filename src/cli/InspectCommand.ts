/**
 * `relax-agentic inspect <output-dir | debug dump>`: open a rollout's samples, SessionForests and tokens in the
 * browser (docs/inspect.md).
 *
 * **Details**
 * Without `--html` the inspector is served on loopback (`127.0.0.1`, port `--port`, default 0: any free port) until
 * Ctrl-C, and its URL printed; with `--html out.html` the page is written as one self-contained file instead (nothing
 * in it reaches the network). Token texts come from `--tokenizer` (default: the bundled Qwen3 tokenizer, as `rollout`).
 */
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { writeFileSync } from "node:fs"
import { resolve } from "node:path"
import * as Inspector from "../../layers/inspect/Inspector.ts"
import * as Replay from "../../layers/replay/Replay.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as Timeline from "../replay/Timeline.ts"
import * as CommandFlags from "./CommandFlags.ts"
import * as UserError from "./UserError.ts"

/** What `inspect` was asked to do. */
export interface InspectRequest {
  readonly path: string
  readonly html: string | undefined
  readonly port: number
  readonly tokenizer: string | undefined
  readonly rewardKey: string | undefined
  /** Write the run's Chrome trace (docs/debugging.md "Where the time went") to this file instead. */
  readonly chromeTrace?: string | undefined
}

/** Write the Chrome trace of the Sessions recorded in `path` (their replay records) to `file`; returns its path. */
export const writeChromeTrace = (path: string, file: string) =>
  Effect.gen(function*() {
    const read = yield* Replay.read(path).pipe(Effect.mapError((error) => UserError.make(error.message)))
    const trace = Timeline.chromeTrace(read.sessions.map(Timeline.traced))
    const out = resolve(file)
    yield* Effect.try({
      try: () => writeFileSync(out, JSON.stringify(trace)),
      catch: (error) => UserError.make(`--chrome-trace ${out}: cannot write the file (${String(error)})`)
    })
    return out
  })

/**
 * Read the run and either write the HTML file (returning its path) or serve the page; `onServing` gets the URL once
 * the server listens, and the effect then runs until interrupted.
 */
export const runInspect = (request: InspectRequest, onServing: (url: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    if (request.port < 0 || request.port > 65535) {
      return yield* UserError.make(`--port: ${request.port} is not a port; use 0-65535 (0: any free port)`)
    }
    if (request.chromeTrace !== undefined) return yield* writeChromeTrace(request.path, request.chromeTrace)
    const run = yield* Inspector.load(request.path, { rewardKey: request.rewardKey }).pipe(
      Effect.mapError((error) => UserError.make(error.message))
    )
    const tokenizer = yield* Tokenizer.load(request.tokenizer).pipe(
      Effect.mapError((error) =>
        UserError.make(
          `--tokenizer ${error.directory}: cannot load the tokenizer (${error.detail}); give the directory the rollout used`
        )
      )
    )
    const vocab = Inspector.vocabulary(tokenizer)
    if (request.html !== undefined) {
      const out = resolve(request.html)
      const text = yield* Inspector.html(run, vocab).pipe(Effect.mapError((error) => UserError.make(error.message)))
      yield* Effect.try({
        try: () => writeFileSync(out, text),
        catch: (error) => UserError.make(`--html ${out}: cannot write the file (${String(error)})`)
      })
      return out
    }
    return yield* Effect.gen(function*() {
      const server = yield* Inspector.Inspector
      yield* onServing(server.url)
      return yield* Effect.never
    }).pipe(
      Effect.provide(Inspector.Inspector.layer(run, vocab, { port: request.port })),
      Effect.mapError((error) =>
        UserError.make(
          `--port ${request.port}: cannot listen on 127.0.0.1 (${error.message}); choose another port, or 0 for any free one`
        )
      )
    )
  })

const flags = {
  html: CommandFlags.optionalString(
    "html",
    "Write the inspector as one self-contained HTML file instead of serving it"
  ),
  port: Flag.Int("port").pipe(Flag.withDefault(0), Flag.withDescription("Port on 127.0.0.1 (0: any free port)")),
  tokenizer: CommandFlags.optionalString(
    "tokenizer",
    "Tokenizer directory for the token texts (default: the bundled Qwen3 tokenizer)"
  ),
  rewardKey: CommandFlags.optionalString("reward-key", "Key of an object reward's primary value (default: score)"),
  chromeTrace: CommandFlags.optionalString(
    "chrome-trace",
    "Write the Sessions' time as a Chrome trace (Perfetto, chrome://tracing) to this file"
  )
}

/** The flags of `inspect` (docs/inspect.md; the docs test checks the pages name only flags that exist). */
export const inspectFlagNames: ReadonlyArray<string> = CommandFlags.flagNames(flags)

/** `relax-agentic inspect <path> [--html out.html] [--port N] [--tokenizer DIR] [--reward-key KEY]`. */
export const inspectCommand = Command.make(
  "inspect",
  {
    path: Argument.String("path").pipe(
      Argument.withDescription("An --output-dir, or one file: a --save-debug-rollout-data dump or a rollout_<id>.jsonl")
    ),
    ...flags
  },
  (values) =>
    Effect.gen(function*() {
      const written = yield* runInspect(
        {
          path: values.path,
          html: Option.getOrUndefined(values.html),
          port: values.port,
          tokenizer: Option.getOrUndefined(values.tokenizer),
          rewardKey: Option.getOrUndefined(values.rewardKey),
          chromeTrace: Option.getOrUndefined(values.chromeTrace)
        },
        (url) => Console.log(`relax-agentic inspect: ${url} (Ctrl-C to stop)`)
      )
      yield* Console.log(`relax-agentic inspect: wrote ${written}`)
    })
).pipe(Command.withDescription(
  "Inspect a rollout's samples, SessionForests and tokens in the browser: served on 127.0.0.1, or --html out.html."
))
