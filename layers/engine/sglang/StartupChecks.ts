/**
 * What the SGLang client checks before the first generation: every server's health, that the servers tokenize as
 * the gateway does, and the weight version they start from.
 *
 * **Details**
 * - `GET /health` on the router (if any) and every worker. A server that is starting answers 503
 *   (`health_generate` while its scheduler loads) or does not accept connections yet: the check asks again every
 *   `interval` until `deadline` (Relax polls the same way). Any other answer, or the deadline, refuses the start.
 * - The tokenizer check sends a probe text (special tokens, digits, spaces, non-ASCII letters: a text on which
 *   different tokenizers differ) to every worker's `POST /tokenize` and compares the ids with the gateway's tokenizer;
 *   a difference refuses the start, naming the served model from `GET /get_model_info`. A server without `/tokenize`
 *   (older SGLang) is not checked, with a warning.
 * - The initial weight version is the first worker's `GET /get_weight_version`, or `"default"`.
 */
import { Duration, Effect, Option, Schedule } from "effect"
import * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as Engine from "../Engine.ts"
import * as Http from "./Http.ts"

const formatDuration = (input: Duration.Input): string => Duration.format(Duration.fromInputUnsafe(input))

/** The gateway's tokenizer, as the check needs it. */
export interface TokenizerCheck {
  readonly source: string
  readonly encode: (text: string) => ReadonlyArray<number>
}

/** The first ids of a list, for messages. */
const preview = (ids: ReadonlyArray<number>): string =>
  `[${ids.slice(0, 12).join(", ")}${ids.length > 12 ? ", ..." : ""}]`

/** Special tokens, digits, spaces and non-ASCII letters: a text on which different tokenizers differ. */
const tokenizerProbe = "<|im_start|>user\nrelax-agentic tokenizer check: 12345, héllo wörld 你好<|im_end|>\n"

/**
 * How long the startup check waits for servers that are starting, by default: SGLang's own launch timeout
 * (`DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH`, 600 s); a large model's checkpoint can take minutes to load.
 */
export const defaultStartupTimeout: Duration.Input = "10 minutes"

/** How long the health check waits for starting servers, and the flag that names them (for messages). */
export interface HealthWait {
  readonly deadline: Duration.Input
  readonly interval: Duration.Input
  readonly flag: "--sglang-url" | "--sglang-router-url"
}

/** A server that is starting: it answers 503 or does not accept connections yet. */
const isStarting = (error: Engine.EngineError): boolean =>
  error.reason === "unreachable" || (error.reason === "status" && error.status === 503)

/** `GET /health` on every URL (concurrently), waiting for starting servers; the first unhealthy one fails. */
export const health = (
  http: Http.Http,
  urls: ReadonlyArray<string>,
  wait: HealthWait
): Effect.Effect<void, Engine.EngineError> =>
  Effect.forEach(
    urls,
    (url) =>
      http.request(url, "/health", "GET", undefined, Http.noHeaders, 30_000).pipe(
        Effect.flatMap(Http.ok(url, "/health")),
        Effect.retry({
          schedule: Schedule.spaced(wait.interval).pipe(Schedule.upTo({ duration: wait.deadline })),
          while: isStarting
        }),
        Effect.mapError((error) =>
          new Engine.EngineError({
            reason: "unhealthy",
            detail: isStarting(error)
              ? `SGLang is not healthy at ${url}: ${error.message} (still, after waiting ` +
                `${formatDuration(wait.deadline)} for it to start: --sglang-startup-timeout). Check that the server ` +
                `is running and that ${wait.flag} names it; a server still loading its model answers 503, so for a ` +
                "model that loads longer raise --sglang-startup-timeout (seconds)"
              : `SGLang is not healthy at ${url}: ${error.message}. Check the server's log, and that ${wait.flag} ` +
                "names an SGLang server",
            url,
            ...(error.status === undefined ? {} : { status: error.status }),
            cause: error
          })
        )
      ),
    { concurrency: "unbounded", discard: true }
  )

/** Refuse a server whose tokenizer gives other ids than ours; a warning when the server has no `/tokenize`. */
export const tokenizer = (
  http: Http.Http,
  tokenizer: TokenizerCheck,
  url: string
): Effect.Effect<void, Engine.EngineError> =>
  Effect.gen(function*() {
    const probe: SglangWire.TokenizeRequest = { prompt: tokenizerProbe, add_special_tokens: false }
    const answer = yield* http.request(url, "/tokenize", "POST", probe, Http.noHeaders, 10_000)
    const served = answer.status === 200
      ? yield* Http.decodeJson(SglangWire.TokenizeResponse, url, "/tokenize", answer).pipe(Effect.option)
      : Option.none()
    if (Option.isNone(served)) {
      return yield* Effect.logWarning(
        `the SGLang server at ${url} did not answer /tokenize with token ids (HTTP ${answer.status}), so its ` +
          `tokenizer was not compared with --tokenizer ${tokenizer.source}; make sure --tokenizer is the served ` +
          "model's directory"
      )
    }
    const theirs = served.value.tokens
    const ours = tokenizer.encode(tokenizerProbe)
    if (theirs.length === ours.length && theirs.every((id, i) => id === ours[i])) return
    const info = yield* http.request(url, "/get_model_info", "GET", undefined, Http.noHeaders, 10_000).pipe(
      Effect.flatMap((a) => Http.decodeJson(SglangWire.ModelInfoResponse, url, "/get_model_info", a)),
      Effect.option
    )
    const model = Option.getOrUndefined(
      Option.flatMap(info, (i) => Option.fromNullishOr(i.tokenizer_path ?? i.model_path))
    )
    return yield* new Engine.EngineError({
      reason: "tokenizer-mismatch",
      detail: `the SGLang server at ${url} tokenizes differently from --tokenizer ${tokenizer.source}` +
        `${model === undefined ? "" : ` (the server serves ${model})`}: a probe text is ${preview(theirs)} there ` +
        `and ${preview(ours)} here. Give --tokenizer the served model's directory, or every token id sent would ` +
        "be wrong",
      url
    })
  })

/** The weight version the server at `url` reports (`GET /get_weight_version`), or `"default"`. */
export const weightVersion = (http: Http.Http, url: string): Effect.Effect<string> =>
  http.request(url, "/get_weight_version", "GET", undefined, Http.noHeaders, 10_000).pipe(
    Effect.flatMap(Http.ok(url, "/get_weight_version")),
    Effect.flatMap((answer) => Http.decodeJson(SglangWire.WeightVersionResponse, url, "/get_weight_version", answer)),
    Effect.map((r) => r.weight_version),
    Effect.orElseSucceed(() => "default")
  )
