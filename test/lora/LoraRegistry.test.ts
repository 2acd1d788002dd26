import { assert, describe, it } from "@effect/vitest"
import * as LoraRegistry from "../../src/lora/LoraRegistry.ts"

const d1 = "1111111111111111aaaa"
const d2 = "2222222222222222bbbb"
const d3 = "3333333333333333cccc"
const fleet = ["http://w0", "http://w1"]

const make = (capacity?: number) => new LoraRegistry.Registry({ epoch: "0123456789ab", capacity })

const ok = <A>(value: A | LoraRegistry.LoraRegistryError): A => {
  if (value instanceof LoraRegistry.LoraRegistryError) throw new Error(`refused: ${value.reason}: ${value.detail}`)
  return value
}

/** Publish `digest`, load it on every worker of `fleet`, commit it. */
const publishAll = (registry: LoraRegistry.Registry, digest: string): LoraRegistry.Version => {
  const publication = ok(registry.publish(digest))
  assert.strictEqual(publication._tag, "Loading")
  const { id, attempt } = publication.version
  for (const worker of fleet) ok(registry.loaded(id, attempt, worker))
  return ok(registry.commit(id, attempt, fleet))
}

/** A summary of the registry a row's expectation is written in. */
const summary = (registry: LoraRegistry.Registry) => ({
  default: registry.default?.id,
  states: Object.fromEntries(registry.all().map((v) => [v.id, v.state]))
})

interface Row {
  readonly name: string
  /** Brings the registry to the state the row starts from. */
  readonly given: (registry: LoraRegistry.Registry) => void
  /** The operation; a refusal is returned as its error. */
  readonly when: (registry: LoraRegistry.Registry) => unknown
  /** The refusal's reason, or undefined when the operation succeeds. */
  readonly refused?: LoraRegistry.LoraRegistryReason
  /** The registry after the operation. */
  readonly after: ReturnType<typeof summary>
}

const nothing = () => {}
const oneDefault = (r: LoraRegistry.Registry) => void publishAll(r, d1)
const twoVersions = (r: LoraRegistry.Registry) => {
  publishAll(r, d1)
  ok(r.bind("s1"))
  publishAll(r, d2)
}

/** Version 1 retired and unheld, its unload not confirmed by every worker. */
const unconfirmedOne = (r: LoraRegistry.Registry) => {
  twoVersions(r)
  r.release("s1")
  r.claimReclaimable()
  ok(r.reclaimUnconfirmed(1))
}

