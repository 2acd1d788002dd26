/** Group keys and Session ids in cluster mode (src/cluster/Routing.ts). */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EntityId, ShardId, Sharding, TestRunner } from "effect/cluster"
import { createHash } from "node:crypto"
import * as Routing from "../../src/cluster/Routing.ts"

describe("Routing", () => {
  it("names a Session's Group and holding runner in its id", () => {
    const key = Routing.groupKey("run", "train:prepare_group_0")
    assert.match(key, /^[0-9a-f]{16}$/)
    // SHA-256 over the run id, a NUL and the Group id (the keys of every controller version agree).
    const digest = createHash("sha256").update("run").update("\u0000").update("train:prepare_group_0").digest("hex")
    assert.strictEqual(key, digest.slice(0, 16))
    assert.strictEqual(
      Routing.groupKey("rün", "g"),
      createHash("sha256").update("rün\u0000g").digest("hex").slice(0, 16)
    )
    const session = Routing.sessionId(key, "0123456789abcdef", "0".repeat(32))
    assert.strictEqual(Routing.groupKeyOf(session), key)
    assert.strictEqual(Routing.holderOf(session), "0123456789abcdef")
    assert.isUndefined(Routing.groupKeyOf(`${key}.xyz`))
    assert.isUndefined(Routing.holderOf(`${key}.${"0".repeat(32)}`))
  })

  it.effect("gives a Group one candidate key per shard of the cluster, its plain key first, then repeats them", () =>
    Effect.gen(function*() {
      // The cluster's own shard function (TestRunner: 300 shards), as the controller asks it.
      const sharding = yield* Sharding.Sharding
      const shardOf = (key: string) => ShardId.toString(sharding.getShardId(EntityId.make(key), "default"))
      const shards = 300
      const candidate = Routing.candidateKeys("run", "train:prepare_group_3", shards, shardOf)
      const keys = Array.from({ length: shards }, (_, attempt) => candidate(attempt))
      assert.strictEqual(keys[0], Routing.groupKey("run", "train:prepare_group_3"))
      assert.strictEqual(new Set(keys.map(shardOf)).size, shards, "every shard, so every runner, is reached")
      assert.strictEqual(candidate(shards), keys[0])
      assert.strictEqual(candidate(shards + 7), keys[7])
    }).pipe(Effect.provide(TestRunner.layer)))

  it("stops searching at maxSalts and cycles through the keys it found", () => {
    // Two shards only ever come out: a third is never found, the search stops, and the keys repeat.
    const shardOf = (key: string) => String(Number.parseInt(key.slice(-1), 16) % 2)
    const candidate = Routing.candidateKeys("run", "g", 3, shardOf, 50)
    const keys = Array.from({ length: 6 }, (_, attempt) => candidate(attempt))
    assert.strictEqual(new Set(keys).size, 2)
    assert.deepStrictEqual(keys.slice(2), [...keys.slice(0, 2), ...keys.slice(0, 2)])
  })
})
