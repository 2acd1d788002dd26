/** Placement by room (src/cluster/Placement.ts): which runner a new Group goes to. */
import { assert, describe, it } from "@effect/vitest"
import * as Placement from "../../src/cluster/Placement.ts"

/** `name:used/free` (`free` `*` = unlimited), with a trailing `!` for a draining runner. */
const room = (spec: string): Placement.Room => {
  const [, runner, used, free, draining] = spec.match(/^(\w+):(\d+)\/(\d+|\*)(!?)$/)!
  return {
    runner: runner!,
    key: `key-${runner}`,
    used: Number(used),
    free: free === "*" ? null : Number(free),
    draining: draining === "!"
  }
}

const cases: ReadonlyArray<{
  readonly name: string
  readonly rooms: ReadonlyArray<string>
  readonly size: number
  readonly owner?: string
  readonly chosen: string | undefined
}> = [
  { name: "a fresh runner fills first", rooms: ["hot:6/2", "fresh:0/8", "mid:3/5"], size: 2, chosen: "fresh" },
  {
    name: "the fewest in use, not the shard's owner, when the owner is busier",
    rooms: ["owner:5/3", "idle:1/7"],
    size: 2,
    owner: "owner",
    chosen: "idle"
  },
  {
    name: "the shard's owner on a tie",
    rooms: ["a:4/*", "owner:4/*", "b:4/*"],
    size: 2,
    owner: "owner",
    chosen: "owner"
  },
  { name: "the first known on a tie without an owner", rooms: ["a:4/*", "b:4/*"], size: 2, chosen: "a" },
  { name: "unlimited runners: the fewest in use", rooms: ["hot:40/*", "cold:3/*"], size: 8, chosen: "cold" },
  { name: "room for the whole Group only", rooms: ["one:1/1", "busy:5/3"], size: 2, chosen: "busy" },
  { name: "exactly the Group's size fits", rooms: ["tight:6/2"], size: 2, chosen: "tight" },
  { name: "never a draining runner", rooms: ["draining:0/8!", "busy:5/3"], size: 2, chosen: "busy" },
  {
    name: "never a draining owner, unlimited or not",
    rooms: ["owner:0/*!", "b:9/*"],
    size: 1,
    owner: "owner",
    chosen: "b"
  },
  {
    name: "none with room: no choice (the hash candidates then)",
    rooms: ["full:7/1", "d:0/8!"],
    size: 2,
    chosen: undefined
  },
  { name: "no runner known yet", rooms: [], size: 2, chosen: undefined }
]

describe("Placement", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.strictEqual(Placement.choose(c.rooms.map(room), c.size, c.owner)?.runner, c.chosen)
    })
  }

  it("a placed Group counts against its runner until the runner answers again", () => {
    assert.deepStrictEqual(Placement.taken(room("r:2/4"), 2), room("r:4/2"))
    assert.deepStrictEqual(Placement.taken(room("u:0/*"), 3), room("u:3/*"))
    // Groups placed on the same fresh information spread instead of piling on the emptiest runner.
    let rooms = ["a:0/*", "b:0/*", "c:1/*"].map(room)
    const chosen: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const r = Placement.choose(rooms, 2)!
      chosen.push(r.runner)
      rooms = rooms.map((x) => (x.runner === r.runner ? Placement.taken(x, 2) : x))
    }
    assert.deepStrictEqual(chosen, ["a", "b", "c", "a", "b"])
  })
})
