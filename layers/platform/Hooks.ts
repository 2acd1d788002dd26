/**
 * Loads module hooks (`path/to/module.ts#export`) at startup and checks that the export is a function.
 */
import { Data, Effect } from "effect"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as HookSpec from "../../src/hooks/HookSpec.ts"
import * as Thrown from "../../src/Thrown.ts"

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
 * What Node answers when it cannot run a TypeScript file itself (its type stripping takes erasable syntax and explicit
 * file extensions only, and nothing under node_modules): raised while the module and its static imports load, before
 * any of their code runs (a failing dynamic import in a hook's top-level code is the exception: that hook's top level
 * then runs again through tsx).
 */
const typeScriptUnsupported = new Set([
  "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX",
  "ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING",
  "ERR_UNKNOWN_FILE_EXTENSION",
  "ERR_MODULE_NOT_FOUND",
  "ERR_INVALID_TYPESCRIPT_SYNTAX"
])

/**
 * Import a hook module as Node loads it and, when Node cannot run it (a TypeScript hook with an enum, extensionless
 * imports, or under node_modules), again through tsx's `tsImport`, which compiles it and the modules it imports with
 * tsx's own loader (the project ran every module through tsx before it ran on Node's type stripping:
 * docs/architecture.md, "Running TypeScript"). What such a hook imports is loaded in tsx's namespace: its own module
 * instances, a package included.
 */
const importModule = async (url: string): Promise<Record<string, unknown>> => {
  try {
    // Decoding boundary: a module namespace object.
    return await (import(url) as Promise<Record<string, unknown>>)
  } catch (error) {
    const code = Thrown.codeOf(error)
    if (code === undefined || !typeScriptUnsupported.has(code) || !/\.[cm]?tsx?$/.test(url)) throw error
    const { tsImport } = await import("tsx/esm/api")
    try {
      // Decoding boundary: a module namespace object.
      return await (tsImport(url, import.meta.url) as Promise<Record<string, unknown>>)
    } catch (again) {
      // The same failure through tsx (a missing file): the first answer names the file as it was asked for.
      throw Thrown.codeOf(again) === code ? error : again
    }
  }
}

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
      try: () => importModule(url),
      catch: (error) =>
        new HookLoadError({
          flag,
          value,
          detail: `cannot import ${resolve(cwd, spec.path)}: ${Thrown.messageOf(error)}`
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
