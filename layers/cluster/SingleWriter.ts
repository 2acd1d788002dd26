/**
 * The fleet's single writers (docs/architecture.md "Single writers in a cluster"): state that must have exactly one
 * writer across every runner (the KV admission ledger, a LoRA version registry) lives in one cluster entity per
 * writer name, and every member calls it with a bounded timeout.
 *
 * **Details**
 * - A writer is a named set of operations ({@link Op}: a name and the Schemas of its payload and answer). Every runner
 *   registers the same writers ({@link Writers}: name → how to build its handler); the cluster activates the entity
 *   whose id is the writer's name on the one runner owning that id's shard, and builds the handler there once, in the
 *   entity's scope (its state and fibers live as long as the entity; it is never passivated for idleness).
 * - Calls are volatile entity messages (never stored): {@link client} gives `call(op, payload)`, bounded by the
 *   client's timeout. A writer that does not answer in time (its runner died and the shard is moving, the cluster is
 *   partitioned) fails the call with {@link SingleWriterUnavailableError}: the caller degrades visibly (admission
 *   bypasses and counts it), it never hangs.
 * - When the owning runner dies the entity is activated again on the runner that inherits the shard, with fresh
 *   state: a writer's state is soft (the admission ledger is rebuilt from the next snapshot and new reservations).
 * - The controller (a client-only member) calls writers the same way (the admission ledger's step metrics).
 */
import { Context, Data, Duration, Effect, Schema, type Scope } from "effect"
import { Entity, type Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"

/** The writer refused a call: an unknown writer or operation, or a payload its Schema rejects. */
export class SingleWriterCallError extends Data.TaggedError("SingleWriterCallError")<{
  readonly reason: "unknown-writer" | "unknown-op" | "bad-payload" | "bad-answer"
  readonly writer: string
  readonly op: string
  readonly detail: string
}> {
  override get message(): string {
    return `single writer ${this.writer}, ${this.op}: ${this.detail}`
  }
}

/** The writer did not answer within the caller's bound. */
export class SingleWriterUnavailableError extends Data.TaggedError("SingleWriterUnavailableError")<{
  readonly reason: "timeout" | "cluster"
  readonly writer: string
  readonly op: string
  readonly detail: string
}> {
  override get message(): string {
    return `single writer ${this.writer} did not answer ${this.op} (${this.detail})`
  }
}

const WireCallError = Schema.Struct({
  reason: Schema.Literals(["unknown-writer", "unknown-op", "bad-payload", "bad-answer"]),
  detail: Schema.String
})

const isWireCallError = Schema.is(WireCallError)

/** One call: an operation of the writer named by the entity id, its payload as JSON. */
export const Call = Rpc.make("Call", {
  payload: { op: Schema.String, body: Schema.Json },
  success: Schema.Json,
  error: WireCallError
})

/** The single-writer entity (its id is the writer's name). */
export const Writer = Entity.make("RelaxSingleWriter", [Call])

/**
 * An operation of a writer: its name and the Schemas of its payload and answer, both JSON-encodable and needing no
 * service (`Schema.Codec` is covariant in its type, so `Codec<unknown, Json>` admits every such Schema and `P["Type"]`
 * is still the operation's own type).
 */
export interface Op<P extends Schema.Codec<unknown, Schema.Json>, S extends Schema.Codec<unknown, Schema.Json>> {
  readonly name: string
  readonly payload: P
  readonly success: S
}

/** Define an operation. */
export const op = <P extends Schema.Codec<unknown, Schema.Json>, S extends Schema.Codec<unknown, Schema.Json>>(
  name: string,
  payload: P,
  success: S
): Op<P, S> => ({ name, payload, success })

/** One operation's implementation, its types erased to JSON at the boundary (what a handler is made of). */
export interface Handled {
  readonly name: string
  readonly run: (body: Schema.Json) => Effect.Effect<Schema.Json, typeof WireCallError.Type>
}

/** Implement `definition` with `run` (payload decoded, answer encoded with the operation's Schemas). */
export const handle = <P extends Schema.Codec<unknown, Schema.Json>, S extends Schema.Codec<unknown, Schema.Json>>(
  definition: Op<P, S>,
  run: (payload: P["Type"]) => Effect.Effect<S["Type"]>
): Handled => {
  const decode = Schema.decodeUnknownEffect(definition.payload)
  const encode = Schema.encodeEffect(definition.success)
  return {
    name: definition.name,
    run: (body) =>
      decode(body).pipe(
        Effect.mapError((error) => ({ reason: "bad-payload" as const, detail: error.message })),
        Effect.flatMap(run),
        Effect.flatMap((answer) =>
          encode(answer).pipe(Effect.mapError((error) => ({ reason: "bad-answer" as const, detail: error.message })))
        )
      )
  }
}

/** How one writer is built where its entity lives: its operations (built once per activation, in its scope). */
export type WriterFactory = Effect.Effect<ReadonlyArray<Handled>, never, Scope.Scope>

/** The writers this member can host, by name (every runner registers the same ones). */
export class Writers extends Context.Service<Writers, ReadonlyMap<string, WriterFactory>>()(
  "relax-agentic/Writers"
) {}

/** Register the single-writer entity on this runner (it serves the writers of {@link Writers}). */
export const entityLayer = Writer.toLayer(
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const writers = yield* Writers
    const name = address.entityId
    const factory = writers.get(name)
    const ops = new Map((factory === undefined ? [] : yield* factory).map((h) => [h.name, h]))
    return Writer.of({
      Call: ({ payload }) => {
        if (factory === undefined) {
          return Effect.fail({ reason: "unknown-writer" as const, detail: `no writer ${name} on this runner` })
        }
        const found = ops.get(payload.op)
        return found === undefined
          ? Effect.fail({ reason: "unknown-op" as const, detail: `writer ${name} has no operation ${payload.op}` })
          : found.run(payload.body)
      }
    })
  }),
  // One entity per writer: messages run concurrently (a long-polling call must not block the others); never idle out.
  { concurrency: "unbounded", disableFatalDefects: true, maxIdleTime: Duration.days(3650) }
)

