/**
 * Module hooks given on the command line as `path/to/module.{ts,mjs,js}#exportName`.
 *
 * **Details**
 * The path is relative to the working directory; without `#exportName` the module's default export is used.
 * Used by `--embedded-policy`, `--custom-rm-path`, `--agentic-custom-advantage-path` and
 * `--dynamic-sampling-filter-path`. A Python dotted path (`my_package.advantage.advantage_func`, as Relax recipes write
 * hooks) is refused with the `path.ts#export` form to write instead.
 */
import { Data, Result } from "effect"

export interface HookSpec {
  /** The flag that named the hook, for error messages (e.g. `--custom-rm-path`). */
  readonly flag: string
  readonly path: string
  readonly exportName: string
}

export class HookSpecError extends Data.TaggedError("HookSpecError")<{
  readonly flag: string
  readonly value: string
  readonly detail: string
}> {
  override get message() {
    return `${this.flag} ${JSON.stringify(this.value)}: ${this.detail}. ` +
      `Expected path/to/module.{ts,mjs,js} or path/to/module.ts#exportName.`
  }
}

/** A Python import path as Relax recipes write hooks: `package.module.function`. */
const pythonDottedPath = /^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$/

/** The `path.ts#export` spelling of a Python dotted path: `a.b.f` → `a/b.ts#f`. */
export const fromPythonPath = (dotted: string): string => {
  const parts = dotted.split(".")
  const exportName = parts.pop()!
  return `${parts.join("/")}.ts#${exportName}`
}

/** Parse `module#export` (default export when `#` is absent). */
export const parse = (flag: string, value: string): Result.Result<HookSpec, HookSpecError> => {
  const fail = (reason: string) => Result.fail(new HookSpecError({ flag, value, detail: reason }))
  if (pythonDottedPath.test(value) && !/\.(c|m)?(t|j)s$/.test(value)) {
    return fail(
      `this is a Python import path (Relax's form); relax-agentic loads a TypeScript or JavaScript module: port ` +
        `the function and write its file and export, e.g. ${fromPythonPath(value)}`
    )
  }
  const hash = value.lastIndexOf("#")
  const path = hash === -1 ? value : value.slice(0, hash)
  const exportName = hash === -1 ? "default" : value.slice(hash + 1)
  if (path.trim().length === 0) return fail("the module path is empty")
  if (exportName.length === 0) return fail("the export name after # is empty")
  if (!/\.(c|m)?(t|j)s$/.test(path)) return fail("the module path must end in .ts, .mts, .js, .mjs or .cjs")
  return Result.succeed({ flag, path, exportName })
}
