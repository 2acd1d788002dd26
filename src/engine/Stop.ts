/**
 * When a generation finishes, with SGLang's rules (`Req.check_finished`), checked after every new token:
 * 1. `max_new_tokens` reached → `length` (even when that token is also a stop token);
 * 2. the token is eos or one of `stop_token_ids` → `stop` with the id as `matched`;
 * 3. the decoded output contains a stop string → `stop` with the string as `matched`.
 * The finishing token stays in the output ids (SGLang trims stop strings from `text` only, and not at all with
 * `no_stop_trim`).
 */

/** Same shape as the Engine port's finish reason. */
export type FinishReason =
  | { readonly type: "stop"; readonly matched?: number | string | undefined }
  | { readonly type: "length"; readonly length?: number | undefined }
  | { readonly type: "abort"; readonly message?: string | undefined }

export interface Criteria {
  readonly maxNewTokens: number
  /** eos plus the request's `stop_token_ids`. */
  readonly stopTokenIds: ReadonlySet<number>
  readonly stop: ReadonlyArray<string>
  readonly decode: (ids: ReadonlyArray<number>) => string
}

/** A checker: `(outputIds) => reason` for the output so far (call after appending each token). */
export type Checker = (outputIds: ReadonlyArray<number>) => FinishReason | undefined

export const checker = (criteria: Criteria): Checker => {
  const stops = criteria.stop.filter((s) => s.length > 0)
  const longest = stops.reduce((a, s) => Math.max(a, s.length), 0)
  // Enough tokens to cover the longest stop string even when every character is split over 4 byte tokens.
  const window = 4 * longest + 2
  return (outputIds) => {
    const n = outputIds.length
    if (n >= criteria.maxNewTokens) return { type: "length", length: criteria.maxNewTokens }
    const last = outputIds[n - 1]
    if (last === undefined) return undefined
    if (criteria.stopTokenIds.has(last)) return { type: "stop", matched: last }
    if (stops.length > 0) {
      const tail = criteria.decode(outputIds.slice(Math.max(0, n - window)))
      for (const s of stops) if (tail.includes(s)) return { type: "stop", matched: s }
    }
    return undefined
  }
}

/** The prefix of `ids` a generation producing them would return, and why it ended (`undefined`: not finished). */
export const truncate = (
  ids: ReadonlyArray<number>,
  criteria: Criteria
): { readonly ids: ReadonlyArray<number>; readonly finishReason: FinishReason | undefined } => {
  const check = checker(criteria)
  if (criteria.maxNewTokens <= 0) return { ids: [], finishReason: { type: "length", length: criteria.maxNewTokens } }
  // One growing prefix, checked after each id as a generation checks its output (a checker keeps no reference).
  const prefix: Array<number> = []
  for (const id of ids) {
    prefix.push(id)
    const reason = check(prefix)
    if (reason !== undefined) return { ids: prefix, finishReason: reason }
  }
  return { ids, finishReason: undefined }
}
