/**
 * Training samples and Groups for the credit tests.
 */
import type * as Group from "../../src/credit/Group.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"

/** A one-turn sample of `responseLength` generated tokens after a 4-token prompt; fields overridable. */
export const sample = (overrides: Partial<TrainingSample.TrainingSample> = {}): TrainingSample.TrainingSample => {
  const responseLength = overrides.response_length ?? 3
  return {
    rollout_id: 0,
    group_index: 0,
    index: 0,
    session_id: "s0",
    export_name: null,
    tokens: Array.from({ length: 4 + responseLength }, (_, i) => 100 + i),
    response_length: responseLength,
    loss_mask: new Array<number>(responseLength).fill(1),
    rollout_log_probs: new Array<number>(responseLength).fill(-0.5),
    turn_spans: [[0, responseLength]],
    prompt: "p",
    response: "r",
    reward: null,
    advantage: null,
    status: "completed",
    weight_versions: ["0"],
    metadata: {},
    label: null,
    ...overrides
  }
}

/** A Session whose exports are `samples`, all tagged with its id. */
export const session = (sessionId: string, exports: ReadonlyArray<TrainingSample.TrainingSample>): Group.Session => ({
  sessionId,
  exports: exports.map((row) => ({ ...row, session_id: sessionId }))
})

/** A Group of single-context (implicit export) Sessions with the given rewards. */
export const singleContextGroup = (
  rewards: ReadonlyArray<TrainingSample.TrainingSample["reward"]>,
  groupIndex = 0
): Group.Group => ({
  groupIndex,
  sessions: rewards.map((reward, i) =>
    session(`g${groupIndex}s${i}`, [sample({ group_index: groupIndex, index: groupIndex * 100 + i, reward })])
  )
})

/**
 * The guide's two-session example: each Session exports `main` (with reward) and `searcher_0`.
 * `extraMain` adds metadata to each Session's main context.
 * main is a two-turn context (spans [0,2) and [4,6) with an observation between); searcher_0 has one turn.
 */
export const guideGroup = (
  extraMain: readonly [TrainingSample.TrainingSample["metadata"], TrainingSample.TrainingSample["metadata"]] = [{}, {}]
): Group.Group => ({
  groupIndex: 3,
  sessions: [
    session("first", [
      sample({
        group_index: 3,
        index: 6,
        export_name: "main",
        response_length: 6,
        tokens: Array.from({ length: 10 }, (_, i) => i),
        loss_mask: [1, 1, 0, 0, 1, 1],
        rollout_log_probs: [-1, -1, 0, 0, -1, -1],
        turn_spans: [[0, 2], [4, 6]],
        metadata: { outcome: 1.0, ...extraMain[0] },
        reward: 1.0
      }),
      sample({ group_index: 3, index: 6, export_name: "searcher_0", metadata: { usefulness: 0.6 } })
    ]),
    session("second", [
      sample({
        group_index: 3,
        index: 7,
        export_name: "main",
        response_length: 6,
        tokens: Array.from({ length: 10 }, (_, i) => i),
        loss_mask: [1, 1, 0, 0, 1, 1],
        rollout_log_probs: [-1, -1, 0, 0, -1, -1],
        turn_spans: [[0, 2], [4, 6]],
        metadata: { outcome: 0.0, ...extraMain[1] },
        reward: 0.0
      }),
      sample({ group_index: 3, index: 7, export_name: "searcher_0", metadata: { usefulness: 0.2 } })
    ])
  ]
})
