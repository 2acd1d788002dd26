/**
 * Program-aware KV admission around an engine (docs/sglang.md "KV scheduling"): every backend attempt (a first one
 * and every resumed one) waits for room in the fleet's KV ledger before it is sent.
 *
 * **Details**
 * - An attempt's reservation is its prompt tokens (the Session's training prefix + pending output) plus
 *   min(remaining completion, `--agentic-admission-expected-decode-cap`); its ticket is its rid (a resumed attempt is
 *   a new ticket). With scope `train`, Eval attempts are sent unreserved.
 * - The wait runs outside the Session's active-time budget (it counts as lease wait,
 *   `relax_agentic_lease_wait_seconds`, not against `--agent-timeout`), and its time is told to the Session
 *   (the inspector's admission wait).
 * - A waiting attempt is cut cleanly: `abort(rid)` (a step's close through the generation gate) ends it as an abort
 *   with no tokens, so the request parks as if the engine had aborted it; `pauseGeneration` / `updateWeights` end every
 *   waiter as an abort cut by the update (it resumes after, never counting toward giving up); interrupting the
 *   attempt's fiber cancels its ticket. The lease is released when the attempt ends, however it ends.
 * - `takeStepMetrics` adds the ledger's step metrics (`agentic_kv/admission/...`, `agentic_kv/budget/...`).
 */
import { Clock, Deferred, Effect, Metric } from "effect"
import type * as AdmissionOptions from "../../src/admission/AdmissionOptions.ts"
import * as Engine from "../engine/Engine.ts"
import * as Instruments from "../observability/Instruments.ts"
import type * as Coordinator from "./Coordinator.ts"

/** Why a waiting attempt was cut. */
type Cut = "abort" | "update"

/** The tokens an attempt reserves: its prompt and at most the expected decode cap of its remaining completion. */
export const reservationTokens = (promptTokens: number, remaining: number, expectedDecodeCap: number): number =>
  Math.max(0, promptTokens) + Math.max(0, Math.min(remaining, expectedDecodeCap))

/** `engine` with every admitted attempt waiting on `coordinator` first. */
export const make = (
  engine: Engine.EngineShape,
  coordinator: Coordinator.CoordinatorShape,
  settings: AdmissionOptions.AdmissionSettings
): Engine.EngineShape => {
  const waiting = new Map<string, Deferred.Deferred<Cut>>()

  const cutAll = (cut: Cut) =>
    Effect.sync(() => {
      for (const deferred of waiting.values()) Deferred.doneUnsafe(deferred, Effect.succeed(cut))
    })

  const cutResult = (request: Engine.GenerateRequest, cut: Cut): Effect.Effect<Engine.GenerateResult> =>
    Effect.map(engine.weightVersion, (weightVersion) => ({
      outputIds: [],
      logprobs: [],
      finishReason: { type: "abort", message: "Aborted while waiting for KV room" },
      promptTokens: request.inputIds.length,
      cachedTokens: 0,
      weightVersion,
      ...(cut === "update" ? { cutByUpdate: true } : {})
    }))

  const admitted = (request: Engine.GenerateRequest, demand: Engine.AdmissionDemand) =>
    // Uninterruptible between the decision and the release's installation, so an admitted lease is always released.
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const ticket = {
          id: request.rid,
          tokens: reservationTokens(demand.promptTokens, request.sampling.maxNewTokens, settings.expectedDecodeCap),
          protected: request.protected === true
        }
        const cut = yield* Deferred.make<Cut>()
        waiting.set(request.rid, cut)
        const from = yield* Clock.currentTimeMillis
        const wait = Effect.raceFirst(
          Effect.map(coordinator.acquire(ticket), (final) => ({ _tag: "decided" as const, final })),
          Effect.map(Deferred.await(cut), (reason) => ({ _tag: "cut" as const, reason }))
        ).pipe(Effect.ensuring(Effect.sync(() => waiting.delete(request.rid))))
        const outcome = yield* restore(demand.outsideBudget === undefined ? wait : demand.outsideBudget(wait))
        const waitedMs = (yield* Clock.currentTimeMillis) - from
        if (waitedMs > 0) {
          demand.waited?.(waitedMs)
          yield* Metric.update(Instruments.leaseWaitSeconds, waitedMs / 1000)
        }
        if (outcome._tag === "cut") return yield* cutResult(request, outcome.reason)
        if (outcome.final.action === "bypass" && outcome.final.reason === "cancelled") {
          return yield* cutResult(request, "abort")
        }
        const sent = restore(engine.generate(request))
        return yield* outcome.final.action === "admit" ? Effect.ensuring(sent, coordinator.release(ticket.id)) : sent
      })
    )

  return {
    ...engine,
    generate: (request) => {
      const demand = request.admission
      if (demand === undefined || (settings.scope === "train" && !demand.training)) return engine.generate(request)
      return admitted(request, demand)
    },
    abort: (rid) =>
      Effect.suspend(() => {
        const cut = waiting.get(rid)
        if (cut !== undefined) Deferred.doneUnsafe(cut, Effect.succeed("abort"))
        return engine.abort(rid)
      }),
    updateWeights: (version) => Effect.andThen(cutAll("update"), engine.updateWeights(version)),
    pauseGeneration: (mode) => Effect.andThen(cutAll("update"), engine.pauseGeneration(mode)),
    takeStepMetrics: Effect.zipWith(
      engine.takeStepMetrics,
      coordinator.metrics(true),
      (own, ledger) => ({ ...own, ...ledger })
    )
  }
}
