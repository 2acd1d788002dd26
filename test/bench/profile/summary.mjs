// usage: node test/bench/profile/summary.mjs bench-profiles/X.cpuprofile [topN]
// Prints self time by category (file/package) and top functions by self time.
import fs from "node:fs"
import { category } from "./category.mjs"
const [file, topArg] = process.argv.slice(2)
const top = Number(topArg ?? 40)
const p = JSON.parse(fs.readFileSync(file, "utf8"))
const byId = new Map(p.nodes.map((n) => [n.id, n]))
const self = new Map()
const dt = p.timeDeltas
for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + (dt[i] ?? 0))
const cat = category
const byCat = new Map(), byFn = new Map()
let total = 0
for (const [id, t] of self) {
  const n = byId.get(id)
  const cf = n.callFrame
  if (cf.functionName === "(idle)") continue
  total += t
  const c = cf.url ? cat(cf.url) : cf.functionName
  byCat.set(c, (byCat.get(c) ?? 0) + t)
  const k = `${cf.functionName || "(anon)"} ${cat(cf.url)}:${cf.lineNumber + 1}`
  byFn.set(k, (byFn.get(k) ?? 0) + t)
}
const pr = (m, n) =>
  [...m].sort((a, b) => b[1] - a[1]).slice(0, n).forEach(([k, t]) =>
    console.log(`${(100 * t / total).toFixed(1).padStart(5)}%  ${(t / 1000).toFixed(0).padStart(7)} ms  ${k}`)
  )
console.log(`total non-idle ${(total / 1000).toFixed(0)} ms`)
console.log("== by category")
pr(byCat, 30)
console.log("== by function")
pr(byFn, top)
