/**
 * Loads module hooks (`path/to/module.ts#export`) at startup and checks that the export is a function.
 */
import { Data, Effect } from "effect"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Errors from "../../src/errors.ts"
import * as HookSpec from "../../src/hooks/HookSpec.ts"

export class HookLoadError extends Data.TaggedError("HookLoadError")<{
  readonly flag: string
  readonly value: string
  readonly detail: string
}> {
  override get message() {
    return `${this.flag} ${JSON.stringify(this.value)}: ${this.detail}`
  }
}

/** A loaded hook: an untyped function, to be called through a Schema-validating wrapper by its user. */
export type HookFunction = (...args: ReadonlyArray<unknown>) => unknown

/**
 * Import the module named by `value` (relative to `cwd`, default `process.cwd()`) and return the named export.
 * Fails with `HookSpecError` for a malformed value and `HookLoadError` when the module or export is missing.
 */
export const load: (
  flag: string,
  value: string,
  cwd?: string
) => Effect.Effect<HookFunction, HookSpec.HookSpecError | HookLoadError> = Effect.fn("Hooks.load")(
  function*(flag: string, value: string, cwd: string = process.cwd()) {
    const spec = yield* Effect.fromResult(HookSpec.parse(flag, value))
    const url = pathToFileURL(resolve(cwd, spec.path)).href
    const module = yield* Effect.tryPromise({
      try: () => import(url) as Promise<Record<string, unknown>>,
      catch: (error) =>
        new HookLoadError({
          flag,
          value,
          detail: `cannot import ${resolve(cwd, spec.path)}: ${Errors.messageOf(error)}`
        })
    })
    const exported = module[spec.exportName]
    if (typeof exported !== "function") {
      const available = Object.keys(module).filter((k) => typeof module[k] === "function")
      return yield* new HookLoadError({
        flag,
        value,
        detail:
          `export ${JSON.stringify(spec.exportName)} is ${
            exported === undefined ? "missing" : `a ${typeof exported}, not a function`
          }` +
          `; function exports of the module: ${available.length > 0 ? available.join(", ") : "none"}`
      })
    }
    // Decoding boundary: the module is user code; callers validate what it returns.
    return exported as HookFunction
  }
)
