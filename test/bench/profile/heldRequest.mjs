// Who holds what a held request keeps: `node test/bench/profile/heldRequest.mjs before.heapsnapshot after.heapsnapshot
// [units]` over the `sessions` benchmark's snapshots (HEAP_SNAPSHOTS=<dir>; units: the number of held requests). Every
// object in the second snapshot and not in the first goes to the nearest of these holders that reaches it (a breadth-
// first walk from all of them at once, one step a round): Node's connection (its Socket, TCP handle and HTTP parser),
// the IncomingMessage, the ServerResponse, the decoded request (the object with `toolCallIdPrefix`: the canonical
// request), the forest's new Observation, and the request's Effect fiber (its stack: generators, closures, contexts);
// the rest is "other". Prints objects and bytes a unit per holder, then the kinds in each. docs/performance.md,
// section 3 ("Issue 41, fourth pass"), is read from its output.
import { readDiff } from "./snapshotDiff.mjs"

const d = readDiff("heldRequest.mjs")
const { nodes, edges, strings } = d
const type = (n) => d.nodeTypes[nodes[n * d.width + d.TYPE]]
const name = (n) => strings[nodes[n * d.width + d.NAME]]
const isNew = new Uint8Array(d.count)
for (let n = 0; n < d.count; n++) isNew[n] = d.before.has(nodes[n * d.width + d.ID]) ? 0 : 1
const hasKey = (n, key) => {
  for (let e = d.firstEdge[n]; e < d.firstEdge[n + 1]; e += d.edgeWidth) {
    if (d.edgeTypes[edges[e]] === "property" && strings[edges[e + 1]] === key) return true
  }
  return false
}

const holders = [
  "Node's connection (Socket, TCP, HTTP parser)",
  "IncomingMessage",
  "ServerResponse",
  "the decoded request",
  "the forest's Observation",
  "the Effect fiber",
  "other"
]
const holderOf = (n) => {
  if (type(n) !== "object") return -1
  switch (name(n)) {
    case "Socket":
    case "TCP":
    case "HTTPParser":
      return 0
    case "IncomingMessage":
      return 1
    case "ServerResponse":
      return 2
    case "Object":
      return hasKey(n, "toolCallIdPrefix") ? 3 : -1
    case "Observation":
      return 4
    case "FiberImpl":
      return 5
    default:
      return -1
  }
}
const holder = new Int8Array(d.count).fill(-1)
let frontier = []
for (let n = 0; n < d.count; n++) {
  if (!isNew[n]) continue
  holder[n] = holderOf(n)
  if (holder[n] >= 0) frontier.push(n)
}
// One step a round, the holders in this order within a round (the request before the fiber that reaches it).
const order = [3, 4, 1, 2, 0, 5]
while (frontier.length > 0) {
  const next = []
  for (const h of order) {
    for (const n of frontier) {
      if (holder[n] !== h) continue
      for (let e = d.firstEdge[n]; e < d.firstEdge[n + 1]; e += d.edgeWidth) {
        if (d.edgeTypes[edges[e]] === "weak") continue
        const to = edges[e + 2] / d.width
        if (!isNew[to] || holder[to] >= 0) continue
        holder[to] = h
        next.push(to)
      }
    }
  }
  frontier = next
}

const totals = holders.map(() => ({ objects: 0, bytes: 0, kinds: new Map() }))
for (let n = 0; n < d.count; n++) {
  if (!isNew[n]) continue
  const t = totals[holder[n] < 0 ? holders.length - 1 : holder[n]]
  const size = nodes[n * d.width + d.SIZE]
  t.objects++
  t.bytes += size
  const kind = `${type(n)}: ${String(name(n)).slice(0, 40)}`
  const k = t.kinds.get(kind) ?? { objects: 0, bytes: 0 }
  k.objects++
  k.bytes += size
  t.kinds.set(kind, k)
}
const row = (objects, bytes, label) =>
  console.log(`${(objects / d.units).toFixed(1).padStart(8)} ${(bytes / d.units).toFixed(0).padStart(8)}  ${label}`)
console.log(`${"objects".padStart(8)} ${"bytes".padStart(8)}  a unit, by holder (${d.units} units)`)
for (let h = 0; h < holders.length; h++) row(totals[h].objects, totals[h].bytes, holders[h])
row(
  totals.reduce((sum, t) => sum + t.objects, 0),
  totals.reduce((sum, t) => sum + t.bytes, 0),
  "all"
)
for (let h = 0; h < holders.length; h++) {
  console.log(`\n${holders[h]}`)
  const kinds = [...totals[h].kinds].filter(([, k]) => k.objects >= d.units / 2).sort((a, b) => b[1].bytes - a[1].bytes)
  for (const [kind, k] of kinds.slice(0, 12)) row(k.objects, k.bytes, kind)
}