/** Calls to writer `name`, each bounded by `timeout`. */
export interface WriterClient {
  readonly call: <P extends Schema.Codec<unknown, Schema.Json>, S extends Schema.Codec<unknown, Schema.Json>>(
    definition: Op<P, S>,
    payload: P["Type"]
  ) => Effect.Effect<S["Type"], SingleWriterUnavailableError | SingleWriterCallError>
}

/** A client of writer `name` on this member's sharding. */
export const client = (
  name: string,
  timeout: Duration.Input
): Effect.Effect<WriterClient, never, Sharding.Sharding> =>
  Effect.gen(function*() {
    const writer = (yield* Writer.client)(name)
    return {
      call: (definition, payload) =>
        Effect.gen(function*() {
          const body = yield* Schema.encodeEffect(definition.payload)(payload).pipe(
            Effect.mapError((error) =>
              new SingleWriterCallError({
                reason: "bad-payload",
                writer: name,
                op: definition.name,
                detail: error.message
              })
            )
          )
          const answer = yield* writer.Call({ op: definition.name, body }).pipe(
            Effect.mapError((error): SingleWriterCallError | SingleWriterUnavailableError =>
              isWireCallError(error)
                ? new SingleWriterCallError({ ...error, writer: name, op: definition.name })
                : new SingleWriterUnavailableError({
                  reason: "cluster",
                  writer: name,
                  op: definition.name,
                  detail: String(error._tag)
                })
            ),
            Effect.timeoutOrElse({
              duration: timeout,
              orElse: () =>
                Effect.fail(
                  new SingleWriterUnavailableError({
                    reason: "timeout",
                    writer: name,
                    op: definition.name,
                    detail: `no answer within ${Duration.format(Duration.fromInputUnsafe(timeout))}`
                  })
                )
            })
          )
          return yield* Schema.decodeUnknownEffect(definition.success)(answer).pipe(
            Effect.mapError((error) =>
              new SingleWriterCallError({
                reason: "bad-answer",
                writer: name,
                op: definition.name,
                detail: error.message
              })
            )
          )
        })
    }
  })
