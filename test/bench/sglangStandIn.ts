/**
 * A fast SGLang stand-in (a child process, see child.ts): `POST /generate` parses the body like a server must and
 * answers a fixed 2-token output with logprobs at once; `GET /health` and `POST /abort_request` answer 200.
 * The parent sends `{ outputIds }` and gets `{ url }` back once it listens on 127.0.0.1 (port 0).
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as Child from "./child.ts"

Child.serve(async (message) => {
  // Decoding boundary: the parent sends the ids to answer.
  const { outputIds } = message as { readonly outputIds: ReadonlyArray<number> }
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      if (req.url !== "/generate") {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(req.url === "/health" ? "{}" : "")
        return
      }
      // Decoding boundary: an SGLang /generate body.
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        readonly rid: string
        readonly input_ids: ReadonlyArray<number>
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        text: "",
        output_ids: outputIds,
        meta_info: {
          id: body.rid,
          finish_reason: { type: "stop", matched: outputIds[outputIds.length - 1] ?? 0 },
          prompt_tokens: body.input_ids.length,
          completion_tokens: outputIds.length,
          cached_tokens: 0,
          weight_version: "0",
          e2e_latency: 0,
          output_token_logprobs: outputIds.map((id) => [-0.5, id, null])
        }
      }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
})
