/**
 * `--use-dynamic-batch-size --max-tokens-per-gpu N`: packing a step's samples into token-budgeted micro-batches.
 */
import { Data, Result } from "effect"
import type * as TrainingSample from "../forest/TrainingSample.ts"

/** A sample that does not fit in one micro-batch, named by Session and context. */
export class BatchingError extends Data.TaggedError("BatchingError")<{
  readonly sessionId: string
  readonly exportName: string | null
  readonly index: number
  readonly length: number
  readonly maxTokensPerGpu: number
}> {
  override get message(): string {
    const context = this.exportName === null ? "null (implicit export)" : JSON.stringify(this.exportName)
    return `sample ${this.index} (Session ${this.sessionId}, context ${context}) has ${this.length} tokens, more than ` +
      `--max-tokens-per-gpu ${this.maxTokensPerGpu}; raise --max-tokens-per-gpu to at least the longest sample ` +
      `(prompt + continuation), or lower --rollout-max-context-len`
  }
}

/** One micro-batch: positions in the step's sample list (ascending) and their total token count. */
export interface MicroBatch {
  readonly indices: ReadonlyArray<number>
  readonly tokens: number
}

/** What packing needs to know of a sample. */
export type Packable = Pick<TrainingSample.TrainingSample, "session_id" | "export_name" | "index" | "tokens">

/**
 * Pack samples into micro-batches whose token counts (prompt + continuation) stay within `maxTokensPerGpu`.
 *
 * **Details**
 * First-fit decreasing: samples are taken longest first (ties by position) and each goes into the first micro-batch
 * with room, opening a new one when none has. The reference sizes the count of micro-batches with first fit; FFD
 * never needs more than 11/9·OPT + 1 of them. A sample longer than the budget cannot be placed and is an error.
 */
export const pack = (
  samples: ReadonlyArray<Packable>,
  maxTokensPerGpu: number
): Result.Result<ReadonlyArray<MicroBatch>, BatchingError> => {
  for (const sample of samples) {
    if (sample.tokens.length > maxTokensPerGpu) {
      return Result.fail(
        new BatchingError({
          sessionId: sample.session_id,
          exportName: sample.export_name,
          index: sample.index,
          length: sample.tokens.length,
          maxTokensPerGpu
        })
      )
    }
  }
  const order = samples
    .map((sample, position) => ({ position, length: sample.tokens.length }))
    .sort((a, b) => b.length - a.length || a.position - b.position)
  const bins: Array<{ indices: Array<number>; tokens: number }> = []
  for (const { length, position } of order) {
    const bin = bins.find((candidate) => candidate.tokens + length <= maxTokensPerGpu)
    if (bin === undefined) bins.push({ indices: [position], tokens: length })
    else {
      bin.indices.push(position)
      bin.tokens += length
    }
  }
  return Result.succeed(bins.map((bin) => ({ indices: [...bin.indices].sort((a, b) => a - b), tokens: bin.tokens })))
}
