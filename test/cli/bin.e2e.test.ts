/**
 * The `relax-agentic` executable (bin/relax-agentic.mjs) as a user runs it: from the repository, where Node strips the
 * sources' types itself, and installed under a project's node_modules, where Node does not strip types and the
 * executable runs the CLI through tsx (docs/architecture.md, "Running TypeScript").
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Example from "../support/example.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Example.root

/** Run `node <bin> --help` in `cwd`: its exit code and output. */
const help = (bin: string, cwd: string) =>
  Effect.callback<{ readonly code: number | null; readonly output: string }>((resume) => {
    const child = spawn(process.execPath, [bin, "--help"], { cwd, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.on("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("bin/relax-agentic.mjs", () => {
  it.live("runs the CLI from the repository", () =>
    Effect.gen(function*() {
      const ran = yield* help(Path.join(root, "bin", "relax-agentic.mjs"), root)
      assert.strictEqual(ran.code, 0, ran.output)
      assert.include(ran.output, "relax-agentic <subcommand>")
    }), 60_000)

  it.live("runs the CLI installed under node_modules, where Node does not strip types", () =>
    Effect.gen(function*() {
      const project = yield* TempDir.scoped("bin-installed-")
      const installed = Path.join(project, "node_modules", "relax-agentic")
      Fs.mkdirSync(installed, { recursive: true })
      for (const part of ["bin", "src", "layers", "package.json"]) {
        Fs.cpSync(Path.join(root, part), Path.join(installed, part), { recursive: true })
      }
      // The package's own dependencies, as npm would install them beside it.
      Fs.symlinkSync(Path.join(root, "node_modules"), Path.join(installed, "node_modules"), "dir")
      const ran = yield* help(Path.join(installed, "bin", "relax-agentic.mjs"), project)
      assert.strictEqual(ran.code, 0, ran.output)
      assert.include(ran.output, "relax-agentic <subcommand>")
    }), 60_000)
})