// Every transition and refusal of the reference's table (relax-admission-and-lora.md §2.2 and §2.5), one row each.
const rows: ReadonlyArray<Row> = [
  {
    name: "publish: a new digest is LOADING at attempt 1",
    given: nothing,
    when: (r) => r.publish(d1),
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "publish: a version id that is not a positive integer is refused",
    given: nothing,
    when: (r) => r.publish(d1, 0),
    refused: "invalid-version",
    after: { default: undefined, states: {} }
  },
  {
    name: "publish: a digest that is not hex is refused",
    given: nothing,
    when: (r) => r.publish("not-a-digest"),
    refused: "invalid-digest",
    after: { default: undefined, states: {} }
  },
  {
    name: "publish: an existing id with other content is a version conflict, nothing changes",
    given: oneDefault,
    when: (r) => r.publish(d2, 1),
    refused: "version-conflict",
    after: { default: 1, states: { 1: "published" } }
  },
  {
    name: "publish: the same content again is a no-op (the default stays)",
    given: (r) => {
      publishAll(r, d1)
      publishAll(r, d2)
    },
    when: (r) => r.publish(d1),
    after: { default: 2, states: { 1: "retired", 2: "published" } }
  },
  {
    name: "publish: a LOADING digest again returns the same attempt",
    given: (r) => void r.publish(d1),
    when: (r) => {
      const again = ok(r.publish(d1))
      assert.strictEqual(again.version.attempt, 1)
    },
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "publish: a failed version is retried as LOADING with the next attempt",
    given: (r) => void ok(r.failed(ok(r.publish(d1)).version.id, 1)),
    when: (r) => assert.strictEqual(ok(r.publish(d1)).version.attempt, 2),
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "publish: another version LOADING is a publication in progress",
    given: (r) => void r.publish(d1),
    when: (r) => r.publish(d2),
    refused: "publication-in-progress",
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "publish: a third version at capacity 2 is refused",
    given: twoVersions,
    when: (r) => r.publish(d3),
    refused: "capacity",
    after: { default: 2, states: { 1: "retired", 2: "published" } }
  },
  {
    name: "publish: a fatal failure blocks every later publication",
    given: (r) => void ok(r.fatal(ok(r.publish(d1)).version.id)),
    when: (r) => r.publish(d2),
    refused: "publication-blocked",
    after: { default: undefined, states: { 1: "fatal" } }
  },
  {
    name: "loaded: a stale attempt is refused",
    given: (r) => {
      ok(r.failed(ok(r.publish(d1)).version.id, 1))
      ok(r.publish(d1))
    },
    when: (r) => r.loaded(1, 1, "http://w0"),
    refused: "attempt-conflict",
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "commit: every worker loaded → PUBLISHED and the default",
    given: (r) => {
      ok(r.publish(d1))
      for (const w of fleet) ok(r.loaded(1, 1, w))
    },
    when: (r) => r.commit(1, 1, fleet),
    after: { default: 1, states: { 1: "published" } }
  },
  {
    name: "commit: the old default is retired, not unloaded",
    given: oneDefault,
    when: (r) => publishAll(r, d2),
    after: { default: 2, states: { 1: "retired", 2: "published" } }
  },
  {
    name: "commit: a worker that has not loaded it is not ready",
    given: (r) => {
      ok(r.publish(d1))
      ok(r.loaded(1, 1, "http://w0"))
    },
    when: (r) => r.commit(1, 1, fleet),
    refused: "not-ready",
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "commit: a worker added to the fleet since the load is not ready",
    given: (r) => {
      ok(r.publish(d1))
      for (const w of fleet) ok(r.loaded(1, 1, w))
    },
    when: (r) => r.commit(1, 1, [...fleet, "http://w2"]),
    refused: "not-ready",
    after: { default: undefined, states: { 1: "loading" } }
  },
  {
    name: "commit: a late commit of an earlier attempt never changes the default",
    given: (r) => {
      publishAll(r, d1)
      ok(r.publish(d2))
      for (const w of fleet) ok(r.loaded(2, 1, w))
      ok(r.failed(2, 1))
      ok(r.publish(d2))
    },
    when: (r) => r.commit(2, 1, fleet),
    refused: "attempt-conflict",
    after: { default: 1, states: { 1: "published", 2: "loading" } }
  },
  {
    name: "commit: a version already committed is returned unchanged",
    given: oneDefault,
    when: (r) => assert.strictEqual(ok(r.commit(1, 1, fleet)).state, "published"),
    after: { default: 1, states: { 1: "published" } }
  },
  {
    name: "failed: a clean failure frees the slot (retryable)",
    given: (r) => void r.publish(d1),
    when: (r) => r.failed(1, 1),
    after: { default: undefined, states: { 1: "failed" } }
  },
  {
    name: "bind: before any publication there is no version (no fallback to the base model)",
    given: nothing,
    when: (r) => r.bind("s1"),
    refused: "no-published-version",
    after: { default: undefined, states: {} }
  },
  {
    name: "bind: a Session closed before its first bind never binds later (tombstone)",
    given: (r) => {
      publishAll(r, d1)
      assert.isFalse(r.release("s1"))
    },
    when: (r) => r.bind("s1"),
    refused: "session-closed",
    after: { default: 1, states: { 1: "published" } }
  },
  {
    name: "bind: sticky — a bound Session keeps its version after a new default",
    given: twoVersions,
    when: (r) => assert.strictEqual(ok(r.bind("s1")).id, 1),
    after: { default: 2, states: { 1: "retired", 2: "published" } }
  },
  {
    name: "claimReclaimable: a retired version still held is not handed out",
    given: twoVersions,
    when: (r) => assert.isUndefined(r.claimReclaimable()),
    after: { default: 2, states: { 1: "retired", 2: "published" } }
  },
  {
    name: "claimReclaimable: a retired version nobody holds is RECLAIMING, handed out once",
    given: (r) => {
      twoVersions(r)
      assert.isTrue(r.release("s1"))
    },
    when: (r) => {
      assert.strictEqual(r.claimReclaimable()?.id, 1)
      assert.isUndefined(r.claimReclaimable())
    },
    after: { default: 2, states: { 1: "reclaiming", 2: "published" } }
  },
  {
    name: "reclaimed: RECLAIMED frees the slot, and a third version fits",
    given: (r) => {
      twoVersions(r)
      r.release("s1")
      r.claimReclaimable()
      ok(r.reclaimed(1))
    },
    when: (r) => publishAll(r, d3),
    after: { default: 3, states: { 1: "reclaimed", 2: "retired", 3: "published" } }
  },
  {
    name: "reclaimUnconfirmed: the slot stays counted",
    given: unconfirmedOne,
    when: (r) => r.publish(d3),
    refused: "capacity",
    after: { default: 2, states: { 1: "unconfirmed", 2: "published" } }
  },
  {
    name: "reclaimed: a late confirmation of an unconfirmed unload is refused until it is claimed again",
    given: unconfirmedOne,
    when: (r) => r.reclaimed(1),
    refused: "reclaim-ambiguous",
    after: { default: 2, states: { 1: "unconfirmed", 2: "published" } }
  },
  {
    name: "claimReclaimable: an unconfirmed unload is tried again",
    given: unconfirmedOne,
    when: (r) => {
      assert.strictEqual(r.claimReclaimable()?.id, 1)
      ok(r.reclaimed(1))
      ok(r.reclaimed(1))
    },
    after: { default: 2, states: { 1: "reclaimed", 2: "published" } }
  },
  {
    name: "forget: a Session still bound refuses the whole call",
    given: (r) => {
      publishAll(r, d1)
      ok(r.bind("s1"))
      r.release("s2")
    },
    when: (r) => r.forget(["s2", "s1"]),
    refused: "session-still-bound",
    after: { default: 1, states: { 1: "published" } }
  }
]

