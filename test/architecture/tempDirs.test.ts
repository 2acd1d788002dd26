/**
 * Every temporary directory a test makes is removed when its test (or file) ends, passed or failed: tests make them
 * only through test/support/TempDir.ts, so any other `mkdtemp` under test/ is a directory someone must remember to
 * remove and that a failing test leaves behind. The benchmarks (test/bench/, scripts run by hand) are not tests.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const test = Path.join(import.meta.dirname, "..")

const files = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === "bench" && dir === test ? [] : files(path)
    return /\.(ts|mjs|js)$/.test(entry.name) ? [path] : []
  })

describe("temporary directories in tests", () => {
  it("are made only through test/support/TempDir.ts (removed on failure too)", () => {
    // The helper itself, and this file's pattern.
    const exempt = [Path.join(test, "support", "TempDir.ts"), import.meta.filename]
    const offenders = files(test).filter((file) => !exempt.includes(file)).flatMap((file) =>
      Fs.readFileSync(file, "utf8").split("\n").flatMap((line, i) =>
        /\bmkdtemp(Sync)?\s*\(|makeTempDirectory/.test(line) ? [`${Path.relative(test, file)}:${i + 1}`] : []
      )
    )
    assert.deepStrictEqual(offenders, [], "make the directory with TempDir.scoped / forTest / perFile instead")
  })
})
