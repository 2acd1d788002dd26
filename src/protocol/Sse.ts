/**
 * Server-sent event frames for Buffered SSE: what a frame is, how it is written on the wire, and each protocol's
 * connection and heartbeat frames.
 *
 * **Details**
 * Relax never streams tokens: the gateway writes the connection frame at once, a heartbeat every
 * {@link heartbeatInterval} while the generation is pending, then the protocol's complete terminal sequence. JSON data
 * is compact and keeps non-ASCII characters as they are (Python's `separators=(",",":"), ensure_ascii=False`).
 */
import { Duration } from "effect"

/** One SSE frame: a comment line, or a message with an optional event name. */
export type SseFrame =
  | { readonly _tag: "Comment"; readonly text: string }
  | { readonly _tag: "Message"; readonly event?: string; readonly data: string }

/** The three wire protocols of the model API. */
export type Protocol = "chat" | "responses" | "messages"

/** A comment frame (`: text`), ignored by SSE clients; used to keep the connection visibly alive. */
export const comment = (text: string): SseFrame => ({ _tag: "Comment", text })

/** An unnamed message whose data is the compact JSON of `value`. */
export const data = (value: unknown): SseFrame => ({ _tag: "Message", data: JSON.stringify(value) })

/** A named message (`event: name`) whose data is the compact JSON of `value`. */
export const event = (name: string, value: unknown): SseFrame => ({
  _tag: "Message",
  event: name,
  data: JSON.stringify(value)
})

/** The OpenAI end-of-stream sentinel `data: [DONE]`. */
export const done: SseFrame = { _tag: "Message", data: "[DONE]" }

/** The wire text of one frame, including its terminating blank line. */
export const encode = (frame: SseFrame): string => {
  if (frame._tag === "Comment") return `: ${frame.text}\n\n`
  // A data payload with line breaks must be split over several `data:` lines; JSON text never has any, but
  // encoding stays correct for any string.
  const lines = frame.data.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`).join("")
  return (frame.event === undefined ? "" : `event: ${frame.event}\n`) + lines + "\n"
}

/** The wire text of a frame sequence. */
export const encodeAll = (frames: ReadonlyArray<SseFrame>): string => frames.map(encode).join("")

/** How often a heartbeat frame is written while a generation is pending. */
export const heartbeatInterval: Duration.Duration = Duration.seconds(15)

/** Response headers of every Buffered SSE answer. */
export const headers: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
}

const ping = event("ping", { type: "ping" })

/** The frame written as soon as the SSE response opens: a comment for Chat/Responses, `event: ping` for Messages. */
export const connected = (protocol: Protocol): SseFrame => protocol === "messages" ? ping : comment("connected")

/** The frame written every {@link heartbeatInterval}: a comment for Chat/Responses, `event: ping` for Messages. */
export const heartbeat = (protocol: Protocol): SseFrame => protocol === "messages" ? ping : comment("heartbeat")