describe("LoRA version registry (every transition and refusal)", () => {
  for (const row of rows) {
    it(row.name, () => {
      const registry = make()
      row.given(registry)
      const result = row.when(registry)
      if (row.refused === undefined) {
        assert.notInstanceOf(result, LoraRegistry.LoraRegistryError, String(result))
      } else {
        assert.instanceOf(result, LoraRegistry.LoraRegistryError)
        assert.strictEqual((result as LoraRegistry.LoraRegistryError).reason, row.refused)
      }
      assert.deepStrictEqual(summary(registry), row.after)
    })
  }

  it("names are <prefix>@<epoch>-<version>-<digest16>, unique per run", () => {
    const a = new LoraRegistry.Registry({ epoch: "aaaaaaaaaaaa" })
    const b = new LoraRegistry.Registry({ epoch: "bbbbbbbbbbbb" })
    const va = publishAll(a, d1)
    const vb = publishAll(b, d1)
    assert.strictEqual(va.name, "relax_policy_lora@aaaaaaaaaaaa-1-1111111111111111")
    assert.notStrictEqual(va.name, vb.name)
  })

  it("a capacity refusal names the Sessions that hold the old version", () => {
    const registry = make()
    twoVersions(registry)
    ok(registry.bind("s2"))
    const refused = registry.publish(d3)
    assert.instanceOf(refused, LoraRegistry.LoraRegistryError)
    const error = refused as LoraRegistry.LoraRegistryError
    assert.deepStrictEqual(error.holders, ["s1"])
    assert.include(error.detail, "s1")
    assert.notInclude(error.detail, "s2")
  })

  it("forget drops tombstones: a forgotten Session may bind again; unknown and repeated ids are ignored", () => {
    const registry = make()
    publishAll(registry, d1)
    registry.release("s1")
    assert.isUndefined(registry.forget(["s1", "s1", "nobody"]))
    assert.strictEqual(ok(registry.bind("s1")).id, 1)
  })

  it("a larger capacity keeps more versions live; the lowest unheld retired version is reclaimed first", () => {
    const registry = make(3)
    publishAll(registry, d1)
    publishAll(registry, d2)
    publishAll(registry, d3)
    assert.deepStrictEqual(registry.live().map((v) => v.id), [1, 2, 3])
    assert.strictEqual(registry.claimReclaimable()?.id, 1)
    assert.strictEqual(registry.claimReclaimable()?.id, 2)
  })
})
