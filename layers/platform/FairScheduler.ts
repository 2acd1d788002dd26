/**
 * The Effect scheduler the rollout runs on: one FIFO queue (by priority) for every fiber's tasks, run in time slices
 * with the event loop free between slices.
 *
 * **Details**
 * Effect's default scheduler gives every fiber its own dispatcher, and Node runs every `setImmediate` queued before
 * its check phase in one go: when 10,000 agents' requests arrive at once, all their synchronous work (body decoding,
 * matching, rendering, tokenizing) runs back to back and no timer or socket is served until it is done (seconds).
 * Here tasks wait in one queue and run for at most `sliceMs` (default 5 ms) per macrotask; then the queue yields to
 * the event loop (timers, I/O, heartbeats) and continues. Order and priorities are those of the default scheduler;
 * `flush` still drains everything synchronously. A single task longer than a slice is not split (tokenizing a huge
 * text goes off the loop instead, see `Tokenizer.encodeAsync`).
 */
import { Context, Effect, type Fiber, Layer, Scheduler } from "effect"

export interface FairSchedulerOptions {
  /** Longest run of tasks before the event loop gets a turn (default 5 ms). */
  readonly sliceMs?: number | undefined
  /** Clock for slices (default `performance.now`). */
  readonly now?: (() => number) | undefined
  /** How the next slice is scheduled (default `setImmediate`). */
  readonly defer?: ((run: () => void) => void) | undefined
}

type Task = () => void

/**
 * The task a {@link FairScheduler} runs now, numbered from 1 (every task run gets the next number); `undefined` between
 * tasks, outside slices and under other schedulers. See {@link currentTask}.
 */
let runningTask: number | undefined
let tasksRun = 0

/** Run `task` as the next numbered one. */
const runTask = (task: Task): void => {
  runningTask = ++tasksRun
  try {
    task()
  } finally {
    runningTask = undefined
  }
}

/** Tasks by priority (lower first), FIFO within one priority. */
class TaskQueue {
  private buckets: Array<{ readonly priority: number; readonly tasks: Array<Task>; head: number }> = []
  size = 0

  push(task: Task, priority: number): void {
    let index = 0
    while (index < this.buckets.length && (this.buckets[index]?.priority ?? 0) < priority) index++
    const bucket = this.buckets[index]
    if (bucket !== undefined && bucket.priority === priority) bucket.tasks.push(task)
    else this.buckets.splice(index, 0, { priority, tasks: [task], head: 0 })
    this.size++
  }

  shift(): Task | undefined {
    const bucket = this.buckets[0]
    if (bucket === undefined) return undefined
    const task = bucket.tasks[bucket.head++]
    if (bucket.head >= bucket.tasks.length) this.buckets.shift()
    this.size--
    return task
  }
}

export class FairScheduler implements Scheduler.Scheduler {
  readonly executionMode = "async" as const
  private readonly queue = new TaskQueue()
  private scheduled = false
  private readonly sliceMs: number
  private readonly now: () => number
  private readonly defer: (run: () => void) => void

  constructor(options: FairSchedulerOptions = {}) {
    this.sliceMs = options.sliceMs ?? 5
    this.now = options.now ?? (() => performance.now())
    this.defer = options.defer ?? ((run) => void setImmediate(run))
  }

  shouldYield(fiber: Fiber.Fiber<unknown, unknown>): boolean {
    return fiber.currentOpCount >= fiber.cache.maxOpsBeforeYield
  }

  makeDispatcher(): Scheduler.SchedulerDispatcher {
    return {
      scheduleTask: (task, priority) => {
        this.queue.push(task, priority)
        if (!this.scheduled) {
          this.scheduled = true
          this.defer(this.slice)
        }
      },
      flush: () => {
        const outer = runningTask
        for (let task = this.queue.shift(); task !== undefined; task = this.queue.shift()) runTask(task)
        runningTask = outer
      }
    }
  }

  private readonly slice = (): void => {
    this.scheduled = false
    const deadline = this.now() + this.sliceMs
    for (let task = this.queue.shift(); task !== undefined; task = this.queue.shift()) {
      runTask(task)
      if (this.now() >= deadline) break
    }
    if (this.queue.size > 0 && !this.scheduled) {
      this.scheduled = true
      this.defer(this.slice)
    }
  }
}

/**
 * Continue the current fiber as a task of the scheduler (an `Effect.yieldNow`), at a point where it was resumed from
 * a Node callback.
 *
 * **Details**
 * A fiber resumed by an I/O callback, a timer or a promise continues inside that callback, and so does every other
 * fiber that callback resumes: a burst of request bodies completing in one poll phase, a lease granted to many
 * waiting requests at once, embedded policies settling in one microtask drain, thousands of heartbeats falling due
 * together. Their synchronous work would then run back to back, with no timer or socket served until it is done.
 * Continuing as a task puts each one in the {@link FairScheduler}'s queue, which runs them in slices with the event
 * loop free in between (docs/performance.md, section 3). Under Effect's default scheduler it is a plain yield.
 */
export const continueAsTask: Effect.Effect<void> = Effect.yieldNow

/**
 * The number of the {@link FairScheduler} task running now (`undefined` outside one, and under any other scheduler).
 *
 * **Details**
 * A fiber that reads the same number at two points has not left that task in between: it was not suspended and
 * resumed inside a Node callback or inside another task (a lease or a gate granted to many waiting fibers at once
 * resumes them all inside the granting fiber's task). A {@link continueAsTask} meant to leave such a callback is then
 * not needed: the fiber is still running in the task it started in (the generation core skips the one after a lease
 * that was already held, docs/performance.md section 1).
 */
export const currentTask = (): number | undefined => runningTask

/** Run `effect` (and every fiber it starts) on a fresh {@link FairScheduler}. */
export const provide = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options?: FairSchedulerOptions
): Effect.Effect<A, E, R> => Effect.provideService(effect, Scheduler.Scheduler, new FairScheduler(options))

/**
 * A fresh {@link FairScheduler} for every service built on this layer, and the fibers they start (an HTTP server's
 * request fibers included): a layer's services see only the context of the layers below them, so provide this at
 * the bottom of the graph.
 */
export const layer = (options?: FairSchedulerOptions): Layer.Layer<never> =>
  Layer.succeedContext(Context.make(Scheduler.Scheduler, new FairScheduler(options)))
