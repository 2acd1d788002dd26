/**
 * A Chat body that repeats its Session's previous history byte for byte, parsed without that history
 * (docs/sessionforest.md, "Matching a request"; docs/performance.md, "Issue 24, third pass").
 *
 * **Details**
 * src/protocol/RawEcho.ts found that the body's bytes before `repeated.end` are the previous request's, which parsed,
 * passed the nesting check and decoded: its `messages` array opens at `repeated.open` and its first `repeated.count`
 * elements end at `repeated.end`, and what those elements canonicalize to is known (`KnownPrefix`). So they are not
 * decoded or parsed again: the body is parsed as its head (up to and including the array's `[`), one `0` per known
 * element, and its bytes from `repeated.end` on. After the known elements a JSON parser is where it is after the `0`s
 * (inside the top-level object, inside that array, after an element), so this text parses exactly when the body does,
 * to the same object but for those elements; the head decoded as UTF-8 the previous time, and the rest starts at an
 * ASCII byte (the last one of a JSON value is before it), so it is valid UTF-8 exactly when the body is (decoded
 * without stripping a byte-order mark, which only the body's first bytes may carry). The known elements were within
 * the nesting limit at the same depth in the previous body.
 *
 * Any doubt falls back to the whole body's parse and decode, so every error a client gets is the whole path's, with
 * its text: a text that does not parse (the parser's message would name another position), nesting beyond the limit
 * (the path is the whole body's), or a failed decode (its message must be the whole body's; and a system message after
 * the known ones makes the decoder canonicalize the whole list, which fails on the `0`s, so it is decoded whole too).
 */
import { Result } from "effect"
import * as BodyDepth from "./BodyDepth.ts"
import type * as Canonical from "./Canonical.ts"
import * as JsonBody from "./JsonBody.ts"
import type * as ProtocolError from "./ProtocolError.ts"
import type * as RawEcho from "./RawEcho.ts"

/** The known canonical messages of a body's repeated prefix, and where the previous body's history lay. */
export interface Known extends Canonical.KnownPrefix {
  readonly repeated: RawEcho.Mark
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })
/** The same, for bytes that do not start a body: a leading U+FEFF is a character there, not a byte-order mark. */
const strictUtf8Inner = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** `count` placeholder elements: `0,0,…,0`. */
const placeholders: Array<string> = []
const placeholdersOf = (count: number): string => {
  let text = placeholders[count]
  if (text === undefined) {
    text = "0,".repeat(count - 1) + "0"
    if (count < 1024) placeholders[count] = text
  }
  return text
}

/**
 * The body parsed without its first `repeated.count` history elements (each a `0` in the object), or `undefined` when
 * that is in doubt (then parse it whole: {@link JsonBody.parseObject}).
 */
export const parseAfter = (
  bytes: Uint8Array,
  repeated: RawEcho.Mark,
  maxJsonDepth: number
): Record<string, unknown> | undefined => {
  const { count, end, open } = repeated
  if (count < 1 || open < 0 || end <= open || end > bytes.length) return undefined
  let parsed: unknown
  try {
    const text = strictUtf8.decode(bytes.subarray(0, open + 1)) + placeholdersOf(count) +
      strictUtf8Inner.decode(bytes.subarray(end))
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return undefined
  // Decoding boundary: a JSON object parsed from the wire.
  const object = parsed as Record<string, unknown>
  const messages = object["messages"]
  if (!Array.isArray(messages) || messages.length < count) return undefined
  if (BodyDepth.pathBeyondDepth(object, maxJsonDepth) !== undefined) return undefined
  return object
}

/**
 * Parse and decode a body: without its repeated history when `known` says where it is and that path has no doubt,
 * else whole (a {@link JsonBody.parseObject} error, or `decodeObject`'s on the whole object). `decodeObject` gets
 * `known` either way.
 */
export const decode = <A, E>(
  bytes: Uint8Array,
  maxJsonDepth: number,
  known: Known | undefined,
  decodeObject: (object: Record<string, unknown>, known: Canonical.KnownPrefix | undefined) => Result.Result<A, E>
): Result.Result<A, E | ProtocolError.GatewayError> => {
  if (known !== undefined && known.count === known.repeated.count) {
    const object = parseAfter(bytes, known.repeated, maxJsonDepth)
    if (object !== undefined) {
      const decoded = decodeObject(object, known)
      if (Result.isSuccess(decoded)) return decoded
    }
  }
  const whole = JsonBody.parseObject(bytes, maxJsonDepth)
  return Result.isFailure(whole) ? Result.fail(whole.failure) : decodeObject(whole.success, known)
}
