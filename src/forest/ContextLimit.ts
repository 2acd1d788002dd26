/**
 * The context limit of a SessionForest's states (docs/sessionforest.md "Context limits and the turn budget"): an
 * observation is committed only below `maxContextLen`, and a response gets what is left of it (`null` = unlimited).
 * A state's training tokens are counted on its node (`Forest.trainTokenCount`, O(1)).
 */
import { Result } from "effect"
import * as ContextLengthError from "../engine/ContextLengthError.ts"
import * as Forest from "./Forest.ts"

const exceeded = (limit: number, promptTokens: number) =>
  Result.fail(new ContextLengthError.ContextLengthError({ limit, promptTokens }))

/**
 * The check before committing an observation: the parent's tokens plus the observation's must stay below
 * `maxContextLen`, else nothing may be committed.
 */
export const checkObservation = (
  forest: Forest.Forest,
  parent: string,
  observationTokens: number,
  maxContextLen: number | null
): Result.Result<void, ContextLengthError.ContextLengthError> => {
  if (maxContextLen === null) return Result.void
  const prompt = Forest.trainTokenCount(forest, parent) + observationTokens
  return prompt >= maxContextLen ? exceeded(maxContextLen, prompt) : Result.void
}

/**
 * The generation budget at a state: `min(maxNewTokens, maxContextLen - prompt)`, or a context error when nothing is
 * left.
 */
export const generationBudget = (
  forest: Forest.Forest,
  hash: string,
  maxContextLen: number | null,
  maxNewTokens: number
): Result.Result<number, ContextLengthError.ContextLengthError> => {
  if (maxContextLen === null) return Result.succeed(maxNewTokens)
  const prompt = Forest.trainTokenCount(forest, hash)
  const remaining = maxContextLen - prompt
  return remaining <= 0 ? exceeded(maxContextLen, prompt) : Result.succeed(Math.min(maxNewTokens, remaining))
}
