// A minimal agent for the spawn benchmark (plain node, no TypeScript loader): one chat completion through the
// gateway with RELAX_SESSION_ID as the API key, then reward 1 in RELAX_OUTPUT_JSON.
import { writeFileSync } from "node:fs"

const response = await fetch(`${process.env.RELAX_BASE_URL}v1/chat/completions`, {
  method: "POST",
  headers: { authorization: `Bearer ${process.env.RELAX_SESSION_ID}`, "content-type": "application/json" },
  body: JSON.stringify({ model: "agent", messages: [{ role: "user", content: "What is 2 + 2?" }], max_tokens: 16 })
})
if (response.status !== 200) throw new Error(`the gateway answered ${response.status}: ${await response.text()}`)
await response.json()
writeFileSync(process.env.RELAX_OUTPUT_JSON, JSON.stringify({ reward: 1 }))
