/**
 * The off-loop encoder (`OffLoopEncoder.make`): the worker's ids are the in-place encode's, and on Linux the worker
 * thread runs at the lowest priority while every other thread of the process keeps its own. Its ids copied into a
 * plain array in slices (`OffLoopEncoder.toArrayInSlices`): the same ids as one copy, and a task boundary before every
 * slice, so that a 1 MB text's ~250,000 ids are not copied in one go.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import * as OffLoopEncoder from "../../layers/tokenizer/OffLoopEncoder.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"

const { SLICE_IDS, toArrayInSlices } = OffLoopEncoder

/** The nice value of every thread of this process, by thread id (Linux: /proc/self/task/<tid>/stat, field 19). */
const niceByThread = (): Map<string, number> => {
  const nice = new Map<string, number>()
  for (const tid of readdirSync("/proc/self/task")) {
    let stat: string
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
    } catch {
      continue // the thread ended meanwhile
    }
    // After the command name in parentheses come the fields from the third (state) on; nice is the 19th.
    nice.set(tid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]))
  }
  return nice
}

describe("OffLoopEncoder.make", () => {
  it.effect.skipIf(process.platform !== "linux")(
    "encodes on a worker thread at the lowest priority, exactly as in place, and no other thread's priority changes",
    () =>
      Effect.gen(function*() {
        const tok = yield* Tokenizer.Tokenizer
        const encode = OffLoopEncoder.make(tok.source, tok.encode)
        assert.isDefined(encode)
        if (encode === undefined) return
        const line = "<|im_start|>tool\nfunction héllo(x) { return x + 1 } // 你好 🙂\n<|im_end|>\n"
        // `make` encodes whatever it is given on the worker (the threshold is `Tokenizer.encodeAsync`'s).
        const text = line.repeat(64)
        const before = niceByThread()
        const ids = yield* encode(text)
        const after = niceByThread()
        assert.deepStrictEqual(ids, [...tok.encode(text)])
        const started = [...after].filter(([tid]) => !before.has(tid))
        assert.isTrue(
          started.some(([, nice]) => nice === OffLoopEncoder.WORKER_NICE),
          `a new thread at nice ${OffLoopEncoder.WORKER_NICE} among ${JSON.stringify(started)}`
        )
        for (const [tid, nice] of before) {
          if (after.has(tid)) assert.strictEqual(after.get(tid), nice, `thread ${tid} kept its nice value`)
        }
      }).pipe(Effect.provide(Tokenizer.Tokenizer.layer))
  )
})

describe("OffLoopEncoder.toArrayInSlices", () => {
  it.effect("gives the ids as a plain array, whatever the length against the slice", () =>
    Effect.gen(function*() {
      for (const length of [0, 1, SLICE_IDS - 1, SLICE_IDS, SLICE_IDS + 1, 3 * SLICE_IDS + 5]) {
        const ids = Int32Array.from({ length }, (_, i) => (i * 7919) % 151_669)
        const copied = yield* toArrayInSlices(ids)
        assert.isTrue(Array.isArray(copied))
        assert.deepStrictEqual(copied, Array.from(ids))
      }
      const already = [1, 2, 3]
      assert.strictEqual(yield* toArrayInSlices(already), already)
    }))

  it.effect("lets another fiber run before every slice", () =>
    Effect.gen(function*() {
      let turns = 0
      let stop = false
      const other = yield* Effect.forkChild(Effect.whileLoop({
        while: () => !stop,
        body: () => Effect.andThen(Effect.sync(() => void turns++), Effect.yieldNow),
        step: () => {}
      }))
      yield* Effect.yieldNow
      const before = turns
      const slices = 4
      yield* toArrayInSlices(new Int32Array((slices - 1) * SLICE_IDS + 5))
      const during = turns - before
      stop = true
      yield* Fiber.join(other)
      assert.isAtLeast(during, slices)
    }))
})
