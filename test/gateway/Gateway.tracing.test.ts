/**
 * A model request's spans through the real HTTP gateway: none without a tracer (Effect's native tracer exports
 * nowhere, so `Gateway.handle` and `Generation.generate` are not opened; docs/observability.md, "Traces"), the whole
 * chain under `Gateway.handle` with one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Tracer } from "effect"
import OpenAI from "openai"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as ScriptedEngine from "../support/scriptedEngine.ts"
import * as Sessions from "../support/sessions.ts"
import * as Tracing from "../support/tracing.ts"

/** The gateway whose engine records the span each generation is asked from (`null`: none). */
const watchedGateway = (seen: Array<string | null>) =>
  Gateway.Gateway.layer().pipe(
    Layer.provideMerge(GatewayStack.generationStackWith(ScriptedEngine.wrapGenerate((generate) => (request) =>
      Effect.withFiber((fiber) => {
        seen.push(Tracing.spanName(Context.getOption(fiber.context, Tracer.ParentSpan)))
        return generate(request)
      })
    )))
  )

/** One chat request of a new Session through the gateway. */
const oneRequest = Effect.gen(function*() {
  const { baseUrl } = yield* Gateway.Gateway
  const sessionId = yield* Sessions.registeredSession({ sampling: Sessions.sampling({ maxNewTokens: 64 }) })
  const client = new OpenAI({ baseURL: baseUrl, apiKey: sessionId, maxRetries: 0 })
  const answer = yield* Effect.promise(() =>
    client.chat.completions.create({ model: "policy", messages: [{ role: "user", content: "Please compute 2+2?" }] })
  )
  assert.isAbove(answer.usage?.completion_tokens ?? 0, 0)
})

describe("Gateway spans", () => {
  it.effect(
    "without a tracer the request opens no span; with one, Gateway.handle holds the chain",
    () =>
      Effect.gen(function*() {
        const untraced: Array<string | null> = []
        yield* oneRequest.pipe(Effect.provide(watchedGateway(untraced)))
        assert.deepStrictEqual(untraced, [null])

        const traced: Array<string | null> = []
        const { spans, tracer } = Tracing.recordingTracer()
        yield* oneRequest.pipe(
          Effect.provide(watchedGateway(traced).pipe(Layer.provide(Layer.succeed(Tracer.Tracer, tracer))))
        )
        assert.deepStrictEqual(traced, ["Generation.attempt"])
        const handle = spans.find((span) => span.name === "Gateway.handle")
        assert(handle !== undefined, `no Gateway.handle among ${spans.map((span) => span.name).join(", ")}`)
        assert.strictEqual(Tracing.spanName(handle.parent), null)
        const generate = spans.find((span) => span.name === "Generation.generate")
        assert.strictEqual(generate !== undefined ? Tracing.spanName(generate.parent) : undefined, "Gateway.handle")
      }),
    { timeout: 60_000 }
  )
})
