/**
 * A turn's sampling: the Session's sampling with the turn's budget, the request's stop strings and seed.
 */
import * as Completion from "../protocol/Completion.ts"

/** The sampling fields a turn overrides; the rest of the Session's sampling passes through. */
export interface TurnSampling {
  readonly maxNewTokens: number
  readonly stop: ReadonlyArray<string>
  readonly seed?: number | undefined
}

/** The turn limit asked for: the request's `max_tokens`-like field, capped by the configured response length. */
export const requestedTokens = (configured: number, requested: number | undefined): number =>
  Math.min(requested ?? configured, configured)

/**
 * The Session's sampling for one turn: `maxNewTokens` is the generation budget (ContextLimit.generationBudget), the
 * request's stop strings are added (deduplicated, configured ones first), and the request's seed applies.
 */
export const turnSampling = <S extends TurnSampling>(
  session: S,
  request: Pick<Completion.CanonicalRequest, "stop" | "seed">,
  maxNewTokens: number
): S => ({
  ...session,
  maxNewTokens,
  stop: [...new Set([...session.stop, ...request.stop])],
  ...(request.seed === undefined ? {} : { seed: request.seed })
})
