import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as HookSpec from "../../src/hooks/HookSpec.ts"

const failure = (result: Result.Result<HookSpec.HookSpec, HookSpec.HookSpecError>): string =>
  Result.isFailure(result) ? result.failure.message : "parsed"

describe("hook paths", () => {
  it("reads path.ts#export, and the default export without #", () => {
    assert.deepStrictEqual(
      HookSpec.parse("--custom-rm-path", "hooks/rm.ts#score"),
      Result.succeed({ flag: "--custom-rm-path", path: "hooks/rm.ts", exportName: "score" })
    )
    assert.deepStrictEqual(
      HookSpec.parse("--custom-rm-path", "rm.mjs"),
      Result.succeed({ flag: "--custom-rm-path", path: "rm.mjs", exportName: "default" })
    )
  })

  it("answers a Relax recipe's Python dotted path with the path.ts#export form to write", () => {
    assert.strictEqual(
      failure(HookSpec.parse("--agentic-custom-advantage-path", "my_package.advantage.advantage_func")),
      `--agentic-custom-advantage-path "my_package.advantage.advantage_func": this is a Python import path ` +
        `(Relax's form); relax-agentic loads a TypeScript or JavaScript module: port the function and write its ` +
        `file and export, e.g. my_package/advantage.ts#advantage_func. ` +
        `Expected path/to/module.{ts,mjs,js} or path/to/module.ts#exportName.`
    )
  })

  it("still takes a module file whose name has dots", () => {
    assert.deepStrictEqual(
      HookSpec.parse("--custom-rm-path", "rm.v2.js"),
      Result.succeed({ flag: "--custom-rm-path", path: "rm.v2.js", exportName: "default" })
    )
  })
})
