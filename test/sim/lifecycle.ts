/**
 * Whole rollouts of a seeded long-tail agent workload under the TestClock, in one of three cross-step modes:
 * synchronous, `--partial-rollout`, or `--fully-async` (with the final backfill step). Shared by the simulations
 * (test/sim/lifecycle.test.ts) and the bench (test/bench/lifecycle.ts).
 *
 * **Details**
 * The real Rollout, GroupPool, SessionRunner, Sessions, Forests, generation core, generation gate and embedded engine
 * (no end of turn, latency on the TestClock) run with in-process agents: each Session follows its workload plan
 * (start-up, then per turn: think, one model request of the planned length, a tool call) and exports implicitly.
 * A trainer fiber takes each complete partition (a step's batch), "trains" for `trainSeconds` and advances the
 * engine's weight version.
 * Synchronous and partial rollout wait for the trainer before the next step (on-policy); fully async does not.
 */
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer, Queue } from "effect"
import { TestClock } from "effect/testing"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Telemetry from "../../layers/observability/Telemetry.ts"
import * as Rollout from "../../layers/rollout/Rollout.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import * as Retention from "../../src/schedule/Retention.ts"
import * as AgentTurn from "../support/agentTurn.ts"
import * as InProcessRollout from "../support/inProcessRollout.ts"
import * as TempDir from "../support/TempDir.ts"
import * as Workload from "../support/Workload.ts"

export type Mode = "synchronous" | "partial" | "fully-async"

export interface SimOptions {
  readonly mode: Mode
  readonly steps: number
  readonly batch: number
  readonly overSampling: number
  readonly concurrency: number
  readonly samplesPerPrompt: number
  readonly trainSeconds: number
  readonly agentTimeout: number
  readonly workload: Workload.WorkloadOptions
  readonly maxAbortedCount?: number | undefined
  readonly decodeTokensPerSecond?: number | undefined
  readonly rolloutSeed?: number | undefined
  /** The engine the Sessions generate with, built over the recording embedded engine (default: it as it is). */
  readonly wrapEngine?: ((engine: Engine.EngineShape) => Effect.Effect<Engine.EngineShape>) | undefined
  /** What the trainer does after training partition `n` (default: `engine.updateWeights()`). */
  readonly afterTraining?: ((engine: Engine.EngineShape, partition: number) => Effect.Effect<void>) | undefined
}

/** One backend attempt as the engine saw it. */
export interface AttemptTrace {
  readonly inputIds: ReadonlyArray<number>
  readonly maxNewTokens: number
  readonly resumedTokens: number
  readonly outputIds: ReadonlyArray<number>
  readonly aborted: boolean
}

/** One Session as the simulation saw it. */
export interface SessionTrace {
  readonly sessionId: string
  readonly task: number
  readonly position: number
  readonly startedAt: number
  /** -1 while running; the time it exited or was interrupted. */
  endedAt: number
  outcome: "running" | "exported" | "interrupted" | "failed"
}

export interface SimReport {
  readonly options: SimOptions
  /** Every step call's result, the final backfill last (fully async). */
  readonly results: ReadonlyArray<Rollout.StepResult>
  /** Simulated seconds each step call took. */
  readonly stepSeconds: ReadonlyArray<number>
  /** Simulated seconds from the first step's start to the last training's end. */
  readonly totalSeconds: number
  /** Most agents running at once, sampled at every agent start. */
  readonly peakAgents: number
  /** Agents still running after the rollout's scope closed. */
  readonly agentsLeft: number
  /** Engine generations still running after the rollout's scope closed. */
  readonly generationsLeft: number
  readonly sessions: ReadonlyArray<SessionTrace>
  /** Every engine attempt that returned, in the order they returned. */
  readonly attempts: ReadonlyArray<AttemptTrace>
  readonly lines: ReadonlyArray<string>
  /**
   * The fraction of slot time (`concurrency * samplesPerPrompt` slots over the whole run) not spent on work that
   * became a training sample: idle, parked, waiting, or spent on Sessions that were discarded.
   */
  readonly idleSlotFraction: number
}

/**
 * The engine request that draws turn `[start, end)` of `sample` again, from its prompt and the turns before it, with
 * the Session's `seed`: what the simulation's embedded engine generated for it.
 */
export const turnRequest = (
  sample: Rollout.StepResult["samples"][number],
  [start, end]: readonly [number, number],
  seed: number,
  rid: string
): Engine.GenerateRequest => ({
  inputIds: sample.tokens.slice(0, sample.tokens.length - sample.response_length + start),
  sampling: { maxNewTokens: end - start, temperature: 1, topP: 1, topK: -1, stop: [], stopTokenIds: [], seed },
  rid,
  returnLogprob: true
})

