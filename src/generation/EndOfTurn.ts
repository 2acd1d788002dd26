/**
 * Where a turn ended: the trailing end-of-turn or stop id split off the visible text, and the finish it reports.
 */
import type * as Stop from "../engine/Stop.ts"
import * as Completion from "../protocol/Completion.ts"

/** The generated ids split into the visible text's ids and whether a trailing end-of-turn / stop id ended the turn. */
export interface EndOfTurnSplit {
  readonly textIds: ReadonlyArray<number>
  readonly endedTurn: boolean
}

/**
 * The trailing end-of-turn id (one of the tokenizer's `endOfTurnIds` or a configured stop token id) is generated and
 * committed but is not part of the visible text.
 */
export const splitEndOfTurn = (
  outputIds: ReadonlyArray<number>,
  endOfTurnIds: ReadonlySet<number>,
  stopTokenIds: ReadonlyArray<number>
): EndOfTurnSplit => {
  const last = outputIds[outputIds.length - 1]
  const endedTurn = last !== undefined && (endOfTurnIds.has(last) || stopTokenIds.includes(last))
  return { textIds: endedTurn ? outputIds.slice(0, -1) : outputIds, endedTurn }
}

/** The engine's finish as the completion reports it before tool calls are known: an ended turn is `stop`. */
export const engineFinish = (split: EndOfTurnSplit, finishReason: Stop.FinishReason): Completion.FinishReason =>
  split.endedTurn ? "stop" : finishReason.type

/** The request stop string that ended the generation, when one did. */
export const stopSequence = (finishReason: Stop.FinishReason): string | undefined =>
  finishReason.type === "stop" && typeof finishReason.matched === "string" ? finishReason.matched : undefined
