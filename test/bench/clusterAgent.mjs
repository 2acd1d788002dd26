// The cluster benchmark's agent: $WARMUP warm-up chat requests (default 1) at RELAX_BASE_URL, then
// $BARRIER/ready/<session>; once
// $BARRIER/go exists, REQUESTS sequential requests (each a one-turn conversation, so every request is a full generation
// of the same size), each timed; the latencies and how the requests reached the owner (the `x-relax-forwarded-via`
// counts) go to $BARRIER/reports/<session>.json, and the agent ends once
// $BARRIER/done exists (so its process, and the Session, stay until the bench has read the members' CPU and heap).
// Without $BARRIER: REQUESTS untimed requests, then the agent ends.
import { existsSync, readFileSync, writeFileSync } from "node:fs"

const input = JSON.parse(readFileSync(process.env.RELAX_INPUT_JSON, "utf8"))
const url = `${process.env.RELAX_BASE_URL}v1/chat/completions`
const session = process.env.RELAX_SESSION_ID
const barrier = process.env.BARRIER
const headers = { authorization: `Bearer ${session}`, "content-type": "application/json" }
const body = JSON.stringify({ model: "m", messages: input.messages })
// How each request reached its owner (x-relax-forwarded-via: `spliced`, `direct`, `cluster`, or `none` when not
// forwarded).
const via = { spliced: 0, direct: 0, cluster: 0, none: 0 }
const request = async () => {
  const response = await fetch(url, { method: "POST", headers, body })
  await response.text()
  if (response.status !== 200) throw new Error(`status ${response.status}`)
  return response.headers.get("x-relax-forwarded-via") ?? "none"
}
const exists = (name) =>
  new Promise((resolve) => {
    const poll = setInterval(() => {
      if (existsSync(`${barrier}/${name}`)) {
        clearInterval(poll)
        resolve()
      }
    }, 50)
  })
const requests = Number(process.env.REQUESTS ?? 20)
if (barrier === undefined) {
  // Without $BARRIER (the heapsteps bench): the requests one after another, untimed, and the agent ends.
  for (let i = 0; i < requests; i++) await request()
} else {
  const warmup = Number(process.env.WARMUP ?? 1)
  for (let i = 0; i < warmup; i++) await request()
  writeFileSync(`${barrier}/ready/${session}`, "")
  await exists("go")
  const latencies = []
  for (let i = 0; i < requests; i++) {
    const started = performance.now()
    via[await request()]++
    latencies.push(performance.now() - started)
  }
  writeFileSync(`${barrier}/reports/${session}.json`, JSON.stringify({ latencies, via }))
  await exists("done")
}
writeFileSync(process.env.RELAX_OUTPUT_JSON, JSON.stringify({ reward: 1 }))
