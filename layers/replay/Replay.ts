/**
 * `replay` (docs/debugging.md "Replay"): re-drive each recorded Session's model requests through today's generation
 * core (its protocols' canonical requests, matching, templates, tokenizer, parsers, SessionForest and export) with an
 * engine that answers the recorded ids, and compare the states, the answers and the samples with the recording.
 *
 * **Details**
 * Each Session runs alone on a fresh forest, its requests in arrival order, each request's engine attempts answered
 * from its recorded attempts (an aborted attempt the recording resumed is resumed again, as a parked one is), its
 * step read as the recording saw it when the request arrived and when it ended. The generation settings are the
 * recording's (`replay.generation`) unless `ReplayOptions` changes them: a replay after a change shows where it
 * changes the data. The first difference of a Session is its outcome (later ones follow from it).
 */
import { Data, Effect, Exit, Layer, Result } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Sample from "../../src/forest/Sample.ts"
import * as Dump from "../../src/inspect/Dump.ts"
import * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as ParserRegistry from "../../src/parsers/ParserRegistry.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Compare from "../../src/replay/Compare.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Record from "../../src/replay/Record.ts"
import * as Recorded from "../../src/replay/Recorded.ts"
import * as Engine from "../engine/Engine.ts"
import * as Answer from "../gateway/Answer.ts"
import * as Gateway from "../gateway/Gateway.ts"
import * as Forests from "../generation/Forests.ts"
import * as Generation from "../generation/Generation.ts"
import * as Sessions from "../schedule/Sessions.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"

/** What a replay changes from the recording (the deliberate change whose effect it shows). */
export interface ReplayOptions {
  /** Replay only these Sessions. */
  readonly sessions?: ReadonlyArray<string> | undefined
  /** Another tokenizer directory (its chat template and vocabulary). */
  readonly tokenizer?: string | undefined
  /** Another `--agentic-tool-call-parser` / `--agentic-reasoning-parser`. */
  readonly toolCallParser?: string | undefined
  readonly reasoningParser?: string | undefined
}

/** One Session's outcome. */
export interface SessionOutcome {
  readonly sessionId: string
  readonly requests: number
  readonly divergence: Compare.Divergence | undefined
  /** `identical` or the first divergence, as `replay` prints it. */
  readonly line: string
}

export interface ReplayReport {
  readonly sessions: ReadonlyArray<SessionOutcome>
  /** Sessions that could not be read (a truncated file), with why. */
  readonly unreadable: ReadonlyArray<Recorded.Unreadable>
  /** Every replayed Session identical and none unreadable. */
  readonly identical: boolean
}

/** The input of `replay` or `rescore` cannot be used: what was wrong and what to do. */
export class ReplayInputError extends Data.TaggedError("ReplayInputError")<{
  readonly reason: "read" | "unknown-session" | "settings" | "gateway"
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    switch (this.reason) {
      case "read":
        return `${this.path}: cannot read it (${this.detail}); give a run's --output-dir or one ` +
          "--save-debug-rollout-data file"
      case "unknown-session":
        return `--session ${this.detail}: no such Session in ${this.path}. Session ids are the session_id of the ` +
          "debug dump's lines: `relax-agentic replay <path>` prints one line per Session, `relax-agentic inspect " +
          "<path>` lists them, or `jq -r .session_id <dump>`"
      case "settings":
        return `${this.path}: ${this.detail}`
      case "gateway":
        return `replay's gateway at ${this.path} failed (${this.detail}); it serves on 127.0.0.1, port 0: ` +
          "check that loopback connections are allowed"
    }
  }
}

/** The `.jsonl` files of a run directory (or the one file given), sorted. */
export const dumpFiles = (path: string): Effect.Effect<ReadonlyArray<string>, ReplayInputError> =>
  Effect.try({
    try: () => {
      const absolute = Path.resolve(path)
      if (!Fs.statSync(absolute).isDirectory()) return [absolute]
      return Fs.readdirSync(absolute).filter(Dump.isReadable).sort().map((name) => Path.join(absolute, name))
    },
    catch: (error) => new ReplayInputError({ reason: "read", path, detail: String(error) })
  })

