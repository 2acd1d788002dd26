/**
 * `/metrics` on the real gateway with the embedded engine: a model request through the official `openai` client, then
 * a scrape of the Prometheus text, parsed line by line.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { Gateway } from "../../layers/gateway/Gateway.ts"
import { calcTool } from "../fixtures/gateway/policy.ts"
import { gatewayStack } from "../support/gatewayStack.ts"
import { registeredSession, sampling } from "../support/sessions.ts"

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** Parse Prometheus text exposition: `name{a="x",b="y"} value` lines; comments skipped. */
const parse = (text: string): ReadonlyArray<Sample> =>
  text.split("\n").filter((line) => line.length > 0 && !line.startsWith("#")).map((line) => {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line)
    assert(match !== null, `not a Prometheus sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]!] = pair[2]!
    }
    return { name: match[1]!, labels, value: Number(match[3]) }
  })

const newSession = registeredSession({ sampling: sampling({ maxNewTokens: 256 }), maxContextLen: 4096 })

describe("Prometheus /metrics", () => {
  it.layer(gatewayStack(), { timeout: 60_000 })((it) => {
    it.effect("counts a chat request by protocol and status, its tokens and its generation time", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* Gateway
        const client = new OpenAI({ baseURL: baseUrl, apiKey: yield* newSession, maxRetries: 0 })
        const completion = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: "policy",
            messages: [{ role: "user", content: "Please compute 2+2?" }],
            tools: [calcTool]
          })
        )
        const generated = completion.usage?.completion_tokens ?? 0
        expect(generated).toBeGreaterThan(0)
        const response = yield* Effect.promise(() => fetch(`${new URL(baseUrl).origin}/metrics`))
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toContain("text/plain")
        const samples = parse(yield* Effect.promise(() => response.text()))
        const requests = samples.find((s) =>
          s.name === "relax_agentic_requests_total" && s.labels["protocol"] === "chat" && s.labels["status"] === "200"
        )
        expect(requests?.value).toBe(1)
        const tokens = samples.find((s) => s.name === "relax_agentic_tokens_generated_total")
        expect(tokens?.value).toBe(generated)
        const count = samples.find((s) => s.name === "relax_agentic_generation_seconds_count")
        expect(count?.value).toBe(1)
        const infBucket = samples.find((s) =>
          s.name === "relax_agentic_generation_seconds_bucket" && s.labels["le"] === "+Inf"
        )
        expect(infBucket?.value).toBe(1)
      }))
  })
})
