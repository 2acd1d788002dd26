/**
 * The partial-rollout scenario of test/fixtures/rollout/partial.jsonl as the end-to-end tests run it (test/e2e/partial,
 * test/replay/replay.e2e): a long task and a short one, real agent processes (`partial.mjs`), one sample per prompt,
 * over-sampling 2, two steps. The short task waits until the long task's request was sent (a file in `signalDir`), so
 * it ends while the long one still generates and step 0 closes on it: the long request is parked and resumed.
 */
import * as Path from "node:path"
import type { RolloutOptionsInput } from "../../src/index.ts"

const fixtures = Path.join(import.meta.dirname, "..", "fixtures", "rollout")

export const options = (signalDir: string, extra: Partial<RolloutOptionsInput> = {}): RolloutOptionsInput => ({
  promptData: Path.join(fixtures, "partial.jsonl"),
  agentCommand: `${JSON.stringify(process.execPath)} partial.mjs`,
  agentCwd: fixtures,
  agentEnv: [`SIGNAL_DIR=${signalDir}`],
  agentTimeout: 120,
  nSamplesPerPrompt: 1,
  rolloutBatchSize: 1,
  overSamplingBatchSize: 2,
  numRollout: 2,
  partialRollout: true,
  rolloutMaxResponseLen: 2000,
  ...extra
})
