/**
 * Spans for the steps inside one model request, opened only when a tracing backend is installed.
 *
 * **Details**
 * A request runs about a dozen named steps (`Generation.match`, `Forests.observe`, the engine's `generate`, ...).
 * As `Effect.fn` spans each one costs a captured call-site stack, a span, two context updates and an exit observer,
 * a large share of the generation core's CPU (measured in docs/performance.md, "Figures behind code comments"),
 * although Effect's default tracer (`Tracer.nativeTracer`) exports its spans nowhere. A step wrapped with {@link step} opens its
 * span only when the fiber's tracer is another one (an OpenTelemetry layer, `Effect.withTracer`) and tracing is
 * enabled (`References.TracerEnabled`); otherwise it runs as it is. The request's own spans (`Gateway.handle`,
 * `Generation.generate`) follow the same rule: a native span is seen by nothing (no exporter, no log line, no failure's
 * cause), and the two of them cost a request about 8 KiB of garbage (two context copies, the spans, their exit
 * observers). With a tracer installed every span carries no call-site stack (`captureStackTrace: false`): the
 * step's name says where it is.
 */
import { Context, Effect, type Fiber, References, Tracer } from "effect"

/**
 * Whether a span opened by a fiber running with `context` reaches a tracing backend: tracing is on and the tracer is
 * not the native one (a server reads it once, from the context it serves on).
 */
export const isTracingIn = (context: Context.Context<never>): boolean =>
  Context.get(context, References.TracerEnabled) && Context.get(context, Tracer.Tracer) !== Tracer.nativeTracer

/** {@link isTracingIn} for `fiber`'s context. */
export const isTracing = (fiber: Fiber.Fiber<unknown, unknown>): boolean => isTracingIn(fiber.context)

const noStack = { captureStackTrace: false } as const

/**
 * `effect` in the span `name` (no call-site stack) when `tracing` ({@link isTracing}, read by the caller), as it is
 * otherwise.
 */
export const spanIf = <A, E, R>(
  tracing: boolean,
  effect: Effect.Effect<A, E, R>,
  name: string,
  attributes?: Readonly<Record<string, unknown>>
): Effect.Effect<A, E, R> =>
  tracing
    ? Effect.withSpan(effect, name, attributes === undefined ? noStack : { attributes, captureStackTrace: false })
    : effect

/**
 * `effect` inside the span `name` when {@link isTracing}, as it is otherwise. Data-last, so it can be an
 * `Effect.fnUntraced` pipeable: `Effect.fnUntraced(function*(...) {...}, StepSpan.step("Generation.match"))`.
 */
export const step =
  (name: string, attributes?: Readonly<Record<string, unknown>>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiber((fiber) => spanIf(isTracing(fiber), effect, name, attributes))

/**
 * The step whose effect `make` makes when it runs (a synchronous step makes `Effect.succeed` or `Effect.fail` of its
 * result), in the span `name` when {@link isTracing}: without a tracer one primitive and `make`'s effect, where
 * {@link step} around an `Effect.fnUntraced` body runs a generator and several primitives.
 */
export const stepOf = <A, E, R>(name: string, make: () => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => isTracing(fiber) ? Effect.withSpan(Effect.suspend(make), name, noStack) : make())

/** The step `gen` as an effect in the span `name` (no call-site stack). */
const spanned = <Eff extends Effect.Effect<unknown, unknown, unknown>, A>(
  name: string,
  gen: Generator<Eff, A, unknown>
) => Effect.withSpan(Effect.gen(() => gen), name, noStack)

/**
 * A step written as a generator (`gen`), for the generator of a request to delegate to (`yield*`): the generator
 * itself, run inline with no effect of its own, unless `tracing` ({@link isTracing}, read once by the request), when
 * it is an effect in the span `name`, as {@link step} opens it.
 */
export const inline = <Eff extends Effect.Effect<unknown, unknown, unknown>, A>(
  tracing: boolean,
  name: string,
  gen: Generator<Eff, A, unknown>
): Generator<Eff, A, unknown> | ReturnType<typeof spanned<Eff, A>> => tracing ? spanned(name, gen) : gen

/**
 * Link the current span to `target` (a span of another trace, e.g. a model request's root to its Session's span), when
 * {@link isTracing}; nothing otherwise.
 */
export const linkTo = (
  target: Tracer.AnySpan,
  attributes: Readonly<Record<string, unknown>> = {}
): Effect.Effect<void> =>
  Effect.withFiber((fiber) =>
    isTracing(fiber)
      ? Effect.currentSpan.pipe(
        Effect.flatMap((span) => Effect.sync(() => span.addLinks([{ span: target, attributes }]))),
        Effect.ignore
      )
      : Effect.void
  )
