// usage: node test/bench/profile/stalls.mjs bench-profiles/X.cpuprofile stalls.json [topN]
// For each stall window (from test/bench/sessions.ts with STALL_LOG), the profile's self time inside it by category and function.
import fs from "node:fs"
import { category } from "./category.mjs"
const [file, stallFile, topArg] = process.argv.slice(2)
const top = Number(topArg ?? 8)
const p = JSON.parse(fs.readFileSync(file, "utf8"))
const stalls = JSON.parse(fs.readFileSync(stallFile, "utf8"))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const cat = category
const ts = []
let t = p.startTime
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i]
  ts.push(t)
}
for (const s of stalls.sort((a, b) => b.durationMs - a.durationMs).slice(0, Number(process.env.N ?? 12))) {
  const a = s.startUs, b = s.startUs + (s.durationMs + 5) * 1000
  const byCat = new Map(), byFn = new Map()
  let total = 0
  for (let i = 0; i < ts.length; i++) {
    if (ts[i] < a || ts[i] > b) continue
    const n = byId.get(p.samples[i])
    const d = p.timeDeltas[i + 1] ?? 0
    const fn = n.callFrame.functionName || "(anon)"
    const c = cat(n.callFrame.url)
    if (fn === "(idle)") continue
    total += d
    byCat.set(c, (byCat.get(c) ?? 0) + d)
    const k = fn + " " + c
    byFn.set(k, (byFn.get(k) ?? 0) + d)
  }
  const fmt = (m) =>
    [...m].sort((x, y) => y[1] - x[1]).slice(0, top).map(([k, v]) => `${(v / 1000).toFixed(0)}ms ${k}`).join(" | ")
  console.log(
    `\n[${s.phase}] ${s.durationMs.toFixed(0)} ms (gc ${s.gcMs.toFixed(0)}, major ${s.majorGcMs.toFixed(0)}) samples ${
      (total / 1000).toFixed(0)
    } ms`
  )
  console.log("  cat: " + fmt(byCat))
  console.log("  fn:  " + fmt(byFn))
}
