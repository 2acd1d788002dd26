/**
 * A Group as credit sees it: the Sessions of one prompt, in sampled order, each with the contexts it exported.
 */
import { Result } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"
import * as CreditError from "./CreditError.ts"
import type * as CreditOptions from "./CreditOptions.ts"

/** One sampled Session and the training samples of the contexts it exported, in export order. */
export interface Session {
  readonly sessionId: string
  readonly exports: ReadonlyArray<TrainingSample.TrainingSample>
}

/** The Sessions of one prompt, in the sampled order (the custom advantage hook's outer order). */
export interface Group {
  readonly groupIndex: number
  readonly sessions: ReadonlyArray<Session>
}

/**
 * The mapping key of a context: its export name, or `"null"` for an implicit export.
 *
 * **Details**
 * Python's custom advantage hook uses `None` as the key of an implicit export; `"null"` is what JavaScript and JSON
 * make of that key.
 */
export const contextKey = (exportName: string | null): string => exportName ?? "null"

/** Every exported row of the Group, Session by Session, in export order. */
export const rows = (group: Group): ReadonlyArray<TrainingSample.TrainingSample> =>
  group.sessions.flatMap((session) => session.exports)

/** The Group with its rows replaced, in the order {@link rows} lists them. */
export const withRows = (group: Group, replaced: ReadonlyArray<TrainingSample.TrainingSample>): Group => {
  let next = 0
  return {
    groupIndex: group.groupIndex,
    sessions: group.sessions.map((session) => ({
      sessionId: session.sessionId,
      exports: session.exports.map(() => replaced[next++]!)
    }))
  }
}

/**
 * Check the guide's export rules for a Group.
 *
 * **Details**
 * Every Session exports at least one context, names are unique within a Session, and a Session that exports more than
 * one context needs `--agentic-custom-advantage-path` and dynamic batching ("Select Training Contexts and Credit",
 * "Multi-Context Dynamic Batching"). The rules are the recipe's, so they hold in eval as well.
 */
export const validateExports = (
  group: Group,
  options: Pick<CreditOptions.CreditOptions, "customAdvantagePath" | "useDynamicBatchSize">
): Result.Result<void, CreditError.CreditConfigError> => {
  for (const session of group.sessions) {
    const names = session.exports.map((sample) => sample.export_name)
    if (names.length === 0) {
      return Result.fail(
        new CreditError.CreditConfigError({
          detail: `Session ${session.sessionId} in Group ${group.groupIndex} exported no context; ` +
            `every Session must export at least one context to be trained`
        })
      )
    }
    const seen = new Set<string>()
    for (const name of names) {
      const key = contextKey(name)
      if (seen.has(key)) {
        return Result.fail(
          new CreditError.CreditConfigError({
            detail:
              `Session ${session.sessionId} in Group ${group.groupIndex} exported context ${
                CreditError.contextLabel(name)
              } ` +
              `more than once; export names must be unique within a Session`
          })
        )
      }
      seen.add(key)
    }
    if (names.length > 1) {
      const listed = names.map(CreditError.contextLabel).join(", ")
      if (options.customAdvantagePath === undefined) {
        return Result.fail(
          new CreditError.CreditConfigError({
            detail: `Session ${session.sessionId} in Group ${group.groupIndex} exported ${names.length} contexts ` +
              `(${listed}); more than one context per Session requires --agentic-custom-advantage-path ` +
              `(one reward cannot say how much credit each context gets). Configure a custom advantage function, ` +
              `or export a single context`
          })
        )
      }
      if (!options.useDynamicBatchSize) {
        return Result.fail(
          new CreditError.CreditConfigError({
            detail: `Session ${session.sessionId} in Group ${group.groupIndex} exported ${names.length} contexts ` +
              `(${listed}); multi-context export requires --use-dynamic-batch-size with --max-tokens-per-gpu`
          })
        )
      }
    }
  }
  return Result.void
}
