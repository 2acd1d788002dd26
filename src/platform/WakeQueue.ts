/**
 * The pending sleeps of a simulated clock, earliest first: a binary min-heap ordered by wake time, then by
 * registration (equal times wake in the order they were registered, as Effect's TestClock wakes them).
 *
 * **Details**
 * Registering, taking the next and cancelling are O(log n) or O(1) whatever the number pending: a cancelled sleep (an
 * interrupted fiber) is only marked and dropped when it reaches the top. Effect's TestClock keeps its sleeps in an
 * array sorted by time, so each registration and each release costs O(pending sleeps); with thousands of simulated
 * agents sleeping at once that dominated a simulation (docs/performance.md, section 4).
 */

/** One pending sleep: when it wakes and what to run then. */
export interface Sleep<A> {
  readonly timestamp: number
  readonly order: number
  readonly value: A
  /** Taken or cancelled. */
  done: boolean
}

export class WakeQueue<A> {
  private readonly heap: Array<Sleep<A>> = []
  private registered = 0
  private live = 0

  /** Sleeps registered and neither taken nor cancelled. */
  get size(): number {
    return this.live
  }

  /** Register a sleep waking at `timestamp`; the returned handle can {@link cancel} it. */
  push(timestamp: number, value: A): Sleep<A> {
    const sleep: Sleep<A> = { timestamp, order: this.registered++, value, done: false }
    const heap = this.heap
    let index = heap.length
    heap.push(sleep)
    while (index > 0) {
      const parent = (index - 1) >>> 1
      const above = heap[parent]!
      if (!before(sleep, above)) break
      heap[index] = above
      index = parent
    }
    heap[index] = sleep
    this.live++
    return sleep
  }

  /** Drop a sleep that has not been taken yet (taking or cancelling twice does nothing). */
  cancel(sleep: Sleep<A>): void {
    if (sleep.done) return
    sleep.done = true
    this.live--
  }

  /** Take the earliest pending sleep if it wakes at or before `timestamp`. */
  takeDue(timestamp: number): Sleep<A> | undefined {
    this.dropCancelled()
    const top = this.heap[0]
    if (top === undefined || top.timestamp > timestamp) return undefined
    this.removeTop()
    // Cancelling a taken sleep later (the woken fiber interrupted) must not count it again.
    top.done = true
    this.live--
    return top
  }

  private dropCancelled(): void {
    while (this.heap.length > 0 && this.heap[0]!.done) this.removeTop()
  }

  private removeTop(): void {
    const heap = this.heap
    const last = heap.pop()!
    if (heap.length === 0) return
    let index = 0
    const length = heap.length
    for (;;) {
      const left = 2 * index + 1
      if (left >= length) break
      const right = left + 1
      const child = right < length && before(heap[right]!, heap[left]!) ? right : left
      if (!before(heap[child]!, last)) break
      heap[index] = heap[child]!
      index = child
    }
    heap[index] = last
  }
}

const before = <A>(a: Sleep<A>, b: Sleep<A>): boolean =>
  a.timestamp < b.timestamp || (a.timestamp === b.timestamp && a.order < b.order)
