/**
 * Cross-step modes on the same workload: 5 training steps of a seeded long-tail agent workload (test/sim/lifecycle.ts,
 * the real rollout stack under a TestClock) run synchronously, with `--partial-rollout`, and with `--fully-async`,
 * with the same training time per step. Reports simulated times (seconds of the TestClock), not wall-clock speed.
 *
 * **Details**
 * - step time: mean simulated seconds one `runStep` call took (the final backfill excluded);
 * - total: from the first step's start to the end of the last training (on-policy modes wait for each training before
 *   the next step; fully async overlaps them);
 * - idle-slot fraction: the share of `agentic_concurrency * n_samples_per_prompt` slot time not spent on work that
 *   became a training sample (idle, parked, or spent on Sessions that were discarded).
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Lifecycle from "../sim/lifecycle.ts"
import * as Workload from "../support/Workload.ts"
import * as Harness from "./harness.ts"

const workload: Omit<Lifecycle.SimOptions, "mode"> = {
  steps: 5,
  batch: 4,
  overSampling: 6,
  concurrency: 6,
  samplesPerPrompt: 2,
  trainSeconds: 30,
  agentTimeout: 3600,
  workload: Workload.longTail(7)
}

const modes: ReadonlyArray<Lifecycle.Mode> = ["synchronous", "partial", "fully-async"]

const seconds = (s: number): string => `${s.toFixed(1)} s`

const run = async (): Promise<Harness.BenchResult> => {
  const reports = []
  for (const mode of modes) {
    reports.push(
      await Effect.runPromise(Lifecycle.simulate({ ...workload, mode }).pipe(Effect.provide(TestClock.layer())))
    )
  }
  const synchronous = reports[0]!
  const rows = reports.map((r) => {
    const steps = r.stepSeconds.slice(0, workload.steps)
    const mean = steps.reduce((a, b) => a + b, 0) / steps.length
    return {
      mode: r.options.mode,
      "mean step time": seconds(mean),
      "slowest step": seconds(Math.max(...steps)),
      "total (5 steps + training)": seconds(r.totalSeconds),
      "vs synchronous": Harness.formatRatio(synchronous.totalSeconds / r.totalSeconds),
      "idle-slot fraction": `${(r.idleSlotFraction * 100).toFixed(1)}%`,
      "step calls": String(r.results.length)
    }
  })
  return {
    title: `Cross-step modes: ${workload.steps} steps x ${workload.batch} Groups of ${workload.samplesPerPrompt}, ` +
      `concurrency ${workload.concurrency}, over-sampling ${workload.overSampling}, ${workload.trainSeconds} s training ` +
      `per step, seeded long-tail workload (simulated seconds on the TestClock)`,
    rows,
    notes: [
      "vs synchronous: synchronous total / this mode's total (above 1 = faster).",
      "Partial rollout closes a step when its debt is paid and parks the stragglers instead of waiting for them or " +
      "discarding them; fully async also overlaps rollout with training and may close a step while its last Groups " +
      "are interrupted (their debt moves to the next step, then the final backfill)."
    ]
  }
}

export const bench: Harness.Bench = { name: "lifecycle", run }
