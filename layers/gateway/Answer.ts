/**
 * How the gateway writes a model request's answer and reads its body: errors in the protocol's shape, Buffered-SSE
 * frames and heartbeats, the 499 log line. The model route (`ModelRoute.ts`) and whatever serves a request through the
 * gateway's `Forwarder` port (docs/scale-out.md) write their answers with these, so both answer alike.
 */
import { Clock, type Duration, Effect, Exit, Result } from "effect"
import { randomBytes } from "node:crypto"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as ErrorAnswer from "../../src/protocol/ErrorAnswer.ts"
import * as ProtocolError from "../../src/protocol/ProtocolError.ts"
import * as Sse from "../../src/protocol/Sse.ts"
import * as Received from "../../src/replay/Received.ts"
import type * as Generation from "../generation/Generation.ts"
import type * as ReplayRecorder from "../generation/ReplayRecorder.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as Exchange from "./NodeExchange.ts"

/** A generation's outcome as the route answers it. */
export type Outcome = Exit.Exit<Completion.Completion, ProtocolError.GatewayError>

const { "content-type": sseContentType, ...sseHeaders } = Sse.headers
/** The head of a Buffered-SSE answer. */
export const sseResponseHeaders = { ...sseHeaders, "content-type": sseContentType }

/** The connection and heartbeat frames of each protocol, encoded once. */
export const sseFrames: Readonly<Record<Sse.Protocol, { readonly connected: string; readonly heartbeat: string }>> = {
  chat: { connected: Sse.encode(Sse.connected("chat")), heartbeat: Sse.encode(Sse.heartbeat("chat")) },
  responses: { connected: Sse.encode(Sse.connected("responses")), heartbeat: Sse.encode(Sse.heartbeat("responses")) },
  messages: { connected: Sse.encode(Sse.connected("messages")), heartbeat: Sse.encode(Sse.heartbeat("messages")) }
}

/**
 * Log a 499: the client went away (`phase` says when). Nobody reads the answer any more, so the log line (with the
 * status and code the reference answers with) is what records it.
 */
export const logDisconnect = (phase: "body" | "completion", detail = "") => {
  const error = ProtocolError.GatewayError.clientDisconnect(phase)
  return Effect.logWarning(`${error.message}${detail}`, { status: error.status, code: error.code })
}

/** Answer with an error in the protocol's shape (docs/requests.md, "Error bodies"). */
export const sendError = (
  ex: Exchange.Exchange,
  adapter: Completion.Adapter,
  error: ProtocolError.AnyError,
  headers?: Readonly<Record<string, string>>,
  recorded?: ReplayRecorder.GatewayExchange
): void => {
  const answer = ErrorAnswer.render(adapter, error)
  recorded?.answered?.(Received.ofJson(answer.status, answer.body))
  Exchange.sendJson(
    ex,
    answer.status,
    answer.body,
    headers === undefined ? answer.headers : { ...answer.headers, ...headers }
  )
}

/** A failed generation as its HTTP error; a 500 is logged with the failure's message (the answer does not say it). */
export const failGeneration = (error: Generation.GenerationError): Effect.Effect<never, ProtocolError.GatewayError> => {
  const answer = ProtocolError.GatewayError.fromGeneration(error)
  return answer.status === 500
    ? Effect.logError(`Agentic generation failed: ${error.message}`).pipe(Effect.andThen(Effect.fail(answer)))
    : Effect.fail(answer)
}

/** The error a failed outcome answers with. */
export const failureError = (
  exit: Exit.Failure<Completion.Completion, ProtocolError.GatewayError>
): ProtocolError.GatewayError => {
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason !== undefined ? reason.error : ProtocolError.GatewayError.internal("request")
}

/** The terminal frames of a Buffered-SSE answer: the completion's, or the protocol's error event. */
export const renderTerminal = (
  adapter: Completion.Adapter,
  request: Completion.CanonicalRequest,
  context: Completion.FailureContext,
  exit: Outcome
): ReadonlyArray<Sse.SseFrame> => {
  if (Exit.isFailure(exit)) return adapter.renderSseError(failureError(exit), context)
  const frames = Result.try(() => adapter.renderSse(exit.value, request))
  return Result.isFailure(frames)
    ? adapter.renderSseError(ProtocolError.GatewayError.internal("render"), context)
    : frames.success
}

/** The id and time of an answer that failed, as the error frames of a stream carry them. */
export const failureContext = (model: string): Effect.Effect<Completion.FailureContext> =>
  Effect.map(Clock.currentTimeMillis, (now) => ({
    id: randomBytes(16).toString("hex"),
    created: Math.floor(now / 1000),
    model
  }))

