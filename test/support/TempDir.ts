/**
 * Temporary directories for tests, removed when their owner ends, whether it passed or failed: the one way a test
 * makes one (test/architecture/tempDirs.test.ts finds any other `mkdtemp`).
 *
 * - {@link scoped}: in an Effect (`it.effect`, `it.live`), removed when the scope closes (the test's own).
 * - {@link forTest}: in a plain test, removed when the running test finishes (vitest's `onTestFinished`).
 * - {@link perFile}: at a test file's top level, a maker of directories removed after the file's tests (`afterAll`),
 *   whenever they were made; {@link forFile} makes one there at once.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, onTestFinished } from "vitest"

const make = (prefix: string): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))

/** Remove `dir` and everything in it (nothing if it is gone already). */
export const remove = (dir: string): void => Fs.rmSync(dir, { recursive: true, force: true })

/** A fresh directory named `<prefix>XXXXXX` under the OS temp dir, removed when the scope closes. */
export const scoped = (prefix: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.sync(() => make(prefix)), (dir) => Effect.sync(() => remove(dir)))

/** A fresh directory, removed when the running test finishes (call it inside the test). */
export const forTest = (prefix: string): string => {
  const dir = make(prefix)
  onTestFinished(() => remove(dir))
  return dir
}

/** Call at a test file's top level: makes fresh directories, in its tests or between them, removed after them all. */
export const perFile = (): (prefix: string) => string => {
  const made: Array<string> = []
  afterAll(() => made.splice(0).forEach(remove))
  return (prefix) => {
    const dir = make(prefix)
    made.push(dir)
    return dir
  }
}

/** A fresh directory for a whole test file, removed after its tests (call it at the file's top level). */
export const forFile = (prefix: string): string => perFile()(prefix)
