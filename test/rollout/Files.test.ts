import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Files from "../../layers/rollout/Files.ts"
import * as Records from "../../src/rollout/Records.ts"
import * as TempDir from "../support/TempDir.ts"

describe("output files", () => {
  it.effect("are written atomically, leaving no temporary file, creating missing directories", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("relax-files-")
      const path = join(dir, "a", "b", "rollout_0.jsonl")
      yield* Files.writeFileAtomic(path, Records.jsonl([{ a: 1 }, { b: [2] }]))
      assert.strictEqual(readFileSync(path, "utf8"), "{\"a\":1}\n{\"b\":[2]}\n")
      assert.deepStrictEqual(readdirSync(join(dir, "a", "b")), ["rollout_0.jsonl"])
      assert.deepStrictEqual(Files.inFlight(), [])
    }))

  it.effect("fail with the file system's error under a file", () =>
    Effect.gen(function*() {
      const file = join(yield* TempDir.scoped("relax-files-"), "afile")
      writeFileSync(file, "x")
      const error = yield* Effect.flip(Files.writeFileAtomic(join(file, "out", "rollout_0.jsonl"), "x"))
      assert.include(String(error), "ENOTDIR")
    }))

  it.effect("serialize writes of one path, so the last write wins and its temporary name is never shared", () =>
    Effect.gen(function*() {
      const path = join(yield* TempDir.scoped("relax-files-"), "metrics.jsonl")
      yield* Effect.all(["1\n", "2\n", "3\n"].map((text) => Files.writeFileAtomic(path, text)), {
        concurrency: "unbounded"
      })
      assert.strictEqual(readFileSync(path, "utf8"), "3\n")
    }))
})

describe("creating an output directory", () => {
  it.live("fails at once where the file system refuses new entries (/proc), instead of looping", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.tryPromise({ try: () => Files.ensureDirectory("/proc/nope/deeper"), catch: (e) => e })
      )
      assert.include(String(error), "ENOENT")
    }))

  it.effect("probes a directory: creates it, writes and removes a probe file", () =>
    Effect.gen(function*() {
      const dir = join(yield* TempDir.scoped("relax-files-"), "new", "out")
      yield* Files.probeDirectory({ flag: "--output-dir", directory: dir })
      assert.deepStrictEqual(readdirSync(dir), [])
    }))

  it.effect("names the flag, the path and the reason when the directory cannot be created", () =>
    Effect.gen(function*() {
      const file = join(yield* TempDir.scoped("relax-files-"), "afile")
      writeFileSync(file, "x")
      const error = yield* Effect.flip(
        Files.probeDirectory({ flag: "--save-debug-rollout-data", directory: join(file, "dumps") })
      )
      assert.strictEqual(error.reason, "create")
      assert.match(
        error.message,
        /^--save-debug-rollout-data \S+afile\/dumps: cannot create the directory: a part of the path is a file/
      )
      assert.include(error.message, "Nothing was started")
    }))
})
