/**
 * Group pool simulations on the TestClock (test/sim/): an in-process agent model and the set-up of a simulated pool.
 *
 * **Details**
 * Each simulated Session "starts" (sleeps its start-up time on the TestClock), sends model requests through its ticket
 * (the first one joins the barrier), sleeps per turn, and exits or crashes as scripted. Every step of every Session is
 * written to a timeline with the TestClock time. {@link runPool} builds a pool of such Groups, runs a program against
 * it while the clock advances, and hands back its value with the timeline and the log lines.
 */
import { Clock, Data, Effect, Fiber, type Layer, type Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as GroupPool from "../../layers/schedule/GroupPool.ts"
import * as PoolContract from "../../layers/schedule/PoolContract.ts"

/** Telemetry kept in memory (`isTTY`: progress rendered as on a terminal), and the layer that writes to it. */
export const telemetry = (isTTY = false) => {
  const sink = Telemetry.memorySink(isTTY)
  return { sink, layer: Telemetry.Telemetry.layerSink(sink) }
}

/** Fork `program` with `layer`, advance the TestClock by `minutes`, and join it. */
export const simulate = <A, E>(
  program: Effect.Effect<A, E, Telemetry.Telemetry>,
  layer: Layer.Layer<Telemetry.Telemetry>,
  minutes = 30
): Effect.Effect<A, E> =>
  Effect.gen(function*() {
    const fiber = yield* program.pipe(Effect.provide(layer), Effect.forkChild)
    yield* TestClock.adjust(`${minutes} minutes`)
    return yield* Fiber.join(fiber)
  })

/** The plan of step `rolloutId` with `debt` Groups to collect: refilled, no surplus, not the step before another. */
export const plan = (
  rolloutId: number,
  debt: number,
  extra: Partial<PoolContract.StepPlan> = {}
): PoolContract.StepPlan => ({
  rolloutId,
  debt,
  surplus: 0,
  nextStep: false,
  refill: true,
  ...extra
})

export interface Group extends PoolContract.GroupLike {
  readonly seq: number
}

export interface Script {
  /** Seconds before the first model request. */
  readonly startup?: number
  readonly turns?: number
  /** Seconds per model turn (after the lease). */
  readonly turnSeconds?: number
  /** Crash before sending any request, or after the lease. */
  readonly crash?: "before-first-request" | "after-lease"
  /** Exit 0 without sending any request. */
  readonly silentExit?: boolean
}

export class AgentCrashed extends Data.TaggedError("AgentCrashed")<{ readonly sessionId: string }> {
  override get message() {
    return `Managed command agent exited with code 3.`
  }
}

export interface Entry {
  readonly t: number
  readonly group: number
  readonly position: number
  readonly what: "start" | "request" | "leased" | "exit" | "crash" | "interrupted"
}

export const groups = () => {
  let seq = 0
  return (size: number): Effect.Effect<Group> =>
    Effect.sync(() => {
      const s = seq++
      return { groupId: `train:prepare_group_${s}`, seq: s, size }
    })
}

export const runner = (
  script: (group: Group, position: number) => Script,
  timeline: Array<Entry>,
  verdict: (group: Group) => PoolContract.Verdict<number> = (g) => PoolContract.accepted(g.seq)
): PoolContract.GroupRunner<Group, number, number, AgentCrashed> => ({
  session: (group, ticket) =>
    Effect.gen(function*() {
      const s = script(group, ticket.position)
      const log = (what: Entry["what"]) =>
        Clock.currentTimeMillis.pipe(
          Effect.map((ms) => {
            timeline.push({ t: ms / 1000, group: group.seq, position: ticket.position, what })
          })
        )
      yield* log("start")
      yield* Effect.sleep(`${s.startup ?? 1} seconds`)
      if (s.silentExit === true) {
        yield* log("exit")
        return 0
      }
      if (s.crash === "before-first-request") {
        yield* log("crash")
        return yield* new AgentCrashed({ sessionId: ticket.sessionId })
      }
      const turns = s.turns ?? 1
      for (let turn = 0; turn < turns; turn++) {
        yield* log("request")
        yield* ticket.awaitLease.pipe(Effect.orDie)
        if (turn === 0) yield* log("leased")
        yield* Effect.sleep(`${s.turnSeconds ?? 5} seconds`)
        if (s.crash === "after-lease") {
          yield* log("crash")
          return yield* new AgentCrashed({ sessionId: ticket.sessionId })
        }
      }
      yield* log("exit")
      return turns
    }).pipe(Effect.onInterrupt(() =>
      Clock.currentTimeMillis.pipe(Effect.map((ms) => {
        timeline.push({ t: ms / 1000, group: group.seq, position: ticket.position, what: "interrupted" })
      }))
    )),
  reward: (group) => Effect.succeed(verdict(group))
})

/** Timeline entries of one kind, as `group#position@t`. */
export const of = (timeline: ReadonlyArray<Entry>, what: Entry["what"]): Array<string> =>
  timeline.filter((e) => e.what === what).map((e) => `${e.group}#${e.position}@${e.t}`)

/** Highest number of Groups that had started and not yet ended at the same time. */
export const peakResidentGroups = (timeline: ReadonlyArray<Entry>): number => {
  const spans = new Map<number, { start: number; end: number }>()
  for (const e of timeline) {
    const span = spans.get(e.group) ?? { start: Infinity, end: -Infinity }
    if (e.what === "start") span.start = Math.min(span.start, e.t)
    if (e.what === "exit" || e.what === "crash" || e.what === "interrupted") span.end = Math.max(span.end, e.t)
    spans.set(e.group, span)
  }
  const points = [...spans.values()].flatMap((s) => [{ t: s.start, d: 1 }, { t: s.end, d: -1 }])
  points.sort((a, b) => a.t - b.t || a.d - b.d)
  let current = 0
  let peak = 0
  for (const p of points) {
    current += p.d
    peak = Math.max(peak, current)
  }
  return peak
}

/** The pool of a simulation: its options, with the Groups' size and script instead of `next` and `runner`. */
export interface PoolSetup
  extends Partial<Omit<PoolContract.PoolOptions<Group, number, number, AgentCrashed>, "capacity" | "next" | "runner">>
{
  readonly capacity: number
  /** Sessions per Group. */
  readonly groupSize: number
  /** Each Session's script (default: one 5 s turn after a 1 s start-up). */
  readonly script?: ((group: Group, position: number) => Script) | undefined
  readonly verdict?: ((group: Group) => PoolContract.Verdict<number>) | undefined
  /** A runner of its own instead of the scripted one (it may still write to the timeline). */
  readonly runner?:
    | ((timeline: Array<Entry>) => PoolContract.GroupRunner<Group, number, number, AgentCrashed>)
    | undefined
}

/** What a simulated pool's program returned, with every Session's timeline and the log. */
export interface PoolRun<A> {
  readonly value: A
  readonly timeline: ReadonlyArray<Entry>
  readonly sink: ReturnType<typeof Telemetry.memorySink>
}

/**
 * Build a pool of simulated Groups (train mode, no prelaunch unless `setup` says so), run `use` on it in its own scope
 * while the TestClock advances `minutes`, and return its value with the timeline and the log (`isTTY`: progress
 * rendered as on a terminal).
 */
export const runPool = <A, E>(
  setup: PoolSetup,
  use: (pool: PoolContract.Pool<Group, number>) => Effect.Effect<A, E, Scope.Scope | Telemetry.Telemetry>,
  options: { readonly minutes?: number; readonly isTTY?: boolean } = {}
): Effect.Effect<PoolRun<A>, E> => {
  const { layer, sink } = telemetry(options.isTTY)
  const timeline: Array<Entry> = []
  const { groupSize, runner: ownRunner, script, verdict, ...poolOptions } = setup
  const next = groups()
  return simulate(
    Effect.scoped(Effect.gen(function*() {
      const pool = yield* GroupPool.makePool({
        prelaunch: false,
        mode: "train",
        ...poolOptions,
        next: next(groupSize),
        runner: ownRunner?.(timeline) ?? runner(script ?? (() => ({})), timeline, verdict)
      })
      return yield* use(pool)
    })),
    layer,
    options.minutes
  ).pipe(Effect.map((value) => ({ value, timeline, sink })))
}