const modeFlags = (mode: Mode): Partial<RolloutOptions.RolloutOptionsInput> =>
  mode === "partial" ? { partialRollout: true } : mode === "fully-async" ? { fullyAsync: true } : {}

/** Run the simulation; drives the TestClock itself (provide `TestClock.layer()` or run inside `it.effect`). */
export const simulate = (options: SimOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const dir = yield* TempDir.scoped("relax-sim-")
    const dataset = join(dir, "tasks.jsonl")
    writeFileSync(dataset, Workload.rows(64).map((r) => JSON.stringify(r)).join("\n") + "\n")
    const rolloutSeed = options.rolloutSeed ?? 42
    const settings = yield* Settings.resolve({
      promptData: dataset,
      nSamplesPerPrompt: options.samplesPerPrompt,
      rolloutBatchSize: options.batch,
      overSamplingBatchSize: options.overSampling,
      agenticConcurrency: options.concurrency,
      numRollout: options.steps,
      agentTimeout: options.agentTimeout,
      rolloutMaxResponseLen: options.workload.outputTokens.max,
      rolloutSeed,
      ...(options.maxAbortedCount === undefined ? {} : { partialRolloutMaxAbortedCount: options.maxAbortedCount }),
      ...modeFlags(options.mode)
    })
    const sink = Telemetry.memorySink()
    const engineOptions: EmbeddedEngine.EmbeddedEngineOptions = {
      seed: rolloutSeed,
      decodeTokensPerSecond: options.decodeTokensPerSecond ?? 40,
      prefillTokensPerSecond: 0,
      model: { eosProbability: 0 }
    }
    const attempts: Array<AttemptTrace> = []
    // Engine generations started and not yet ended (a generation fiber left behind keeps this above 0).
    let generating = 0
    // The embedded engine, recording every attempt's request and output (to check what a parked request resumed from).
    const recording = Layer.effect(
      Engine.Engine,
      Effect.gen(function*() {
        const engine = yield* Engine.Engine
        return {
          ...engine,
          generate: (request) =>
            Effect.sync(() => generating++).pipe(
              Effect.andThen(engine.generate(request)),
              Effect.ensuring(Effect.sync(() => generating--)),
              Effect.tap((result) =>
                Effect.sync(() =>
                  attempts.push({
                    inputIds: [...request.inputIds],
                    maxNewTokens: request.sampling.maxNewTokens,
                    resumedTokens: request.resumedTokens ?? 0,
                    outputIds: result.outputIds,
                    aborted: result.finishReason.type === "abort"
                  })
                )
              )
            )
        } satisfies Engine.EngineShape
      }).pipe(Effect.flatMap((engine) => options.wrapEngine?.(engine) ?? Effect.succeed(engine)))
    ).pipe(Layer.provide(EmbeddedEngine.EmbeddedEngine.layer(engineOptions)))
    const services = yield* InProcessRollout.generationServices(settings, recording)

    const traces: Array<SessionTrace> = []
    let running = 0
    let peakAgents = 0
    const agent = (provided: Layer.Layer<InProcessRollout.GenerationServices>): Supervisor.InProcessAgent => (input) =>
      Effect.gen(function*() {
        const sessions = yield* Sessions.Sessions
        const generate = yield* Generation.Generation
        const entry = yield* sessions.lookup(input.sessionId)
        const task = Number((input.input.metadata as { readonly task?: number } | undefined)?.task ?? 0)
        const position = (entry.sampling.seed ?? rolloutSeed) - rolloutSeed
        const trace: SessionTrace = {
          sessionId: input.sessionId,
          task,
          position,
          startedAt: (yield* Clock.currentTimeMillis) / 1000,
          endedAt: -1,
          outcome: "running"
        }
        traces.push(trace)
        running++
        peakAgents = Math.max(peakAgents, running)
        const plan = Workload.plan(options.workload, task, position)
        return yield* Effect.gen(function*() {
          yield* Effect.sleep(`${plan.startupSeconds} seconds`)
          const messages: Array<unknown> = [...(input.input.messages ?? [])]
          for (const [turn, step] of plan.turns.entries()) {
            yield* Effect.sleep(`${step.thinkSeconds} seconds`)
            const completion = yield* AgentTurn.agentTurn(generate, entry, messages, step.outputTokens)
            messages.push({ role: "assistant", content: completion.content })
            yield* Effect.sleep(`${step.toolSeconds} seconds`)
            messages.push({ role: "user", content: `Tool result ${turn} of task ${task}.` })
          }
          trace.outcome = "exported"
          return { reward: (task + position) % 3 === 0 ? 1 : 0 }
        }).pipe(
          Effect.onExit((exit) =>
            Effect.gen(function*() {
              running--
              trace.endedAt = (yield* Clock.currentTimeMillis) / 1000
              if (trace.outcome === "running") trace.outcome = Exit.hasInterrupts(exit) ? "interrupted" : "failed"
            })
          )
        )
      }).pipe(Effect.provide(provided))

    const mode = Settings.retentionMode(settings)
    const calls = Retention.stepCount(mode, options.steps)
    const stepSeconds: Array<number> = []
    const results: Array<Rollout.StepResult> = []
    const done = yield* Deferred.make<number>()

    const run = Effect.scoped(Effect.gen(function*() {
      // Built before the clock moves: loading the dataset is real I/O.
      const context = yield* InProcessRollout.rolloutOf(settings, services, agent, sink)
      const rollout = yield* Effect.provide(
        Effect.gen(function*() {
          return yield* Rollout.Rollout
        }),
        context
      )
      const engine = Context.get(services, Engine.Engine)
      const trained = yield* Queue.unbounded<number>()
      const start = yield* Clock.currentTimeMillis
      // The trainer: one training per complete partition (a step's batch), then a weight update (which aborts the
      // generations in flight; they resume on the new version).
      const complete = yield* Queue.unbounded<number>()
      const trainer = yield* Effect.forkChild(Effect.forever(Effect.gen(function*() {
        const partition = yield* Queue.take(complete)
        yield* Effect.sleep(`${options.trainSeconds} seconds`)
        yield* (options.afterTraining?.(engine, partition) ?? engine.updateWeights().pipe(Effect.orDie))
        yield* Queue.offer(trained, partition)
      })))
      // The next trained partition; the trainer's failure (a publication refused, say) fails the run at once instead
      // of leaving it waiting while the clock is driven to its bound.
      const nextTrained = Effect.raceFirst(Queue.take(trained), Fiber.join(trainer).pipe(Effect.andThen(Effect.never)))
      const rows = new Map<number, number>()
      const batchRows = options.batch * options.samplesPerPrompt
      for (let rolloutId = 0; rolloutId < calls; rolloutId++) {
        const before = yield* Clock.currentTimeMillis
        const result = yield* rollout.runStep(rolloutId)
        stepSeconds.push(((yield* Clock.currentTimeMillis) - before) / 1000)
        results.push(result)
        for (const sample of result.samples) {
          const n = (rows.get(sample.rollout_id) ?? 0) + 1
          rows.set(sample.rollout_id, n)
          if (n === batchRows) yield* Queue.offer(complete, sample.rollout_id)
        }
        // On-policy modes wait for the new weights before the next step.
        if (options.mode !== "fully-async") yield* nextTrained
      }
      if (options.mode === "fully-async") {
        for (let i = 0; i < options.steps; i++) yield* nextTrained
      }
      yield* Fiber.interrupt(trainer)
      return ((yield* Clock.currentTimeMillis) - start) / 1000
    }))

    const fiber = yield* run.pipe(Effect.tap((total) => Deferred.succeed(done, total)), Effect.forkChild)
    // Drive the clock one simulated second at a time until the run ends.
    for (let i = 0; i < 1_000_000 && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust("1 second")
    const totalSeconds = yield* Fiber.join(fiber)
    const slots = options.concurrency * options.samplesPerPrompt
    const exported = new Set(results.flatMap((r) => r.samples.map((s) => s.session_id)))
    const decodeSeconds = 1 / (engineOptions.decodeTokensPerSecond ?? 40)
    const useful = traces.filter((t) => exported.has(t.sessionId)).reduce((sum, t) => {
      const work = Workload.totals(Workload.plan(options.workload, t.task, t.position))
      return sum + work.agentSeconds + work.tokens * decodeSeconds
    }, 0)
    return {
      options,
      results,
      stepSeconds,
      totalSeconds,
      peakAgents,
      agentsLeft: running,
      generationsLeft: generating,
      sessions: traces,
      attempts,
      lines: sink.captured.lines,
      idleSlotFraction: Math.max(0, 1 - useful / (slots * totalSeconds))
    } satisfies SimReport
  }))