/**
 * A heartbeat frame every `interval` while the client is there, from a fiber of the request's own (a request the
 * `Forwarder` port serves; the model route's held requests beat from one timer, `HeartbeatWheel.ts`). Each one is
 * written as a task after its timer fired
 * (`continueAsTask`), so the heartbeats of thousands of held requests that fall due together are written in the
 * scheduler's slices, not in one long timer phase. One effect, built once per request, runs for every beat (no
 * schedule state per beat: 10,000 held requests write 10,000 heartbeats a second).
 */
export const heartbeat = (ex: Exchange.Exchange, frame: string, interval: Duration.Duration): Effect.Effect<void> => {
  const beat = Effect.sleep(interval).pipe(
    Effect.andThen(FairScheduler.continueAsTask),
    Effect.andThen(Effect.sync(() => {
      if (Exchange.writable(ex)) ex.response.write(frame)
    }))
  )
  return Effect.whileLoop({ while: () => Exchange.writable(ex), body: () => beat, step: () => {} })
}

/**
 * A body at least this large is read, scanned and parsed in one task of the scheduler and matched, rendered and
 * handed on in the next (`serveModel`): a 1 MB body's part was ~15 ms of one task (docs/performance.md, section 3,
 * "Issue 41, the 1 MB message"); a few hundred KB is a few milliseconds.
 */
export const LARGE_BODY_BYTES = 256 * 1024

/**
 * Read the body under the size limit (`maxBodyBytes`); `undefined` when the client went away meanwhile (logged once,
 * when `claimDisconnectLog` says the log line is this reader's).
 */
export const readBody = (
  ex: Exchange.Exchange,
  maxBodyBytes: number,
  claimDisconnectLog: () => boolean,
  alreadyRead?: Exchange.BodyRead
): Effect.Effect<Result.Result<Uint8Array, ProtocolError.GatewayError> | undefined> =>
  Effect.suspend(() => {
    const declared = Number(ex.request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > maxBodyBytes) {
      return Effect.succeed(Result.fail(ProtocolError.GatewayError.bodyTooLarge(maxBodyBytes)))
    }
    // A body Node already holds is read at once, in this task (no suspension, no hop after it).
    const task = FairScheduler.currentTask()
    const at = alreadyRead ?? Exchange.readBuffered(ex, maxBodyBytes)
    const read = at !== undefined
      ? Effect.succeed(at)
      : Effect.callback<Exchange.BodyRead>((resume) =>
        Exchange.readBody(ex, maxBodyBytes, (read) => resume(Effect.succeed(read)))
      )
    return read.pipe(
      Effect.flatMap((read): Effect.Effect<Result.Result<Uint8Array, ProtocolError.GatewayError> | undefined> => {
        switch (read._tag) {
          case "TooLarge":
            return Effect.succeed(Result.fail(ProtocolError.GatewayError.bodyTooLarge(maxBodyBytes)))
          case "Aborted":
            return claimDisconnectLog() ? logDisconnect("body").pipe(Effect.as(undefined)) : Effect.succeed(undefined)
          case "Body":
            // A body that completed inside an I/O callback is parsed as a task.
            return task !== undefined && FairScheduler.currentTask() === task
              ? Effect.succeed(Result.succeed<Uint8Array>(read.bytes))
              : FairScheduler.continueAsTask.pipe(Effect.as(Result.succeed<Uint8Array>(read.bytes)))
        }
      })
    )
  })

/** Where a request is when its client goes away; a 499 is logged for `body` and `completion`. */
export type Phase = "head" | "body" | "completion" | "stream" | "answered"

/**
 * A request's phase and its one 499 log line: when the client goes away while the body is read or a JSON answer is
 * awaited, `log` runs the line (with `run`, outside the request's fiber).
 */
export const watchDisconnect = (ex: Exchange.Exchange, run: (effect: Effect.Effect<void>) => void) => {
  let phase: Phase = "head"
  let logged = false
  /** Claims the one 499 log line of this request; false once it was claimed. */
  const claim = (): boolean => {
    if (logged) return false
    logged = true
    return true
  }
  ex.response.once("close", () => {
    if (ex.response.writableEnded) return
    if (phase === "body" && claim()) run(logDisconnect("body"))
    else if (phase === "completion" && claim()) {
      run(logDisconnect("completion", "; the generation still completes and is committed"))
    }
  })
  return {
    claim,
    set: (next: Phase) => {
      phase = next
    }
  }
}
