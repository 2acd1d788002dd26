import { Effect } from "effect"
import { performance } from "node:perf_hooks"
import { Tokenizer } from "../../layers/Tokenizer.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as Canonical from "../../src/protocol/canonical.ts"
import { conversation, text } from "./conversation.ts"
Effect.runPromise(Effect.gen(function*() {
  const tok = yield* Tokenizer
  const big = text(11, 1024 * 1024)
  for (let i = 0; i < 2; i++) {
    let t = performance.now()
    const raw = [...conversation(6, 300), { role: "user", content: big }]
    const body = JSON.stringify({ messages: raw })
    JSON.parse(body); console.log("json", performance.now() - t); t = performance.now()
    const c = Canonical.canonicalize({ messages: raw, tools: [], chat_template_kwargs: {} } as never); console.log("canon", performance.now() - t); t = performance.now()
    const r = tok.renderUnsafe({ messages: (c as any).success.messages, tools: [], chatTemplateKwargs: {}, addGenerationPrompt: true }); console.log("render", performance.now() - t); t = performance.now()
    const ids = tok.encode(r); console.log("encode", performance.now() - t, ids.length); t = performance.now()
    tok.decode(ids); console.log("decode", performance.now() - t); t = performance.now()
  }
}).pipe(Effect.provide(Tokenizer.layer)))
