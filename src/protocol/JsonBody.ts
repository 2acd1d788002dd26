/**
 * A model request's body as one JSON object (docs/requests.md, "Error bodies"): strict UTF-8, JSON, an object, and
 * nested no deeper than the gateway's limit.
 *
 * **Details**
 * Each way a body can fail is a 400 with the reference's text: not UTF-8 or not JSON (`invalidJson`, with the
 * parser's message), not an object (`bodyNotObject`), nested too deep (`nestedTooDeep`, checked before anything that
 * recurses once per level: canonicalization, hashing, templates).
 */
import { Result } from "effect"
import * as Thrown from "../Thrown.ts"
import * as BodyDepth from "./BodyDepth.ts"
import * as ProtocolError from "./ProtocolError.ts"

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/** The body as one JSON object, or the error the client gets. */
export const parseObject = (
  bytes: Uint8Array,
  maxJsonDepth: number
): Result.Result<Record<string, unknown>, ProtocolError.GatewayError> => {
  let text: string
  try {
    text = strictUtf8.decode(bytes)
  } catch {
    return Result.fail(
      ProtocolError.GatewayError.invalidJson("the body is not valid UTF-8; send JSON encoded as UTF-8")
    )
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (cause) {
    return Result.fail(ProtocolError.GatewayError.invalidJson(Thrown.messageOf(cause)))
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    return Result.fail(ProtocolError.GatewayError.bodyNotObject())
  }
  const tooDeep = BodyDepth.pathBeyondDepth(parsed, maxJsonDepth)
  if (tooDeep !== undefined) return Result.fail(ProtocolError.GatewayError.nestedTooDeep(tooDeep, maxJsonDepth))
  // Decoding boundary: a JSON object parsed from the wire.
  return Result.succeed(parsed as Record<string, unknown>)
}
