/**
 * Versioned LoRA across a cluster (docs/lora.md "In a cluster", docs/architecture.md "Single writers in a cluster"):
 * one fleet-wide version registry, the single writer `lora-versions` (layers/cluster/SingleWriter.ts), that every
 * runner's Sessions bind through and the controller publishes through.
 *
 * **Details**
 * - The writer is one process's `LoraVersions` (layers/lora/LoraVersions.ts) on the runner that owns its entity,
 *   loading and unloading through that runner's engine (with SGLang: the workers every runner shares).
 * - Every member's `LoraVersions` is a client of it: `publish`, `adapterFor` (a Session's bind) and `release` are calls
 *   bounded by the cluster's call timeout (a publication by its own, longer bound: it may wait for a reclaim). A
 *   runner that cannot reach the writer fails the attempt with an `EngineError` saying so (`lora`): a Session never
 *   generates with a version it did not bind, nor with the base model. A release that does not reach it is logged.
 * - Failover: the writer restarts empty on the runner that inherits its shard (SingleWriter). Bindings and versions are
 *   then lost: Sessions bound before fail their next request (`no-published-version` until the trainer publishes
 *   again), and the versions loaded on the workers stay until the run ends.
 * - In-place mode needs no fleet registry but a fleet-wide pause; it is refused in a cluster.
 */
import { Clock, Duration, Effect, Layer, Schema } from "effect"
import type { Sharding } from "effect/cluster"
import * as LoraRegistry from "../../src/lora/LoraRegistry.ts"
import * as Engine from "../engine/Engine.ts"
import * as LoraVersions from "../lora/LoraVersions.ts"
import * as SingleWriter from "./SingleWriter.ts"

/** The writer's name (its entity id). */
export const writerName = "lora-versions"

const PublishedSchema = Schema.Struct({
  version: Schema.String,
  id: Schema.Int,
  digest: Schema.String,
  noOp: Schema.Boolean
})

const Refused = Schema.Struct({ reason: Schema.String, detail: Schema.String })

/** Publish an adapter directory (the controller's trainer call). */
export const Publish = SingleWriter.op(
  "publish",
  Schema.Struct({ path: Schema.String, digest: Schema.optionalKey(Schema.String) }),
  Schema.Union([Schema.Struct({ published: PublishedSchema }), Schema.Struct({ refused: Refused })])
)
/** A Session's adapter: its bound version, bound now at its first request. */
export const AdapterFor = SingleWriter.op(
  "adapterFor",
  Schema.Struct({ sessionId: Schema.String }),
  Schema.Union([Schema.Struct({ adapter: Schema.NullOr(Schema.String) }), Schema.Struct({ refused: Refused })])
)
/** The Session ended. */
export const Release = SingleWriter.op("release", Schema.Struct({ sessionId: Schema.String }), Schema.Null)
/** Load every live version again on every worker (one restarted). */
export const Reload = SingleWriter.op("reload", Schema.Struct({}), Schema.Null)
/** The step's `lora/...` metrics. */
export const Metrics = SingleWriter.op("metrics", Schema.Struct({}), Schema.Record(Schema.String, Schema.Finite))

const publishReasons: ReadonlyArray<LoraVersions.LoraPublishError["reason"]> = [
  "adapter-path",
  "disabled",
  "registry",
  "load",
  "blocked"
]

/** The writer, built where its entity lives: one `LoraVersions` over that runner's engine. */
export const writer = (mode: LoraVersions.Mode, engine: Engine.EngineShape): SingleWriter.WriterFactory =>
  Effect.gen(function*() {
    const versions = yield* LoraVersions.make(engine, { mode }).pipe(
      // The runner's engine was checked at its own start (LoraEngine.layer); this cannot fail there.
      Effect.orDie
    )
    return [
      SingleWriter.handle(Publish, (input) =>
        versions.publish(input).pipe(
          Effect.map((published) => ({ published })),
          Effect.catch((error) => Effect.succeed({ refused: { reason: error.reason, detail: error.detail } }))
        )),
      SingleWriter.handle(AdapterFor, ({ sessionId }) =>
        versions.adapterFor(sessionId).pipe(
          Effect.map((adapter) => ({ adapter: adapter ?? null })),
          Effect.catch((error) => Effect.succeed({ refused: { reason: error.reason, detail: error.detail } }))
        )),
      SingleWriter.handle(Release, ({ sessionId }) => Effect.as(versions.release(sessionId), null)),
      SingleWriter.handle(Reload, () => Effect.as(versions.reload, null)),
      SingleWriter.handle(Metrics, () => versions.takeStepMetrics)
    ]
  })

