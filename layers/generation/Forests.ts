/**
 * The per-session SessionForest store: one forest per live Session, created when the Session is prepared and
 * removed once its export has been taken.
 *
 * **Details**
 * Forest operations are synchronous (src/forest/Forest.ts), so concurrent requests of one Session are serialized
 * by construction; this service owns where forests live and runs the two commits of a model request as effects with
 * typed errors (`observe`, `commitResponse`).
 */
import { Context, Effect, Layer, Result } from "effect"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as ContextLimit from "../../src/forest/ContextLimit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as ForestError from "../../src/forest/ForestError.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import * as StepSpan from "../platform/StepSpan.ts"

/** What a forest is created with; every field defaults (group 0, index 0, no label, empty metadata). */
export interface ForestInit {
  readonly groupIndex?: number
  readonly index?: number
  readonly label?: Canonical.Json | null
  readonly metadata?: Canonical.JsonObject
  readonly chatTemplateKwargs?: Canonical.TemplateKwargs
}

/** An observation to commit under the context limit of its Session (`maxContextLen`, null = unlimited). */
export interface Observation extends ForestCommit.ObservationCommit {
  readonly maxContextLen: number | null
}

export interface ForestsShape {
  /** Create (or replace) the forest of a Session and return it. */
  readonly create: (sessionId: string, init?: ForestInit) => Effect.Effect<Forest.Forest>
  /** The forest of a live Session; `ForestNotFoundError` ("Unknown or discarded agentic session '<id>'.") otherwise. */
  readonly get: (sessionId: string) => Effect.Effect<Forest.Forest, ForestError.ForestNotFoundError>
  /**
   * The forest of a live Session or `undefined`, answered at once (the gateway's scan of a body's raw history, which
   * runs on every Chat request before the body is parsed; `get` is the step with its span and typed error).
   */
  readonly find: (sessionId: string) => Forest.Forest | undefined
  /** Forget a Session's forest (no-op when absent). */
  readonly remove: (sessionId: string) => Effect.Effect<void>
  /**
   * Check the observation against the context limit with its training length (ContextLimit.checkObservation; nothing
   * is committed when it fails), then commit it; returns the new state hash.
   */
  readonly observe: (
    forest: Forest.Forest,
    observation: Observation
  ) => Effect.Effect<string, ContextLengthError.ContextLengthError | ForestError.ForestInvariantError>
  /** Commit a finished generation under its parent; returns the response's state hash. */
  readonly commitResponse: (
    forest: Forest.Forest,
    response: ForestCommit.ResponseCommit
  ) => Effect.Effect<string, ForestError.ForestInvariantError>
  /** Number of forests and of committed nodes across them (health and debug endpoints). */
  readonly stats: Effect.Effect<{ readonly forests: number; readonly nodes: number }>
}

export class Forests extends Context.Service<Forests, ForestsShape>()("relax-agentic/Forests") {
  /** An in-memory store (one per layer build). */
  static readonly layer: Layer.Layer<Forests> = Layer.effect(
    Forests,
    Effect.sync(() => {
      const store = new Map<string, Forest.Forest>()
      return Forests.of({
        create: Effect.fn("Forests.create")(function*(sessionId, init = {}) {
          const forest = Forest.make({
            sessionId,
            groupIndex: init.groupIndex ?? 0,
            index: init.index ?? 0,
            label: init.label ?? null,
            metadata: init.metadata ?? {},
            ...(init.chatTemplateKwargs === undefined ? {} : { chatTemplateKwargs: init.chatTemplateKwargs })
          })
          store.set(sessionId, forest)
          return forest
        }),
        find: (sessionId) => store.get(sessionId),
        get: (sessionId) =>
          StepSpan.stepOf("Forests.get", () => {
            const forest = store.get(sessionId)
            return forest === undefined
              ? Effect.fail(new ForestError.ForestNotFoundError({ sessionId }))
              : Effect.succeed(forest)
          }),
        observe: (forest, observation) =>
          StepSpan.stepOf(
            "Forests.observe",
            (): Effect.Effect<string, ContextLengthError.ContextLengthError | ForestError.ForestInvariantError> => {
              const fits = ContextLimit.checkObservation(
                forest,
                observation.parent,
                ForestCommit.observationTrainLength(observation),
                observation.maxContextLen
              )
              if (Result.isFailure(fits)) return Effect.fail(fits.failure)
              return commit(forest, () => ForestCommit.commitObservation(forest, observation))
            }
          ),
        commitResponse: (forest, response) =>
          StepSpan.stepOf(
            "Forests.commitResponse",
            () => commit(forest, () => ForestCommit.commitResponse(forest, response))
          ),
        remove: Effect.fn("Forests.remove")(function*(sessionId) {
          store.delete(sessionId)
        }),
        stats: Effect.sync(() => {
          let nodes = 0
          for (const forest of store.values()) nodes += forest.nodes.size
          return { forests: store.size, nodes }
        }).pipe(Effect.withSpan("Forests.stats"))
      })
    })
  )
}

/**
 * Run a forest commit; a throw is a broken forest invariant (src/forest/Forest.ts throws nothing else). The commit runs
 * synchronously, inside the caller's step: one Effect value, not a suspended `Effect.try`.
 */
const commit = (forest: Forest.Forest, run: () => string): Effect.Effect<string, ForestError.ForestInvariantError> => {
  try {
    return Effect.succeed(run())
  } catch (error) {
    return Effect.fail(
      error instanceof ForestError.ForestInvariantError
        ? error
        : new ForestError.ForestInvariantError({ detail: String(error), sessionId: forest.sessionId })
    )
  }
}