/** Every recorded Session of a run directory or dump file. */
export const read = (path: string): Effect.Effect<Recorded.Read, ReplayInputError | Recorded.ReplayFormatError> =>
  Effect.gen(function*() {
    const files = yield* dumpFiles(path)
    const sessions: Array<Recorded.Session> = []
    const unreadable: Array<Recorded.Unreadable> = []
    for (const file of files) {
      const text = yield* Effect.try({
        try: () => Fs.readFileSync(file, "utf8"),
        catch: (error) => new ReplayInputError({ reason: "read", path: file, detail: String(error) })
      })
      const read = Recorded.readFile(file, text)
      if (read instanceof Recorded.ReplayFormatError) return yield* read
      sessions.push(...read.sessions)
      unreadable.push(...read.unreadable)
    }
    if (sessions.length === 0 && unreadable.length === 0) {
      return yield* new Recorded.ReplayFormatError({
        reason: "no-record",
        file: path,
        line: 0,
        detail: "no debug-dump record in it"
      })
    }
    return { sessions, unreadable }
  })

/** The recorded Sessions `ids` selects (all when empty); an unknown id is an error saying how to find them. */
export const select = (
  path: string,
  read: Recorded.Read,
  ids: ReadonlyArray<string> | undefined
): Result.Result<Recorded.Read, ReplayInputError> => {
  if (ids === undefined || ids.length === 0) return Result.succeed(read)
  const known = new Set([...read.sessions.map((s) => s.sessionId), ...read.unreadable.map((u) => u.sessionId)])
  const unknown = ids.find((id) => !known.has(id))
  if (unknown !== undefined) {
    return Result.fail(new ReplayInputError({ reason: "unknown-session", path, detail: unknown }))
  }
  const wanted = new Set(ids)
  return Result.succeed({
    sessions: read.sessions.filter((s) => wanted.has(s.sessionId)),
    unreadable: read.unreadable.filter((u) => u.sessionId !== undefined && wanted.has(u.sessionId))
  })
}

/** The engine answers of a recorded request, ids and logprobs taken from its committed response when it kept them. */
export const recordedAnswers = (
  request: Record.Request,
  forest: ForestDump.ForestDump
): ReadonlyArray<Engine.GenerateResult> => {
  const rid = request.attempts[0]?.rid
  const committed = rid === undefined ? undefined : forest.nodes.find((n) => n.kind === "resp" && n.request_id === rid)
  let offset = 0
  return request.attempts.map((attempt, i): Engine.GenerateResult => {
    const ids = attempt.ids ?? committed?.tokens.slice(offset, offset + attempt.n) ?? []
    const logprobs = attempt.logprobs ?? committed?.logprobs?.slice(offset, offset + attempt.n) ?? []
    offset += attempt.n
    const resumed = attempt.finish.type === "abort" && i < request.attempts.length - 1
    return {
      outputIds: ids,
      logprobs,
      finishReason: attempt.finish,
      promptTokens: attempt.prompt_tokens,
      cachedTokens: attempt.cached_tokens,
      weightVersion: attempt.weight_version,
      ...(attempt.weight_versions === undefined ? {} : { weightVersions: attempt.weight_versions }),
      // The recording resumed it (parked at a step's close or cut by an update): replay resumes it too.
      ...(attempt.cut_by_update === true || resumed ? { cutByUpdate: true } : {})
    }
  })
}

