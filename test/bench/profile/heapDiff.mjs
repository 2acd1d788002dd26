// What a heap grew by between two snapshots, per unit: `node test/bench/profile/heapDiff.mjs before.heapsnapshot
// after.heapsnapshot [units]` (units: the number of Sessions measured, default 1). Prints the bytes of the objects in
// the second snapshot and not in the first, grouped by kind: typed-array data and strings by what holds them (the
// retaining path), plain objects by their keys, everything else by V8's type and name. docs/performance.md, section 3 ("Where a
// Session's bytes are"), is read from its output over `test/support/sessionMemoryProbe.ts`'s snapshots.
import { readDiff } from "./snapshotDiff.mjs"

const d = readDiff("heapDiff.mjs")
const { units, before, width, TYPE, NAME, ID, SIZE, EDGES } = d
const { edgeWidth, nodeTypes, edgeTypes, nodes, edges, strings, count, firstEdge } = d
const retainer = new Int32Array(count).fill(-1)
const retainingEdge = new Int32Array(count).fill(-1)
for (let n = 0; n < count; n++) {
  for (let k = 0, e = firstEdge[n]; k < nodes[n * width + EDGES]; k++, e += edgeWidth) {
    const to = edges[e + 2] / width
    if (retainer[to] === -1 && edgeTypes[edges[e]] !== "weak") {
      retainer[to] = n
      retainingEdge[to] = e
    }
  }
}
const type = (n) => nodeTypes[nodes[n * width + TYPE]]
const name = (n) => strings[nodes[n * width + NAME]]
const edgeName = (e) => {
  const t = edgeTypes[edges[e]]
  return t === "element" || t === "hidden" ? "[]" : strings[edges[e + 1]]
}
const path = (n, depth) => {
  const out = []
  for (let d = 0; d < depth && retainer[n] !== -1; d++) {
    out.push(`${edgeName(retainingEdge[n])} of ${name(retainer[n]).slice(0, 24)}`)
    n = retainer[n]
  }
  return out.join(" ← ")
}
const keys = (n) => {
  const out = []
  for (let k = 0, e = firstEdge[n]; k < nodes[n * width + EDGES]; k++, e += edgeWidth) {
    if (edgeTypes[edges[e]] === "property" && strings[edges[e + 1]] !== "__proto__") out.push(strings[edges[e + 1]])
  }
  return out.join(",")
}

const groups = new Map()
let total = 0
for (let n = 0; n < count; n++) {
  if (before.has(nodes[n * width + ID])) continue
  const size = nodes[n * width + SIZE]
  const t = type(n)
  const group = name(n) === "system / JSArrayBufferData"
    ? `typed-array data: ${path(n, 3)}`
    : t === "object" && name(n) === "Object"
    ? `object {${keys(n)}}`
    : t.endsWith("string")
    ? `strings: ${path(n, 1)}`
    : `${t}: ${name(n).slice(0, 40)}`
  const g = groups.get(group) ?? { objects: 0, bytes: 0 }
  g.objects++
  g.bytes += size
  groups.set(group, g)
  total += size
}
console.log(`${(total / units).toFixed(0)} bytes per unit in ${groups.size} groups (objects per unit, bytes per unit)`)
for (const [group, g] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 40)) {
  console.log(`${(g.bytes / units).toFixed(0).padStart(7)}  ${(g.objects / units).toFixed(2).padStart(6)}  ${group}`)
}
