/**
 * The API key of a model request (docs/requests.md, "Error bodies"): the Session id an agent presents as its key.
 *
 * **Details**
 * The key is the token of `Authorization: Bearer <token>`, or `x-api-key` (which the Anthropic SDK sends when given an
 * API key) when there is no `Authorization` header. The gateway reads it before the body, so an unauthenticated caller
 * learns nothing about request validity.
 */
import { Result } from "effect"
import * as ProtocolError from "./ProtocolError.ts"

/** The two request headers a key can come in, as `node:http` gives them. */
export interface KeyHeaders {
  readonly authorization?: string | undefined
  readonly "x-api-key"?: string | ReadonlyArray<string> | undefined
}

/** The API key of a request, or the 401 its caller gets (no key at all, or an `Authorization` that is not Bearer). */
export const parse = (headers: KeyHeaders): Result.Result<string, ProtocolError.GatewayError> => {
  const header = headers.authorization
  if (header === undefined) {
    // Node joins a repeated `x-api-key` into one string (only `set-cookie` comes as a list).
    const value = headers["x-api-key"]
    const key = typeof value === "string" ? value.trim() : undefined
    return key !== undefined && key.length > 0
      ? Result.succeed(key)
      : Result.fail(ProtocolError.GatewayError.missingAuthorization())
  }
  const match = /^\s*(\S+)\s+(\S+)\s*$/.exec(header)
  if (match === null || match[1]?.toLowerCase() !== "bearer" || match[2] === undefined) {
    return Result.fail(ProtocolError.GatewayError.malformedAuthorization())
  }
  return Result.succeed(match[2])
}
