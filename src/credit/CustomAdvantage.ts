/**
 * Custom advantage for multi-agent credit: the hook's input, and the checks on what it returns.
 */
import { Result } from "effect"
import type { Schema } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as Json from "../json/Json.ts"
import * as CreditError from "./CreditError.ts"
import * as Group from "./Group.ts"
import * as Reward from "./Reward.ts"

/** One Session's hook input: export name (`"null"` for an implicit export) → that export's final metadata. */
export type SessionMetadata = Record<string, Record<string, Schema.Json>>

/**
 * The hook input: one mapping per Session in Group order, export name → a deep copy of that export's metadata.
 *
 * **Details**
 * Copies, so a hook that mutates its input cannot change the samples that go to training.
 */
export const hookInput = (group: Group.Group): Array<SessionMetadata> =>
  group.sessions.map((session) => {
    const mapping: SessionMetadata = {}
    for (const sample of session.exports) {
      mapping[Group.contextKey(sample.export_name)] = structuredClone(sample.metadata)
    }
    return mapping
  })

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/**
 * The advantage of one context from the hook's value for it.
 *
 * **Details**
 * A finite number is the scalar credit of the whole context. A list gives one finite number per assistant turn
 * (response node) of the context, in order; it is expanded to one value per continuation token, each turn's value over
 * its `[start, end)` span and 0 on observation tokens.
 */
export const expand = (
  value: unknown,
  sample: TrainingSample.TrainingSample
): Result.Result<TrainingSample.Advantage, string> => {
  if (isFiniteNumber(value)) return Result.succeed(value)
  if (typeof value === "number") {
    return Result.fail(`the value is ${value}; every advantage must be a finite number (NaN and Infinity are rejected)`)
  }
  if (Array.isArray(value)) {
    const turns = sample.turn_spans.length
    if (value.length !== turns) {
      return Result.fail(
        `the list has ${value.length} values but the context has ${turns} assistant turn${turns === 1 ? "" : "s"}; ` +
          `a per-turn list needs exactly one value per assistant turn`
      )
    }
    const items: ReadonlyArray<unknown> = value
    const perTurn: Array<number> = []
    for (const [turn, item] of items.entries()) {
      if (!isFiniteNumber(item)) {
        return Result.fail(`the value for turn ${turn} is ${Reward.describe(item)}, not a finite number`)
      }
      perTurn.push(item)
    }
    const perToken = new Array<number>(sample.response_length).fill(0)
    sample.turn_spans.forEach(([start, end], turn) => {
      for (let position = start; position < end; position++) perToken[position] = perTurn[turn] ?? 0
    })
    return Result.succeed(perToken)
  }
  return Result.fail(
    `the value is ${
      Reward.describe(value)
    }; it must be a finite number or a list with one finite number per assistant turn`
  )
}

/**
 * Apply a hook result to a Group: the Group with every sample's `advantage` set, or `"filtered"`.
 *
 * **Details**
 * `null` / `undefined` filters the whole Group. Otherwise the result must be a list with one mapping per Session in
 * Group order, each mapping must hold every export name of its Session (extra names are ignored, as in the reference),
 * and each value must pass {@link expand}. Errors name the Session index and the context.
 */
export const apply = (
  result: unknown,
  group: Group.Group
): Result.Result<Group.Group | "filtered", CreditError.AdvantageError> => {
  if (result === null || result === undefined) return Result.succeed("filtered")
  const groupIndex = group.groupIndex
  const sessions = group.sessions.length
  if (!Array.isArray(result)) {
    return Result.fail(
      new CreditError.AdvantageError({
        groupIndex,
        detail: `the hook returned ${Reward.describe(result)}; it must return a list with one mapping per Session ` +
          `(${sessions} here), or null to filter the Group`
      })
    )
  }
  if (result.length !== sessions) {
    return Result.fail(
      new CreditError.AdvantageError({
        groupIndex,
        detail: `the hook returned ${result.length} mapping${result.length === 1 ? "" : "s"} for ${sessions} ` +
          `Session${sessions === 1 ? "" : "s"}; item i must be the mapping of input Session i, in the same order`
      })
    )
  }
  const scored: Array<TrainingSample.TrainingSample> = []
  for (const [sessionIndex, session] of group.sessions.entries()) {
    const mapping: unknown = result[sessionIndex]
    // The item of this Session (and of one of its contexts) is wrong: name where, and say what.
    const refuse = (detail: string, exportName?: string | null) =>
      Result.fail(
        new CreditError.AdvantageError({
          groupIndex,
          sessionIndex,
          sessionId: session.sessionId,
          ...(exportName === undefined ? {} : { exportName }),
          detail
        })
      )
    if (!Json.isObject(mapping)) {
      return refuse(`the item is ${Reward.describe(mapping)}; it must be a mapping from export name to advantage`)
    }
    for (const sample of session.exports) {
      const key = Group.contextKey(sample.export_name)
      if (!Object.hasOwn(mapping, key)) {
        const returned = Object.keys(mapping)
        return refuse(
          `the mapping has no value for this context (keys returned: ` +
            `${returned.length === 0 ? "none" : returned.map((name) => JSON.stringify(name)).join(", ")}); ` +
            `every exported name needs one value` +
            (sample.export_name === null ? ` (an implicit export's key is "null")` : ""),
          sample.export_name
        )
      }
      const advantage = expand(mapping[key], sample)
      if (Result.isFailure(advantage)) return refuse(advantage.failure, sample.export_name)
      scored.push({ ...sample, advantage: advantage.success })
    }
  }
  return Result.succeed(Group.withRows(group, scored))
}
