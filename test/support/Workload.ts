/**
 * A seeded long-tail agent workload for scheduling simulations and benchmarks: per Session, a start-up time and a list
 * of turns, each with think time, a generation length (max tokens) and a tool time.
 *
 * **Details**
 * Real agent rollouts are long-tailed: most Sessions finish in a few short turns, a few run many turns with long
 * generations and slow tools, and those stragglers decide when a synchronous step can close. Every quantity here is a
 * bounded Pareto draw keyed on `(seed, task, position, turn)` with the counter-based hash of the embedded engine, so
 * the same task and Group position get the same plan in every run and every scheduling mode compared.
 */
import * as CounterHash from "../../src/engine/CounterHash.ts"

/** A bounded Pareto draw: `min / u^(1/shape)`, capped at `max`. Smaller shapes have heavier tails. */
export interface Tail {
  readonly min: number
  readonly shape: number
  readonly max: number
}

export interface WorkloadOptions {
  readonly seed: number
  /** Model requests per Session (rounded down). */
  readonly turns: Tail
  readonly startupSeconds: Tail
  readonly thinkSeconds: Tail
  readonly toolSeconds: Tail
  /** Tokens generated per turn (the request's max tokens; the model is run without an end of turn). */
  readonly outputTokens: Tail
}

export interface TurnPlan {
  readonly thinkSeconds: number
  readonly outputTokens: number
  readonly toolSeconds: number
}

export interface SessionPlan {
  readonly startupSeconds: number
  readonly turns: ReadonlyArray<TurnPlan>
}

/** A moderately heavy tail: most Sessions take 1–3 turns of ~40 tokens, a few take 12 turns of up to 400. */
export const longTail = (seed: number): WorkloadOptions => ({
  seed,
  turns: { min: 1, shape: 1.2, max: 12 },
  startupSeconds: { min: 1, shape: 2, max: 10 },
  thinkSeconds: { min: 0.5, shape: 1.5, max: 30 },
  toolSeconds: { min: 1, shape: 1.1, max: 120 },
  outputTokens: { min: 24, shape: 1.3, max: 400 }
})

const draw = (tail: Tail, u: number): number => Math.min(tail.max, tail.min / Math.pow(1 - u, 1 / tail.shape))

/** The plan of the Session at `position` of the Group of `task`. */
export const plan = (options: WorkloadOptions, task: number, position: number): SessionPlan => {
  const u = (what: number, turn = 0) => CounterHash.uniform(options.seed, task, position, turn, what)
  const count = Math.max(1, Math.floor(draw(options.turns, u(0))))
  return {
    startupSeconds: round(draw(options.startupSeconds, u(1))),
    turns: Array.from({ length: count }, (_, turn): TurnPlan => ({
      thinkSeconds: round(draw(options.thinkSeconds, u(2, turn))),
      outputTokens: Math.max(1, Math.round(draw(options.outputTokens, u(3, turn)))),
      toolSeconds: round(draw(options.toolSeconds, u(4, turn)))
    }))
  }
}

/** Millisecond resolution, so TestClock times stay exact. */
const round = (seconds: number): number => Math.round(seconds * 1000) / 1000

/** Total tokens and agent-side seconds of a plan (for checks and bench reports). */
export const totals = (session: SessionPlan): { readonly tokens: number; readonly agentSeconds: number } => ({
  tokens: session.turns.reduce((sum, t) => sum + t.outputTokens, 0),
  agentSeconds: session.startupSeconds + session.turns.reduce((sum, t) => sum + t.thinkSeconds + t.toolSeconds, 0)
})

/** Dataset rows `{input, metadata: {task}}` for `count` tasks. */
export const rows = (
  count: number
): ReadonlyArray<{ readonly input: string; readonly metadata: { readonly task: number } }> =>
  Array.from({ length: count }, (_, task) => ({ input: `Task ${task}: solve it with tools.`, metadata: { task } }))
