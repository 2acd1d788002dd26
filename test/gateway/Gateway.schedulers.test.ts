/**
 * The real gateway over the embedded engine on the rollout's FairScheduler and on Effect's default scheduler: the same
 * answers and the same forests, token for token. On the FairScheduler, with the lease held, a request does not await
 * it nor hop to a new task after it (the generation core's cut of issue 24's eighth pass, `Generation.ts` `attempt`);
 * under the default scheduler every request does both. Issue 24's ninth pass also ran this test against the route
 * rendering an answer given in the request's own task without its `continueAsTask` (docs/performance.md section 1,
 * "Issue 24, ninth pass"): it passed, and the cut was left out because it cost CPU.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import OpenAI from "openai"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import * as Policy from "../fixtures/gateway/policy.ts"
import * as GatewayStack from "../support/gatewayStack.ts"
import * as Sessions from "../support/sessions.ts"

/** A Session whose lease is held, as the Group's barrier reports it (the generation core's skip applies). */
const newSession = Sessions.registeredSession({
  sampling: Sessions.sampling({ maxNewTokens: 256 }),
  maxContextLen: 4096,
  leaseHeld: () => true
})

/** A JSON replacer dropping the random ids (completions', tool calls') and their echoes. */
const withoutIds = (key: string, value: unknown) => key === "id" || key === "tool_call_id" ? undefined : value

const question = [{ role: "user" as const, content: "Please compute 2+2?" }]

/** One Session's tool loop, the second turn streamed or not; what the agent saw, without random ids and times. */
const toolLoop = (client: OpenAI, stream: boolean) =>
  Effect.promise(async () => {
    const first = await client.chat.completions.create({
      model: "policy",
      messages: question,
      tools: [Policy.calcTool]
    })
    const message = first.choices[0]?.message
    const call = message?.tool_calls?.[0]
    assert(message !== undefined && call !== undefined && call.type === "function")
    const messages = [...question, message, { role: "tool" as const, tool_call_id: call.id, content: "4" }]
    const seen: Array<unknown> = [first.choices, first.usage]
    if (stream) {
      const chunks = await client.chat.completions.create({
        model: "policy",
        messages,
        tools: [Policy.calcTool],
        stream: true
      })
      for await (const chunk of chunks) seen.push(chunk.choices, chunk.usage)
    } else {
      const second = await client.chat.completions.create({ model: "policy", messages, tools: [Policy.calcTool] })
      seen.push(second.choices, second.usage)
    }
    // A third turn from the first: a branch.
    const branch = await client.chat.completions.create({
      model: "policy",
      messages: [{ role: "user", content: "hello" }]
    })
    seen.push(branch.choices, branch.usage)
    return JSON.stringify(seen, withoutIds)
  })

/** Every leaf's lineage: kinds, messages and token ids. */
const forestOf = (sessionId: string) =>
  Effect.gen(function*() {
    const forest = yield* (yield* Forests.Forests).get(sessionId)
    return Forest.leaves(forest).map((leaf) =>
      Forest.lineage(forest, leaf).map((node) => ({
        kind: node.kind,
        messages: JSON.stringify(node.messages, withoutIds),
        ids: [...PackedIds.unpack(node.ids)],
        logprobs: node.kind === "resp" ? [...node.logprobs] : []
      }))
    )
  })

/** Four Sessions at once (two streaming their second turn) on `stack`: their answers and forests. */
const run = (stack: ReturnType<typeof GatewayStack.gatewayStack>) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* Gateway.Gateway
    const sessions = yield* Effect.forEach([false, true, false, true], () => newSession)
    const answers = yield* Effect.forEach(
      sessions,
      (sessionId, i) => toolLoop(new OpenAI({ baseURL: baseUrl, apiKey: sessionId, maxRetries: 0 }), i % 2 === 1),
      { concurrency: "unbounded" }
    )
    const forests = yield* Effect.forEach(sessions, forestOf)
    return { answers, forests }
  }).pipe(Effect.provide(stack))

describe("Gateway: the hop after an answer given in the request's task", () => {
  it.effect(
    "on the FairScheduler (hop skipped) and the default scheduler (hop kept): same answers and forests",
    () =>
      Effect.gen(function*() {
        const fair = yield* run(GatewayStack.gatewayStack().pipe(Layer.provide(FairScheduler.layer())))
        const plain = yield* run(GatewayStack.gatewayStack())
        expect(fair.answers).toEqual(plain.answers)
        expect(fair.forests).toEqual(plain.forests)
        // The scenario did what it says: a tool loop committed as one leaf plus a branch, every Session.
        for (const forest of fair.forests) {
          expect(forest.map((lineage) => lineage.map((node) => node.kind))).toEqual([
            ["obs", "obs", "resp", "obs", "resp"],
            ["obs", "obs", "resp"]
          ])
        }
      }),
    { timeout: 60_000 }
  )
})
