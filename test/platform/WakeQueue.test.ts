import { assert, describe, it } from "@effect/vitest"
import * as WakeQueue from "../../src/platform/WakeQueue.ts"
import * as Dataset from "../../src/schedule/Dataset.ts"

describe("WakeQueue", () => {
  it("takes sleeps earliest first, equal times in registration order, only when due", () => {
    const queue = new WakeQueue.WakeQueue<string>()
    queue.push(5, "a")
    queue.push(1, "b")
    queue.push(5, "c")
    queue.push(1, "d")
    assert.strictEqual(queue.takeDue(0), undefined)
    const taken: Array<string> = []
    for (let entry = queue.takeDue(5); entry !== undefined; entry = queue.takeDue(5)) taken.push(entry.value)
    assert.deepStrictEqual(taken, ["b", "d", "a", "c"])
    assert.strictEqual(queue.size, 0)
    assert.strictEqual(queue.takeDue(Infinity), undefined)
  })

  it("skips cancelled sleeps and counts a sleep once whether it was taken, cancelled or both", () => {
    const queue = new WakeQueue.WakeQueue<number>()
    const first = queue.push(1, 1)
    const second = queue.push(2, 2)
    queue.push(3, 3)
    queue.cancel(first)
    queue.cancel(first)
    assert.strictEqual(queue.size, 2)
    assert.strictEqual(queue.takeDue(1.5), undefined)
    assert.strictEqual(queue.takeDue(10)?.value, 2)
    queue.cancel(second)
    assert.strictEqual(queue.size, 1)
    assert.strictEqual(queue.takeDue(Infinity)?.value, 3)
    assert.strictEqual(queue.takeDue(Infinity), undefined)
  })

  it("agrees with a sorted list over random pushes, cancels and takes", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const next = Dataset.seededRandom(seed)
      const queue = new WakeQueue.WakeQueue<number>()
      const reference: Array<{ readonly timestamp: number; readonly id: number }> = []
      const handles = new Map<number, WakeQueue.Sleep<number>>()
      let id = 0
      for (let step = 0; step < 300; step++) {
        const roll = next()
        if (roll < 0.5) {
          // Few distinct times, so many sleeps share one.
          const timestamp = Math.floor(next() * 20) / 2
          handles.set(id, queue.push(timestamp, id))
          reference.push({ timestamp, id })
          id++
        } else if (roll < 0.7 && reference.length > 0) {
          const index = Math.floor(next() * reference.length)
          const [cancelled] = reference.splice(index, 1)
          queue.cancel(handles.get(cancelled!.id)!)
        } else {
          const until = Math.floor(next() * 20) / 2
          reference.sort((a, b) => a.timestamp - b.timestamp || a.id - b.id)
          const due = reference.findIndex((sleep) => sleep.timestamp > until)
          const expected = reference.splice(0, due === -1 ? reference.length : due).map((sleep) => sleep.id)
          const taken: Array<number> = []
          for (let entry = queue.takeDue(until); entry !== undefined; entry = queue.takeDue(until)) {
            taken.push(entry.value)
          }
          assert.deepStrictEqual(taken, expected, `seed ${seed}, step ${step}`)
        }
        assert.strictEqual(queue.size, reference.length, `seed ${seed}, step ${step}`)
      }
    }
  })
})
