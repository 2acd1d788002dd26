// The cluster benchmark's agent: REQUESTS sequential chat requests (each a one-turn conversation, so every request is
// a full generation of the same size) at RELAX_BASE_URL, each timed; the latencies go to $REPORT_DIR/<session>.json.
import { readFileSync, writeFileSync } from "node:fs"

const input = JSON.parse(readFileSync(process.env.RELAX_INPUT_JSON, "utf8"))
const url = `${process.env.RELAX_BASE_URL}v1/chat/completions`
const headers = { authorization: `Bearer ${process.env.RELAX_SESSION_ID}`, "content-type": "application/json" }
const body = JSON.stringify({ model: "m", messages: input.messages })
const latencies = []
for (let i = 0; i < Number(process.env.REQUESTS ?? 20); i++) {
  const started = performance.now()
  const response = await fetch(url, { method: "POST", headers, body })
  await response.text()
  if (response.status !== 200) throw new Error(`status ${response.status}`)
  latencies.push(performance.now() - started)
}
writeFileSync(`${process.env.REPORT_DIR}/${process.env.RELAX_SESSION_ID}.json`, JSON.stringify(latencies))
writeFileSync(process.env.RELAX_OUTPUT_JSON, JSON.stringify({ reward: 1 }))
