/**
 * The replay recorder (docs/debugging.md "The replay record"): with `--save-debug-rollout-data`, every model request
 * a Session's agent sends and every engine answer it got, in order, kept until the Session's samples are built.
 *
 * **Details**
 * It sits at the boundary of the generation core on both sides and changes nothing in between: {@link wrapGeneration}
 * wraps `Generation.generate` (the canonical request as the gateway decoded it, and the completion or error the agent
 * got) and {@link wrapEngine} wraps `Engine.generate` (each attempt's answer). An attempt finds its request through a
 * context reference the generation wrapper provides to the request's fiber (the attempts run in it or its children).
 * The Session runner starts a Session's record when it registers it and takes it with its samples
 * (`src/replay/Record.ts` is the format). Without dumps nothing is wrapped: `src/index.ts` composes it only then.
 */
import { Clock, Context, Effect, Exit, Layer } from "effect"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as Received from "../../src/replay/Received.ts"
import * as Record from "../../src/replay/Record.ts"
import * as Engine from "../engine/Engine.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import * as Generation from "./Generation.ts"

/** A request being recorded: its entry's fields so far. */
interface Draft {
  readonly attempts: Array<Record.Attempt>
}

/** The request the running fiber records its engine attempts into (none outside a recorded request). */
const CurrentDraft = Context.Reference<Draft | undefined>("relax-agentic/CurrentDraft", {
  defaultValue: () => undefined
})

/**
 * The gateway's side of a request being recorded: the body it received, and (set by the recorder) where the answer
 * the agent received goes once the gateway sent it.
 */
export interface GatewayExchange {
  readonly body: Received.Json
  answered: ((answer: Received.Answer) => void) | undefined
}

/** The gateway exchange of the request the running fiber generates (none for a request made without the gateway). */
export const CurrentExchange = Context.Reference<GatewayExchange | undefined>("relax-agentic/CurrentExchange", {
  defaultValue: () => undefined
})

/** A gateway exchange for a received body (parsed; its text when it is not JSON). */
export const exchangeOf = (bytes: Uint8Array | string): GatewayExchange => {
  const text = typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes)
  let body: Received.Json
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { body, answered: undefined }
}

/** A Session's record while it runs. */
interface Recording {
  readonly startedAt: number
  /** In arrival order; each filled in when its request ends. */
  readonly requests: Array<{ value: Record.Request }>
  previous: Canonical.State | undefined
  previousBody: Received.JsonObject | undefined
  info: Pick<Record.SessionRecord, "mode" | "sampling" | "max_context_len"> | undefined
}

export interface RecorderShape {
  /** Start a Session's record (when it is registered: its agent launches right after). */
  readonly begin: (sessionId: string) => Effect.Effect<void>
  /**
   * The Session's record (and forget it); `undefined` when it was never begun. `committed`: the request ids its forest
   * names as a response's (`request_id`): those requests' attempts keep their counts only, their ids and logprobs
   * being that response's. A request whose response was already in the forest (another request generated the same
   * one) keeps them.
   */
  readonly take: (
    sessionId: string,
    committed: (rid: string) => boolean
  ) => Effect.Effect<Record.SessionRecord | undefined>
  readonly wrapGeneration: (inner: Generation.GenerationShape) => Generation.GenerationShape
  readonly wrapEngine: (inner: Engine.EngineShape) => Engine.EngineShape
}

const samplingOf = (session: Sessions.SessionEntry): Record.Sampling => ({
  temperature: session.sampling.temperature,
  top_p: session.sampling.topP,
  top_k: session.sampling.topK,
  max_new_tokens: session.sampling.maxNewTokens,
  stop: [...session.sampling.stop],
  stop_token_ids: [...session.sampling.stopTokenIds],
  ...(session.sampling.seed === undefined ? {} : { seed: session.sampling.seed })
})

/** The protocol of a request decoded before adapters named it (tests' literals): by its tool-call id prefix. */
const protocolOf = (request: Completion.CanonicalRequest): Record.Request["protocol"] =>
  request.protocol ?? (request.toolCallIdPrefix === "toolu_" ? "messages" : "chat")

