/**
 * What a held streaming answer's head keeps (layers/gateway/NodeExchange.ts `writeHead`): one flat string, not the tree
 * of small strings Node concatenates it from, which every young-generation collection would copy while the request
 * waits for its lease. Read from a heap snapshot of a child process (test/support/responseHeadProbe.ts) holding real
 * loopback answers open; a non-streaming head, left as Node made it, shows the probe sees the pieces.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const probe = fileURLToPath(new URL("../support/responseHeadProbe.ts", import.meta.url))

const heads = (mode: "streaming" | "json"): Promise<{ readonly responses: number; readonly mostPieces: number }> =>
  new Promise((resolve, reject) => {
    execFile(process.execPath, [probe, "20", mode], (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`response head probe failed: ${error.message}\n${stderr}`))
      else resolve(JSON.parse(stdout) as { readonly responses: number; readonly mostPieces: number })
    })
  })

describe("NodeExchange.writeHead", () => {
  it("a held streaming answer keeps its head as one flat string", async () => {
    const streaming = await heads("streaming")
    assert.strictEqual(streaming.responses, 20)
    // A flattened concatenation stays one string object pointing at its flat copy.
    assert.isAtMost(streaming.mostPieces, 1)
  }, 60_000)

  it("a non-streaming head is left as Node concatenated it (the probe sees its pieces)", async () => {
    const json = await heads("json")
    assert.strictEqual(json.responses, 20)
    assert.isAbove(json.mostPieces, 4)
  }, 60_000)
})