/**
 * A member's `LoraVersions` over the fleet's writer: binds and releases bounded by `client`'s timeout, publications
 * by `publisher`'s.
 */
export const remote = (
  mode: LoraVersions.Mode,
  client: SingleWriter.WriterClient,
  publisher: SingleWriter.WriterClient
): LoraVersions.LoraVersionsShape => {
  const unreachable = (what: string, error: { readonly message: string }) =>
    `the fleet's LoRA registry (single writer ${writerName}) did not answer ${what}: ${error.message}`
  let warnedAt = -Infinity
  return {
    mode,
    publish: (input) =>
      publisher.call(Publish, { path: input.path, ...(input.digest === undefined ? {} : { digest: input.digest }) })
        .pipe(
          Effect.mapError((error) =>
            new LoraVersions.LoraPublishError({
              reason: "registry",
              detail: unreachable("a publication", error),
              cause: error
            })
          ),
          Effect.flatMap((answer) =>
            "published" in answer ? Effect.succeed(answer.published) : Effect.fail(
              new LoraVersions.LoraPublishError({
                reason: publishReasons.find((r) => r === answer.refused.reason) ?? "registry",
                detail: answer.refused.detail
              })
            )
          )
        ),
    adapterFor: (sessionId) =>
      client.call(AdapterFor, { sessionId }).pipe(
        Effect.mapError((error) =>
          new LoraRegistry.LoraRegistryError({ reason: "no-published-version", detail: unreachable("a bind", error) })
        ),
        Effect.flatMap((answer) =>
          "refused" in answer
            ? Effect.fail(
              new LoraRegistry.LoraRegistryError({
                reason: answer.refused.reason as LoraRegistry.LoraRegistryReason,
                detail: answer.refused.detail
              })
            )
            : Effect.succeed(answer.adapter ?? undefined)
        )
      ),
    release: (sessionId) =>
      client.call(Release, { sessionId }).pipe(
        Effect.asVoid,
        Effect.catch((error) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            if (now - warnedAt < 60_000) return
            warnedAt = now
            yield* Effect.logWarning(
              `${unreachable("a Session's release", error)}; its version stays bound (and loaded) until the writer ` +
                "restarts"
            )
          })
        )
      ),
    reload: client.call(Reload, {}).pipe(
      Effect.asVoid,
      Effect.catch((error) => Effect.logWarning(unreachable("a reload of the live versions", error)))
    ),
    takeStepMetrics: client.call(Metrics, {}).pipe(
      Effect.catch((error) => Effect.as(Effect.logWarning(`LoRA metrics: ${error.message}`), {}))
    )
  }
}

/** How long a publication may take through the writer: the capacity wait and the loads. */
export const publishTimeout = Duration.minutes(5)

/** A member's `LoraVersions` over the fleet's writer; in-place mode is refused (it needs a fleet-wide pause). */
export const versionsLayer = (
  mode: LoraVersions.Mode,
  timeout: Duration.Input
): Layer.Layer<LoraVersions.LoraVersions, Engine.EngineError, Sharding.Sharding> =>
  mode === "in-place"
    ? Layer.effect(
      LoraVersions.LoraVersions,
      Effect.fail(
        new Engine.EngineError({
          reason: "config",
          detail: "--lora-adapter-mode: in-place LoRA needs every runner paused at once and is not available in a " +
            "cluster; add --enable-versioned-lora-publication --fully-async (one fleet-wide version registry)"
        })
      )
    )
    : Layer.effect(
      LoraVersions.LoraVersions,
      Effect.gen(function*() {
        const client = yield* SingleWriter.client(writerName, timeout)
        const publisher = yield* SingleWriter.client(writerName, publishTimeout)
        return remote(mode, client, publisher)
      })
    )

/** The writers entry a runner hosts: `lora-versions` over its engine, when versioned LoRA is on. */
export const writerEntries = (
  mode: LoraVersions.Mode,
  engine: Engine.EngineShape
): ReadonlyArray<readonly [string, SingleWriter.WriterFactory]> =>
  mode === "versioned" ? [[writerName, writer(mode, engine)]] : []
