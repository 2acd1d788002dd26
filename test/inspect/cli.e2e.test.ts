import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as TempDir from "../support/TempDir.ts"
import * as Fixture from "./fixture.ts"

const root = join(import.meta.dirname, "..", "..")

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Run `relax-agentic inspect ...` (the real command line). `untilLine`: stop it (SIGINT, as Ctrl-C) once stdout has a
 * line matching it, after `whileRunning` got the match.
 */
const cli = (
  args: ReadonlyArray<string>,
  untilLine?: RegExp,
  whileRunning?: (match: RegExpMatchArray) => Promise<void>
) =>
  Effect.callback<Ran>((resume) => {
    const child = spawn(process.execPath, [join(root, "src", "cli.ts"), "inspect", ...args], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let stopping = false
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      const match = untilLine === undefined ? null : stdout.match(untilLine)
      if (match !== null && !stopping) {
        stopping = true
        void (whileRunning?.(match) ?? Promise.resolve()).finally(() => child.kill("SIGINT"))
      }
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => {
      child.kill("SIGTERM")
    })
  })

describe("relax-agentic inspect (the command line)", () => {
  it.live("serves the run on 127.0.0.1 and prints the URL, until Ctrl-C", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("inspect-cli-")
      writeFileSync(join(dir, "debug_0.jsonl"), Fixture.session().jsonl)
      let overview: { sessions: ReadonlyArray<{ session_id: string }> } | undefined
      const ran = yield* cli([dir], /inspect: (http:\/\/127\.0\.0\.1:\d+\/) /, async (match) => {
        overview = await (await fetch(`${match[1]}api/overview`)).json() as typeof overview
      })
      assert.match(ran.stdout, /relax-agentic inspect: http:\/\/127\.0\.0\.1:\d+\/ \(Ctrl-C to stop\)/)
      assert.deepStrictEqual(overview?.sessions.map((s) => s.session_id), ["s1"])
    }), { timeout: 120_000 })

  it.live("writes one self-contained HTML file with --html", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("inspect-cli-")
      const dump = join(dir, "debug_0.jsonl")
      writeFileSync(dump, Fixture.session().jsonl)
      const out = join(dir, "out.html")
      const ran = yield* cli([dump, "--html", out])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(ran.stdout, `relax-agentic inspect: wrote ${out}`)
      const html = readFileSync(out, "utf8")
      assert.include(html, "id=\"inspect-overview\"")
      assert.include(html, "data-key=\"0/s1\"")
      // Nothing is loaded from anywhere: no external script, style or font.
      assert.notMatch(html, /<script[^>]+src=|<link[^>]+href=|https?:\/\//)
    }), { timeout: 120_000 })

  it.live("says what to give when the path holds no run", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("inspect-cli-")
      const ran = yield* cli([join(dir, "missing")])
      assert.strictEqual(ran.code, 1)
      assert.include(ran.stderr, "no such file or directory")
      assert.include(ran.stderr, "--save-debug-rollout-data")
      const empty = yield* cli([dir])
      assert.strictEqual(empty.code, 1)
      assert.include(empty.stderr, "no samples or debug-dump records found")
    }), { timeout: 120_000 })
})
