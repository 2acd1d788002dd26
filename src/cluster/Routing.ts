/**
 * Which Group entity a Session belongs to, read from the Session id alone, so any runner can forward an agent's
 * request to the runner that owns the Session (docs/scale-out.md "One address for agents").
 *
 * **Details**
 * In cluster mode a Session id is `<group key>.<32 hex>`: the group key (16 hex characters of SHA-256 over the
 * controller's run id and the Group id) is the entity id of the Group, whose shard decides its runner; the 128 random
 * bits after the dot keep the id as unguessable as a single-process Session id. The run id keeps the Groups of two
 * controller runs (whose Group ids repeat: `train:prepare_group_0`) apart.
 */
import { createHash } from "node:crypto"

const keyLength = 16

/** The entity id of a Group: 16 hex characters of SHA-256(`runId`, `groupId`). */
export const groupKey = (runId: string, groupId: string): string =>
  createHash("sha256").update(runId).update("\u0000").update(groupId).digest("hex").slice(0, keyLength)

/** A Session id that names its Group: `<group key>.<random hex>`. */
export const sessionId = (key: string, randomHex: string): string => `${key}.${randomHex}`

const shape = /^[0-9a-f]{16}\.[0-9a-f]{32}$/

/** The Group key of a cluster Session id, or `undefined` when the id is not one (a malformed or foreign bearer). */
export const groupKeyOf = (session: string): string | undefined =>
  shape.test(session) ? session.slice(0, keyLength) : undefined