export const make = (generation: Record.GenerationSettings) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const recordings = new Map<string, Recording>()

    const wrapGeneration = (inner: Generation.GenerationShape): Generation.GenerationShape => ({
      ...inner,
      generate: (session, request) =>
        Effect.withFiber((fiber) => {
          const exchange = fiber.getRef(CurrentExchange)
          const recording = recordings.get(session.sessionId)
          if (recording === undefined) return inner.generate(session, request)
          recording.info ??= {
            mode: session.mode,
            sampling: samplingOf(session),
            max_context_len: session.maxContextLen ?? null
          }
          const at = now()
          const firstRollout = session.rolloutId()
          const delta = Record.delta(recording.previous, request.state)
          recording.previous = request.state
          const draft: Draft = { attempts: [] }
          const body = exchange !== undefined && Received.isObject(exchange.body) ? exchange.body : undefined
          const bodyDelta = body === undefined ? undefined : Received.bodyDelta(recording.previousBody, body)
          if (body !== undefined) recording.previousBody = body
          const slot = {
            value: {
              at,
              done_at: at,
              protocol: protocolOf(request),
              stream: request.stream,
              model: request.model,
              ...delta,
              ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
              stop: [...request.stop],
              ...(request.seed === undefined ? {} : { seed: request.seed }),
              logprobs: request.logprobs,
              ...(request.topLogprobs === undefined ? {} : { top_logprobs: request.topLogprobs }),
              rollout_ids: [firstRollout, firstRollout],
              attempts: draft.attempts,
              ...(bodyDelta === undefined ? {} : { body: bodyDelta })
            } satisfies Record.Request as Record.Request
          }
          recording.requests.push(slot)
          if (exchange !== undefined) {
            exchange.answered = (answer) => {
              slot.value = { ...slot.value, answer }
            }
          }
          return inner.generate(session, request).pipe(
            Effect.provideService(CurrentDraft, draft),
            Effect.onExit((exit) =>
              Effect.sync(() => {
                slot.value = {
                  ...slot.value,
                  done_at: now(),
                  rollout_ids: [firstRollout, session.rolloutId()],
                  ...(Exit.isSuccess(exit) ? {} : { error: errorTag(exit) })
                }
              })
            )
          )
        })
    })

    const wrapEngine = (inner: Engine.EngineShape): Engine.EngineShape => ({
      ...inner,
      generate: (request) =>
        Effect.withFiber((fiber) => {
          const draft = fiber.getRef(CurrentDraft)
          if (draft === undefined) return inner.generate(request)
          const at = now()
          return Effect.tap(inner.generate(request), (result) =>
            Effect.sync(() => {
              draft.attempts.push({
                at,
                done_at: now(),
                rid: request.rid,
                n: result.outputIds.length,
                ids: [...result.outputIds],
                logprobs: [...result.logprobs],
                finish: result.finishReason,
                weight_version: result.weightVersion,
                ...(result.weightVersions === undefined ? {} : { weight_versions: [...result.weightVersions] }),
                ...(result.cutByUpdate === true ? { cut_by_update: true } : {}),
                prompt_tokens: result.promptTokens,
                cached_tokens: result.cachedTokens
              })
            }))
        })
    })

    const begin = (sessionId: string) =>
      Effect.sync(() => {
        recordings.set(sessionId, {
          startedAt: now(),
          requests: [],
          previous: undefined,
          previousBody: undefined,
          info: undefined
        })
      })

    const take = (sessionId: string, committed: (rid: string) => boolean) =>
      Effect.sync((): Record.SessionRecord | undefined => {
        const recording = recordings.get(sessionId)
        recordings.delete(sessionId)
        if (recording === undefined) return undefined
        return {
          version: Record.version,
          generation,
          mode: recording.info?.mode ?? "train",
          sampling: recording.info?.sampling ?? {
            temperature: 1,
            top_p: 1,
            top_k: -1,
            max_new_tokens: 0,
            stop: [],
            stop_token_ids: []
          },
          max_context_len: recording.info?.max_context_len ?? null,
          started_at: recording.startedAt,
          requests: recording.requests.map(({ value }) => {
            const rid = value.attempts[0]?.rid
            // A committed response holds the attempts' ids and logprobs: the record keeps their counts only.
            return value.error === undefined && rid !== undefined && committed(rid)
              ? { ...value, attempts: value.attempts.map(({ ids: _ids, logprobs: _logprobs, ...attempt }) => attempt) }
              : value
          })
        }
      })

    return { begin, take, wrapGeneration, wrapEngine } satisfies RecorderShape
  })

/** The tag of a generation's failure (`interrupted` when it was interrupted). */
const errorTag = (exit: Exit.Failure<unknown, { readonly _tag: string }>): string => {
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason !== undefined && reason._tag === "Fail" ? reason.error._tag : "interrupted"
}

export class ReplayRecorder extends Context.Service<ReplayRecorder, RecorderShape>()("relax-agentic/ReplayRecorder") {
  /** The recorder of a rollout whose generation core runs with `generation`. */
  static readonly layer = (generation: Record.GenerationSettings): Layer.Layer<ReplayRecorder> =>
    Layer.effect(ReplayRecorder, make(generation))
}

/** `engine` with its attempts recorded. */
export const recordingEngine = <E, R>(
  engine: Layer.Layer<Engine.Engine, E, R>
): Layer.Layer<Engine.Engine, E, R | ReplayRecorder> =>
  Layer.effect(
    Engine.Engine,
    Effect.map(Effect.all([Engine.Engine, ReplayRecorder]), ([inner, recorder]) => recorder.wrapEngine(inner))
  ).pipe(Layer.provide(engine))

/** `generation` with its requests recorded. */
export const recordingGeneration = <E, R>(
  generation: Layer.Layer<Generation.Generation, E, R>
): Layer.Layer<Generation.Generation, E, R | ReplayRecorder> =>
  Layer.effect(
    Generation.Generation,
    Effect.map(
      Effect.all([Generation.Generation, ReplayRecorder]),
      ([inner, recorder]) => recorder.wrapGeneration(inner)
    )
  ).pipe(Layer.provide(generation))
