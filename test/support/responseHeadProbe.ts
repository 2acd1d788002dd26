// `node test/support/responseHeadProbe.ts [responses] [streaming|json]`: holds that many answers open on a loopback
// server, their heads written by NodeExchange.writeHead (streaming or not) and one frame sent, and prints as JSON the
// most V8 string pieces (concatenated strings) one held response's head keeps, read from a heap snapshot of this
// process. The NodeExchange head test's child process: a vitest worker's heap is too large to snapshot in a test.
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { getHeapSnapshot } from "node:v8"
import * as Exchange from "../../layers/gateway/NodeExchange.ts"
import * as Sse from "../../src/protocol/Sse.ts"

const responses = Number(process.argv[2] ?? 20)
const streaming = process.argv[3] !== "json"

interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: ReadonlyArray<string>
      readonly node_types: readonly [ReadonlyArray<string>]
      readonly edge_fields: ReadonlyArray<string>
      readonly edge_types: readonly [ReadonlyArray<string>]
    }
  }
  readonly nodes: ReadonlyArray<number>
  readonly edges: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

const snapshot = async (): Promise<Snapshot> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of getHeapSnapshot()) chunks.push(chunk as Buffer)
  // Decoding boundary: V8's heap snapshot format.
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as Snapshot
}

/** Per ServerResponse in the heap: the concatenated strings reachable from its `_header` (0 or 1 when flat). */
const headPieces = (s: Snapshot): Array<number> => {
  const { meta } = s.snapshot
  const width = meta.node_fields.length
  const edgeWidth = meta.edge_fields.length
  const type = meta.node_fields.indexOf("type")
  const name = meta.node_fields.indexOf("name")
  const edgeCount = meta.node_fields.indexOf("edge_count")
  const edgeType = meta.edge_fields.indexOf("type")
  const edgeName = meta.edge_fields.indexOf("name_or_index")
  const toNode = meta.edge_fields.indexOf("to_node")
  const nodeType = (node: number) => meta.node_types[0][s.nodes[node + type]!]
  const firstEdge: Array<number> = []
  for (let node = 0, edge = 0; node < s.nodes.length; node += width) {
    firstEdge.push(edge)
    edge += s.nodes[node + edgeCount]! * edgeWidth
  }
  const edgesOf = function*(node: number) {
    const start = firstEdge[node / width]!
    for (let edge = start; edge < start + s.nodes[node + edgeCount]! * edgeWidth; edge += edgeWidth) {
      yield {
        kind: meta.edge_types[0][s.edges[edge + edgeType]!],
        name: s.edges[edge + edgeName]!,
        to: s.edges[edge + toNode]!
      }
    }
  }
  const pieces = (node: number): number => {
    if (nodeType(node) !== "concatenated string") return 0
    let count = 1
    for (const edge of edgesOf(node)) if (edge.kind === "internal") count += pieces(edge.to)
    return count
  }
  const found: Array<number> = []
  for (let node = 0; node < s.nodes.length; node += width) {
    if (nodeType(node) !== "object" || s.strings[s.nodes[node + name]!] !== "ServerResponse") continue
    for (const edge of edgesOf(node)) {
      if (edge.kind === "property" && s.strings[edge.name] === "_header") found.push(pieces(edge.to))
    }
  }
  return found
}

const held: Array<http.ServerResponse> = []
const server = http.createServer((request, response) => {
  const ex = Exchange.exchange(request, response, false)
  Exchange.writeHead(ex, 200, streaming ? Sse.headers : { "content-type": "application/json" }, streaming)
  response.write(": connected\n\n")
  held.push(response)
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const { port } = server.address() as AddressInfo
const answered = Array.from({ length: responses }, () =>
  new Promise<void>((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path: "/", agent: false }, (response) => {
      response.once("data", () => resolve())
    }).on("error", reject)
  }))
await Promise.all(answered)
const pieces = headPieces(await snapshot())
for (const response of held) response.end()
server.close()
process.stdout.write(`${JSON.stringify({ responses: pieces.length, mostPieces: Math.max(...pieces) })}\n`)
process.exit(0)
