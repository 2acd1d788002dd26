/**
 * Reading dumps for `replay` (src/replay/Recorded.ts): a last line cut mid-record names its Session as unreadable; a
 * line that is not JSON before the last is not a dump (an error naming the file and line), not a truncation.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Recorded from "../../src/replay/Recorded.ts"

describe("Recorded.readFile", () => {
  it("a file cut in its last line: that line's Session is named, nothing is refused", () => {
    const read = Recorded.readFile("cut.jsonl", "{\"session_id\":\"abc\",\"state_hashes\":[{\"ha")
    assert.notInstanceOf(read, Recorded.ReplayFormatError)
    if (read instanceof Recorded.ReplayFormatError) return
    assert.deepStrictEqual(read.sessions, [])
    assert.deepStrictEqual(read.unreadable.map((u) => [u.sessionId, u.line]), [["abc", 1]])
  })

  it("a line that is not JSON before the last: not a debug dump, named by file and line", () => {
    const read = Recorded.readFile("notes.jsonl", "garbage\n{\"a\":1}\n")
    assert.instanceOf(read, Recorded.ReplayFormatError)
    if (!(read instanceof Recorded.ReplayFormatError)) return
    assert.strictEqual(read.reason, "not-a-record")
    assert.match(read.message, /^notes\.jsonl:1: not a debug-dump record \(the line is not JSON\)/)
  })
})
