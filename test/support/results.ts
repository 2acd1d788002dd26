/**
 * Unwrapping `Result`s in tests: the success (or the failure) a test expects, the other case failing the test with
 * what it held.
 */
import { assert } from "@effect/vitest"
import { Result } from "effect"

const describe = (value: unknown): string => {
  if (typeof value === "object" && value !== null && "message" in value) {
    const param = "param" in value && typeof value.param === "string" ? `${value.param}: ` : ""
    return `${param}${String(value.message)}`
  }
  return typeof value === "string" ? value : JSON.stringify(value) ?? String(value)
}

/** The success of `result`; a failure fails the test with its message (and `param`, for a request error). */
export const success = <A, E>(result: Result.Result<A, E>): A => {
  if (Result.isFailure(result)) return assert.fail(`expected success, got ${describe(result.failure)}`)
  return result.success
}

/** The failure of `result`; a success fails the test. */
export const failure = <A, E>(result: Result.Result<A, E>): E => {
  if (Result.isSuccess(result)) return assert.fail(`expected a failure, got ${describe(result.success)}`)
  return result.failure
}

/** The `param` and `message` of a refused request (a `ProtocolError` or `CanonicalError`), for comparing as data. */
export const rejection = <A, E extends { readonly param: string | null; readonly message: string }>(
  result: Result.Result<A, E>
): { readonly param: string | null; readonly message: string } => {
  const error = failure(result)
  return { param: error.param, message: error.message }
}
