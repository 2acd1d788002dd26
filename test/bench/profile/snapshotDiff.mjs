// Two heap snapshots read for a diff (heapDiff.mjs, heldRequest.mjs): the command line `before.heapsnapshot
// after.heapsnapshot [units]`, the ids of the first snapshot's objects, and the second snapshot's nodes and edges with
// their field offsets and where each node's edges start.
import { readFileSync } from "node:fs"

const load = (file) => JSON.parse(readFileSync(file, "utf8"))

export const readDiff = (script) => {
  const [beforeFile, afterFile, unitsArg] = process.argv.slice(2)
  if (beforeFile === undefined || afterFile === undefined) {
    console.error(`usage: ${script} before.heapsnapshot after.heapsnapshot [units]`)
    process.exit(2)
  }
  const before = new Set()
  {
    const s = load(beforeFile)
    const width = s.snapshot.meta.node_fields.length
    const id = s.snapshot.meta.node_fields.indexOf("id")
    for (let i = 0; i < s.nodes.length; i += width) before.add(s.nodes[i + id])
  }
  const s = load(afterFile)
  const meta = s.snapshot.meta
  const width = meta.node_fields.length
  const field = (name) => meta.node_fields.indexOf(name)
  const [TYPE, NAME, ID, SIZE, EDGES] = ["type", "name", "id", "self_size", "edge_count"].map(field)
  const edgeWidth = meta.edge_fields.length
  const { nodes, edges, strings } = s
  const count = nodes.length / width
  const firstEdge = new Uint32Array(count + 1)
  for (let n = 0, e = 0; n < count; n++) {
    firstEdge[n] = e
    e += nodes[n * width + EDGES] * edgeWidth
  }
  firstEdge[count] = edges.length
  return {
    units: Number(unitsArg ?? 1),
    before,
    width,
    TYPE,
    NAME,
    ID,
    SIZE,
    EDGES,
    edgeWidth,
    nodeTypes: meta.node_types[0],
    edgeTypes: meta.edge_types[0],
    nodes,
    edges,
    strings,
    count,
    firstEdge
  }
}