/** An engine that answers each attempt with the next recorded answer of the request being replayed. */
const scriptEngine = () => {
  let queue: Array<Engine.GenerateResult> = []
  let served = 0
  const engine: Engine.EngineShape = {
    generate: () =>
      Effect.suspend(() => {
        const next = queue.shift()
        if (next === undefined) {
          return Effect.fail(
            new Engine.EngineError({ reason: "bad-answer", detail: "the recording has no further engine answer" })
          )
        }
        served++
        return Effect.succeed(next)
      }),
    abort: () => Effect.void,
    weightVersion: Effect.succeed("0"),
    updateWeights: () => Effect.succeed("0"),
    pauseGeneration: () => Effect.void,
    resumeGeneration: () => Effect.succeed("0"),
    health: Effect.void,
    closeSession: () => Effect.void,
    takeStepMetrics: Effect.succeed({})
  }
  return {
    engine,
    load: (answers: ReadonlyArray<Engine.GenerateResult>) => {
      queue = [...answers]
      served = 0
    },
    /** Whether every answer of the request was served. */
    done: () => queue.length === 0,
    served: () => served
  }
}

/** The generation options of a recording with a replay's changes. */
export const generationOptions = (
  settings: Record.GenerationSettings,
  options: ReplayOptions
): Result.Result<Generation.GenerationOptions, ParserRegistry.UnknownParserError> =>
  Result.gen(function*() {
    const toolName = options.toolCallParser ?? settings.tool_call_parser
    const reasoningName = options.reasoningParser ?? settings.reasoning_parser
    return {
      toolCallParser: toolName === null ? undefined : yield* ParserRegistry.ToolCallParsers.get(toolName),
      reasoningParser: reasoningName === null ? undefined : yield* ParserRegistry.ReasoningParsers.get(reasoningName),
      strictMatch: settings.strict_match,
      skipSpecialTokens: settings.skip_special_tokens,
      allowSpecialTokens: settings.allow_special_tokens,
      failUnparsedTurns: settings.fail_unparsed_turns
    }
  })

/** The canonical request of a recorded one. */
export const canonicalOf = (request: Record.Request, state: Canonical.State): Completion.CanonicalRequest => ({
  state,
  model: request.model,
  stream: request.stream,
  stop: request.stop,
  logprobs: request.logprobs,
  toolCallIdPrefix: request.protocol === "messages" ? "toolu_" : "call_",
  protocol: request.protocol,
  ...(request.max_tokens === undefined ? {} : { maxTokens: request.max_tokens }),
  ...(request.seed === undefined ? {} : { seed: request.seed }),
  ...(request.top_logprobs === undefined ? {} : { topLogprobs: request.top_logprobs })
})

/** The live Session a recorded one is replayed as (its id, mode, sampling and context limit; always leased). */
export const sessionEntry = (recorded: Recorded.Session, rolloutId: () => number): Sessions.SessionEntry => {
  const { record } = recorded
  return {
    sessionId: recorded.sessionId,
    groupId: "replay",
    mode: record.mode,
    sampling: {
      temperature: record.sampling.temperature,
      topP: record.sampling.top_p,
      topK: record.sampling.top_k,
      maxNewTokens: record.sampling.max_new_tokens,
      stop: record.sampling.stop,
      stopTokenIds: record.sampling.stop_token_ids,
      ...(record.sampling.seed === undefined ? {} : { seed: record.sampling.seed })
    },
    maxContextLen: record.max_context_len ?? undefined,
    rolloutId,
    awaitLease: Effect.void,
    counters: Sessions.emptyCounters()
  }
}

/** Where each protocol's requests are sent (the `/v1` paths, as the SDKs call them). */
const protocolPaths: Readonly<Record<Record.Request["protocol"], string>> = {
  chat: "/v1/chat/completions",
  responses: "/v1/responses",
  messages: "/v1/messages"
}

