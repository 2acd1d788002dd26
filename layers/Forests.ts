/**
 * The per-session SessionForest store: one forest per live Session, created when the Session is prepared and
 * removed once its export has been taken.
 *
 * **Details**
 * Forest operations are synchronous (src/forest/Forest.ts), so concurrent requests of one Session are serialized
 * by construction; this service only owns where forests live.
 */
import { Context, Effect, Layer } from "effect"
import type * as Canonical from "../src/protocol/canonical.ts"
import { ForestNotFound } from "../src/forest/errors.ts"
import * as Forest from "../src/forest/Forest.ts"

/** What a forest is created with; every field defaults (group 0, index 0, no label, empty metadata). */
export interface ForestInit {
  readonly groupIndex?: number
  readonly index?: number
  readonly label?: Canonical.Json | null
  readonly metadata?: Canonical.JsonObject
  readonly chatTemplateKwargs?: Canonical.TemplateKwargs
}

export interface ForestsShape {
  /** Create (or replace) the forest of a Session and return it. */
  readonly create: (sessionId: string, init?: ForestInit) => Effect.Effect<Forest.Forest>
  /** The forest of a live Session; `ForestNotFound` ("Unknown or discarded agentic session '<id>'.") otherwise. */
  readonly get: (sessionId: string) => Effect.Effect<Forest.Forest, ForestNotFound>
  /** Forget a Session's forest (no-op when absent). */
  readonly remove: (sessionId: string) => Effect.Effect<void>
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
        create: (sessionId, init = {}) =>
          Effect.sync(() => {
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
        get: (sessionId) =>
          Effect.suspend(() => {
            const forest = store.get(sessionId)
            return forest === undefined ? Effect.fail(new ForestNotFound({ sessionId })) : Effect.succeed(forest)
          }),
        remove: (sessionId) => Effect.sync(() => void store.delete(sessionId)),
        stats: Effect.sync(() => {
          let nodes = 0
          for (const forest of store.values()) nodes += forest.nodes.size
          return { forests: store.size, nodes }
        })
      })
    })
  )
}
