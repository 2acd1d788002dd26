/**
 * Where a Session is, read from the Session id alone, so any runner can forward an agent's request to the runner that
 * holds the Session (docs/scale-out.md "One address for agents", "Placement that outlives shard moves").
 *
 * **Details**
 * In cluster mode a Session id is `<group key>.<holder>.<32 hex>`: the group key (16 hex characters of SHA-256 over
 * the controller's run id and the Group id, or a salted variant: {@link candidateKeys}) is the entity id the Group was
 * placed under; the holder is the incarnation id (16 hex) of the runner that took it, where its agents run for the
 * Group's whole life, whatever happens to the key's shard afterwards; the 128 random bits after the last dot keep the
 * id as unguessable as a single-process Session id. The run id keeps the Groups of two controller runs (whose Group ids
 * repeat: `train:prepare_group_0`) apart.
 */
import { hash } from "node:crypto"

const keyLength = 16

/**
 * The entity id of a Group: 16 hex characters of SHA-256(`runId`, `groupId`). One-shot `hash` (no `Hash` object: a
 * controller computes one a Group, ~3× cheaper than `createHash`).
 */
export const groupKey = (runId: string, groupId: string): string =>
  hash("sha256", `${runId}\u0000${groupId}`, "hex").slice(0, keyLength)

/** A Session id that names its Group and the runner holding it: `<group key>.<holder>.<random hex>`. */
export const sessionId = (key: string, holder: string, randomHex: string): string => `${key}.${holder}.${randomHex}`

const shape = /^[0-9a-f]{16}\.[0-9a-f]{16}\.[0-9a-f]{32}$/

/** The Group key of a cluster Session id, or `undefined` when the id is not one (a malformed or foreign bearer). */
export const groupKeyOf = (session: string): string | undefined =>
  shape.test(session) ? session.slice(0, keyLength) : undefined

/** The incarnation id of the runner holding a cluster Session, or `undefined` when the id is not one. */
export const holderOf = (session: string): string | undefined =>
  shape.test(session) ? session.slice(keyLength + 1, 2 * keyLength + 1) : undefined

/**
 * The candidate Group keys a Group may be placed under (docs/scale-out.md "Capacity"), one per shard, as a function
 * of the attempt's index: the plain key first (without slot limits a Group lands where its key's shard is), then
 * salted keys in salt order, each kept only when its shard (`shardOf`) is not taken yet, until every one of `shards`
 * shards has a key; past the last the keys repeat. Asked in that order, they reach every runner that owns a shard,
 * however few have room. Keys are found as they are asked for (most Groups are placed under their first); covering all
 * shards takes about `shards · ln(shards)` salts, and `maxSalts` bounds the search.
 */
export const candidateKeys = (
  runId: string,
  groupId: string,
  shards: number,
  shardOf: (key: string) => string,
  maxSalts: number = shards * 32
): (attempt: number) => string => {
  const plain = groupKey(runId, groupId)
  const keys = [plain]
  const taken = new Set([shardOf(plain)])
  let salt = 0
  const complete = () => taken.size >= shards || salt >= maxSalts
  return (attempt) => {
    while (keys.length <= attempt && !complete()) {
      salt += 1
      const key = groupKey(runId, `${groupId}\u0000${salt}`)
      const shard = shardOf(key)
      if (taken.has(shard)) continue
      taken.add(shard)
      keys.push(key)
    }
    return keys[attempt % keys.length]!
  }
}
