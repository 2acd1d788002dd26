/**
 * Forest commits for tests that build trees of states: a completed response with placeholder logprobs, weight
 * versions and timings (only its message and tokens matter to them).
 */
import * as ForestCommit from "../../src/forest/Commit.ts"
import type * as Forest from "../../src/forest/Forest.ts"

/** Commit a completed assistant response `content` of `tokens` under `parent`; returns its state's hash. */
export const completedResponse = (
  forest: Forest.Forest,
  parent: string,
  content: string,
  tokens: ReadonlyArray<number>,
  requestId: string
): string =>
  ForestCommit.commitResponse(forest, {
    parent,
    message: { role: "assistant", content },
    tokens,
    logprobs: tokens.map(() => -0.5),
    weightVersions: tokens.map(() => "v"),
    status: "completed",
    rolloutId: 0,
    requestId,
    abortCount: 0,
    wallElapsedS: 0,
    generationElapsedS: 0
  })