/** Send one recorded body to the gateway as the agent did; what the agent received (SSE: its terminal frames). */
const send = (
  baseUrl: string,
  sessionId: string,
  protocol: Record.Request["protocol"],
  body: Received.JsonObject
): Effect.Effect<Received.Answer, ReplayInputError> =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(`${baseUrl}${protocolPaths[protocol]}`, {
        method: "POST",
        headers: { authorization: `Bearer ${sessionId}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      const text = await response.text()
      if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        return Received.ofJson(response.status, text)
      }
      const frames = Answer.sseFrames[protocol]
      return { status: response.status, frames: Received.framesOfText(text, [frames.connected, frames.heartbeat]) }
    },
    catch: (error) => new ReplayInputError({ reason: "gateway", path: baseUrl, detail: String(error) })
  })

/** Replay one Session through the gateway; its first divergence, if any. */
const replaySession = (recorded: Recorded.Session, script: ReturnType<typeof scriptEngine>) =>
  Effect.gen(function*() {
    const forests = yield* Forests.Forests
    const sessions = yield* Sessions.Sessions
    const gateway = yield* Gateway.Gateway
    const tokenizer = yield* Tokenizer.Tokenizer
    const { record } = recorded
    const first = recorded.samples[0]
    const forest = yield* forests.create(recorded.sessionId, {
      groupIndex: first?.group_index ?? 0,
      index: first?.index ?? 0,
      chatTemplateKwargs: record.generation.apply_chat_template_kwargs
    })
    let steps: readonly [number, number] = [0, 0]
    // The step as the recording saw it when the request arrived, then (once its last answer is served) when it ended.
    const entry = sessionEntry(recorded, () => script.served() > 0 && script.done() ? steps[1] : steps[0])
    yield* sessions.register(entry)
    const byHash = new Map(recorded.forest.nodes.map((n) => [n.hash, n]))
    let previous: Received.JsonObject | undefined
    for (let i = 0; i < record.requests.length; i++) {
      const request = record.requests[i]!
      const number = i + 1
      if (request.body === undefined) {
        return Compare.values(number, "body", "(not recorded: the request did not come through the gateway)", "")
      }
      const body = Received.bodyOf(previous, request.body)
      previous = body
      const answers = recordedAnswers(request, recorded.forest)
      script.load(answers)
      const before = forest.nodes.size
      steps = request.rollout_ids
      const answer = yield* send(gateway.baseUrl, recorded.sessionId, request.protocol, body)
      const added = ForestDump.ofForest(forest).nodes.slice(before)
      const rid = request.attempts[0]?.rid
      const recordedResponse = rid === undefined
        ? undefined
        : recorded.forest.nodes.find((n) => n.kind === "resp" && n.request_id === rid)
      const nowResponse = added.find((n) => n.kind === "resp")
      const divergence = Compare.first(
        ...added.filter((n) => n.kind === "obs").map((node) => () => {
          const mine = byHash.get(node.hash)
          return mine === undefined
            ? Compare.values(number, "observation state_hash", recordedResponse?.parent ?? "(none)", node.hash)
            : Compare.observation(number, mine, node)
        }),
        () =>
          recordedResponse === undefined || nowResponse === undefined
            ? Compare.values(number, "response state_hash", recordedResponse?.hash, nowResponse?.hash)
            : Compare.response(number, recordedResponse, nowResponse),
        () => Compare.values(number, "engine attempts", answers.length, script.served()),
        () => Compare.answer(number, request.answer, answer)
      )
      if (divergence !== undefined) return divergence
    }
    for (const sample of recorded.samples) {
      const leaf = sample.leaf_state_hash
      if (leaf === null) continue
      if (!forest.nodes.has(leaf)) {
        return Compare.values(undefined, `sample ${sample.export_name ?? "(implicit)"} leaf state`, leaf, "(missing)")
      }
      const built = Sample.build(forest, leaf, (ids) => tokenizer.decode(ids), {
        rolloutId: typeof sample.rollout_id === "number" ? sample.rollout_id : 0,
        exportName: sample.export_name,
        reward: null,
        metadata: {}
      })
      const found = Compare.sample(sample, built)
      if (found !== undefined) return found
    }
    return undefined
  })

/** {@link replaySession}, its Session and forest removed afterwards. */
const replayAndForget = (recorded: Recorded.Session, script: ReturnType<typeof scriptEngine>) =>
  Effect.flatMap(
    Effect.all([Forests.Forests, Sessions.Sessions]),
    ([forests, sessions]) =>
      replaySession(recorded, script).pipe(
        Effect.ensuring(Effect.andThen(sessions.remove(recorded.sessionId), forests.remove(recorded.sessionId)))
      )
  )

/** The tag of a failed request's error (`interrupted` when it was interrupted). */
export const errorTag = (exit: Exit.Exit<unknown, { readonly _tag: string }>): string => {
  if (Exit.isSuccess(exit)) return "an answer"
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason !== undefined && reason._tag === "Fail" ? reason.error._tag : "interrupted"
}

/** The tokenizer of a replay: `directory`, or the bundled one for `null`. */
export const tokenizerLayer = (path: string, directory: string | null) =>
  Layer.effect(
    Tokenizer.Tokenizer,
    Tokenizer.load(directory ?? undefined).pipe(
      Effect.mapError((error) => new ReplayInputError({ reason: "settings", path, detail: error.message }))
    )
  )

/**
 * The services of a replay: a gateway on loopback (port 0) over the generation core, with the recorded settings and
 * `options`' changes, over the script engine.
 */
const servicesOf = (
  path: string,
  settings: Record.GenerationSettings,
  options: ReplayOptions,
  generation: Generation.GenerationOptions,
  script: ReturnType<typeof scriptEngine>
) => {
  const tokenizer = tokenizerLayer(path, options.tokenizer ?? settings.tokenizer)
  return Gateway.Gateway.layer({ host: "127.0.0.1", port: 0 }).pipe(
    Layer.provideMerge(Sessions.Sessions.layer),
    Layer.provideMerge(Generation.Generation.layer(generation)),
    Layer.provideMerge(Forests.Forests.layer),
    Layer.provideMerge(Layer.succeed(Engine.Engine, script.engine)),
    Layer.provideMerge(tokenizer)
  )
}

/** Replay the recorded Sessions of `path` (a run's output directory or one debug dump). */
export const replay = (
  path: string,
  options: ReplayOptions = {}
): Effect.Effect<ReplayReport, ReplayInputError | Recorded.ReplayFormatError> =>
  Effect.gen(function*() {
    const all = yield* read(path)
    const chosen = yield* Effect.fromResult(select(path, all, options.sessions))
    // Sessions recorded with the same settings share one set of services (a tokenizer loads once).
    const bySettings = new Map<string, Array<Recorded.Session>>()
    for (const session of chosen.sessions) {
      const key = JSON.stringify(session.record.generation)
      bySettings.set(key, [...(bySettings.get(key) ?? []), session])
    }
    const outcomes: Array<SessionOutcome> = []
    for (const sessions of bySettings.values()) {
      const script = scriptEngine()
      const settings = sessions[0]!.record.generation
      const generation = yield* Effect.fromResult(generationOptions(settings, options)).pipe(
        Effect.mapError((error) => new ReplayInputError({ reason: "settings", path, detail: error.message }))
      )
      yield* Effect.gen(function*() {
        for (const session of sessions) {
          const divergence = yield* replayAndForget(session, script)
          const requests = session.record.requests.length
          outcomes.push({
            sessionId: session.sessionId,
            requests,
            divergence,
            line: Compare.line(session.sessionId, requests, divergence)
          })
        }
      }).pipe(
        Effect.provide(servicesOf(path, settings, options, generation, script)),
        Effect.catchTag(
          "ServeError",
          (error) => Effect.fail(new ReplayInputError({ reason: "gateway", path, detail: error.message }))
        )
      )
    }
    return {
      sessions: outcomes,
      unreadable: chosen.unreadable,
      identical: chosen.unreadable.length === 0 && outcomes.every((o) => o.divergence === undefined)
    }
  })

/** The lines `replay` prints: one per Session, then one per Session it could not read. */
export const reportLines = (report: ReplayReport): ReadonlyArray<string> => [
  ...report.sessions.map((s) => s.line),
  ...report.unreadable.map((u) =>
    `${u.sessionId ?? "(unknown Session)"} not replayed: ${u.reason} (${u.file}:${u.line})`
  )
]
