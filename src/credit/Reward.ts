/**
 * Standard reward: reading the primary value of a reward, and checking what a custom RM returns.
 */
import { Result, Schema } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"

/** A reward that is present (not null). */
export type PresentReward = Exclude<TrainingSample.Reward, null>

/** A hook's return value as an error message shows it. */
export const describe = (value: unknown): string => {
  if (value === undefined) return "undefined"
  if (typeof value === "number") return String(value)
  if (typeof value === "function") return "a function"
  try {
    return JSON.stringify(value)
  } catch {
    return `a ${typeof value}`
  }
}

/**
 * The primary value of a reward: the number itself, or the object's `rewardKey` field.
 *
 * **Details**
 * Fails with a reason (to be placed by the caller) when the number is not finite, an object reward has no
 * `--reward-key`, the key is missing (naming the keys present), or the selected value is not a finite number.
 * Non-finite rewards are rejected here, unlike the reference, because they silently poison a whole Group's GRPO
 * statistics.
 */
export const primaryValue = (reward: PresentReward, rewardKey: string | undefined): Result.Result<number, string> => {
  if (typeof reward === "number") {
    return Number.isFinite(reward) ? Result.succeed(reward) : Result.fail(`reward ${reward} is not a finite number`)
  }
  const keys = Object.keys(reward)
  const present = keys.length === 0 ? "none" : keys.join(", ")
  if (rewardKey === undefined) {
    return Result.fail(
      `reward is an object (keys present: ${present}); set --reward-key to the key of the primary reward value`
    )
  }
  if (!Object.hasOwn(reward, rewardKey)) {
    return Result.fail(
      `--reward-key ${JSON.stringify(rewardKey)} is not in the reward object (keys present: ${present})`
    )
  }
  const value = reward[rewardKey]
  if (typeof value !== "number" || !Number.isFinite(value)) {
    return Result.fail(
      `reward[${JSON.stringify(rewardKey)}] (selected by --reward-key) is ${describe(value)}, not a finite number`
    )
  }
  return Result.succeed(value)
}

const RmReward = Schema.Union([Schema.Finite, Schema.Record(Schema.String, Schema.Json)])
const decodeRmReward = Schema.decodeUnknownResult(RmReward)

/**
 * Check one value a custom RM returned: a finite number or a JSON object. Fails with a reason otherwise.
 */
export const fromRm = (value: unknown): Result.Result<PresentReward, string> => {
  if (value === null || value === undefined) {
    return Result.fail(`the custom RM returned ${describe(value)}; it must return a number or a reward object`)
  }
  if (Array.isArray(value)) {
    return Result.fail(`the custom RM returned a list (${describe(value)}); it must return a number or a reward object`)
  }
  const decoded = decodeRmReward(value)
  return Result.isSuccess(decoded)
    ? Result.succeed(decoded.success)
    : Result.fail(
      `the custom RM returned ${describe(value)}; it must return a finite number or an object of JSON values`
    )
}

/**
 * Check what a Group RM returned: a list with one reward per exported row of the Group.
 */
export const fromGroupRm = (value: unknown, rows: number): Result.Result<ReadonlyArray<PresentReward>, string> => {
  if (!Array.isArray(value)) {
    return Result.fail(`the Group RM returned ${describe(value)}; it must return a list of ${rows} rewards`)
  }
  if (value.length !== rows) {
    return Result.fail(
      `the Group RM returned ${value.length} rewards for ${rows} exported rows; it must return one per row, in order`
    )
  }
  const rewards: Array<PresentReward> = []
  for (const [index, item] of value.entries()) {
    const reward = fromRm(item)
    if (Result.isFailure(reward)) return Result.fail(`row ${index}: ${reward.failure}`)
    rewards.push(reward.success)
  }
  return Result.succeed(rewards)
}
