/**
 * The login shell's time (`bash -lc true`, layers/session/SlowStartWatch.ts) measured with a real shell: the e2e lane,
 * since it starts a process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SlowStartWatch from "../../layers/session/SlowStartWatch.ts"
import * as TempDir from "../support/TempDir.ts"

/** A home whose login profile fails, removed with the scope (also when the test fails). */
const failingHome = Effect.tap(
  TempDir.scoped("login-shell-"),
  (home) => Effect.sync(() => Fs.writeFileSync(Path.join(home, ".bash_profile"), "exit 1\n"))
)

describe("SlowStartWatch.loginShellSeconds", () => {
  it.effect("runs bash -lc true and gives its time; a login shell that fails gives none", () =>
    Effect.scoped(Effect.gen(function*() {
      const seconds = yield* SlowStartWatch.loginShellSeconds({ ...process.env })
      assert.isDefined(seconds)
      assert.isAbove(seconds!, 0)
      const home = yield* failingHome
      assert.isUndefined(yield* SlowStartWatch.loginShellSeconds({ ...process.env, HOME: home }))
    })))
})
