/**
 * Matching a request by its raw bytes (src/protocol/RawEcho.ts, `Canonical.KnownPrefix`, `Matching.match`'s `known`)
 * against the path it replaces: two forests receive the same conversations, one decoded and matched whole, one
 * through the raw-echo path; every request's canonical state, match and commit must be the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as StateHash from "../../src/forest/StateHash.ts"
import * as Canonical from "../../src/protocol/Canonical.ts"
import * as Chat from "../../src/protocol/Chat.ts"
import type * as Completion from "../../src/protocol/Completion.ts"
import * as RawEcho from "../../src/protocol/RawEcho.ts"

type Raw = Record<string, unknown>

/** What the agent does before its next request. */
type Step =
  | { readonly _tag: "append"; readonly role: "user" | "tool" | "system"; readonly text: string }
  | { readonly _tag: "dropReasoning" }
  | { readonly _tag: "retry" }
  | { readonly _tag: "edit"; readonly at: number; readonly text: string }
  | { readonly _tag: "truncate"; readonly keep: number }
  | { readonly _tag: "tools" }

const text = fc.constantFrom("a", "b", "hi \"x\" \\", "é中文", "<think>r</think>c", "\n")
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("append" as const),
      role: fc.constantFrom("user" as const, "tool" as const),
      text
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("append" as const), role: fc.constant("system" as const), text })
  },
  { weight: 1, arbitrary: fc.constant({ _tag: "dropReasoning" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "retry" as const }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("edit" as const), at: fc.nat(), text }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("truncate" as const), keep: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "tools" as const }) }
)

const tool = { type: "function", function: { name: "read_file", parameters: { type: "object" } } }

/** One side: its forest and, for the raw-echo side, the mark of its last exactly matched request. */
interface Side {
  readonly forest: Forest.Forest
  memo: (RawEcho.Mark & { readonly state: string }) | undefined
}

const decode = (body: Raw, known?: Canonical.KnownPrefix): Completion.CanonicalRequest =>
  Result.getOrThrow(Chat.decode(body, known))

const newForest = () => Forest.make({ sessionId: "s", groupIndex: 0, index: 0, label: null, metadata: {} })

/** One request on both sides: the same canonical state (up to the forest's own objects), match and commits. */
const request = (
  whole: Side,
  echo: Side,
  body: Raw,
  turn: number,
  strict: boolean
): { readonly known: boolean; readonly answer: Raw } => {
  const bytes = new TextEncoder().encode(JSON.stringify(body))
  // The path it replaces: decode and match the whole history.
  const a = decode(body)
  const matchA = Matching.match(whole.forest, a.state, { strict })
  // The raw-echo path, as the gateway and the generation core run it.
  const reading = RawEcho.read(bytes, echo.memo)
  const memo = echo.memo
  const prefix = reading.repeats && memo !== undefined
    ? { count: memo.count, messages: Forest.fullMessages(echo.forest, memo.state), state: memo.state }
    : undefined
  const b = decode(body, prefix)
  const known = prefix === undefined ? undefined : { state: prefix.state, messages: prefix.messages.length }
  const matchB = Matching.match(echo.forest, b.state, { strict, known })
  assert.strictEqual(StateHash.ofState(b.state), StateHash.ofState(a.state))
  assert.strictEqual(matchB.parent, matchA.parent)
  assert.deepStrictEqual(matchB.suffix, matchA.suffix)
  assert.strictEqual(matchB.toleratedTurns, matchA.toleratedTurns)
  const commit = (side: Side, state: Canonical.State, matched: Matching.Match) => {
    const obs = ForestCommit.commitObservation(side.forest, {
      parent: matched.parent,
      messages: matched.suffix,
      tokens: matched.suffix.map((_, i) => i + 1),
      tools: state.tools,
      chatTemplateKwargs: state.chat_template_kwargs,
      rolloutId: 0
    })
    const message: Canonical.Message = {
      role: "assistant",
      content: `answer ${turn}`,
      reasoning_content: `why ${turn}`
    }
    ForestCommit.commitResponse(side.forest, {
      parent: obs,
      message,
      tokens: [7, 8],
      logprobs: [-0.5, -0.25],
      weightVersions: [],
      status: "completed",
      rolloutId: 0,
      requestId: `r${turn}`,
      abortCount: 0,
      wallElapsedS: 0,
      generationElapsedS: 0
    })
    return obs
  }
  const obsA = commit(whole, a.state, matchA)
  const obsB = commit(echo, b.state, matchB)
  assert.strictEqual(obsB, obsA)
  if (reading.mark !== undefined && !matchB.tolerated) echo.memo = { ...reading.mark, state: obsB }
  // Reused: the state's messages begin with the forest's own objects, which `Matching.match` accepts as proof.
  const reused = prefix !== undefined && prefix.messages.every((m, i) => b.state.messages[i] === m)
  return { known: reused, answer: { role: "assistant", content: `answer ${turn}`, reasoning_content: `why ${turn}` } }
}

describe("matching by raw bytes", () => {
  it("decodes and matches every request as the whole-history path does", () => {
    let reused = 0
    let requests = 0
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), fc.boolean(), (steps, strict) => {
        const whole: Side = { forest: newForest(), memo: undefined }
        const echo: Side = { forest: newForest(), memo: undefined }
        const messages: Array<Raw> = [{ role: "system", content: "sys" }, { role: "user", content: "task" }]
        let tools = false
        for (const [turn, s] of steps.entries()) {
          const body: Raw = { model: "m", messages: [...messages], max_tokens: 16, ...(tools ? { tools: [tool] } : {}) }
          const { known, answer } = request(whole, echo, body, turn, strict)
          requests++
          if (known) reused++
          messages.push(answer)
          switch (s._tag) {
            case "append":
              messages.push(
                s.role === "tool"
                  ? { role: "tool", content: s.text, tool_call_id: "c" }
                  : { role: s.role, content: s.text }
              )
              break
            case "dropReasoning": {
              const { reasoning_content: _, ...rest } = answer
              messages[messages.length - 1] = rest
              messages.push({ role: "user", content: "go on" })
              break
            }
            case "retry":
              messages.pop()
              break
            case "edit":
              messages[s.at % messages.length] = { role: "user", content: s.text }
              break
            case "truncate":
              messages.splice(1 + (s.keep % messages.length))
              break
            case "tools":
              tools = !tools
              messages.push({ role: "user", content: "tools changed" })
              break
          }
        }
      }),
      { numRuns: 400 }
    )
    // Most requests append to the previous history, so most reuse it.
    assert.isAbove(reused, requests / 3)
  })
})
