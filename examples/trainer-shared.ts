/**
 * What the two TypeScript trainer examples share: the arithmetic rollout as `RolloutOptions` (the same settings as
 * examples/arithmetic/rollout.json, with paths that work from any directory) and a one-line summary of a step.
 */
import { fileURLToPath } from "node:url"
import type { Results, RolloutOptionsInput } from "relax-agentic"

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url))

/** The arithmetic example: a calculator-tool agent on the embedded engine with a scripted policy. */
export const arithmetic: RolloutOptionsInput = {
  promptData: here("arithmetic/data/train.jsonl"),
  labelKey: "label",
  rolloutShuffle: true,
  nSamplesPerPrompt: 4,
  rolloutBatchSize: 4,
  agentCwd: here("arithmetic"),
  agentCommand: "bash run_agent_app.sh",
  agentTimeout: 120,
  agenticPrelaunch: true,
  embeddedPolicy: here("arithmetic/policy.ts#policy"),
  agenticToolCallParser: "qwen25",
  agenticReasoningParser: "qwen3",
  rolloutMaxResponseLen: 256,
  rewardKey: "score",
  evalPromptData: [{ name: "arith", path: here("arithmetic/data/eval.jsonl") }]
}

const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length

/** `step 0: 16 samples from 4 Groups, reward 0.75, advantage mean 0.0000 (min -1.5000, max 0.5000)`. */
export const describeStep = (step: Results.StepResult): string => {
  const advantages = step.samples.flatMap((s) => (typeof s.advantage === "number" ? [s.advantage] : []))
  return `step ${step.rolloutId}: ${step.samples.length} samples from ${step.groups.accepted} Groups ` +
    `(${step.groups.dropped} dropped), reward ${(step.metrics["rollout/raw_reward"] ?? Number.NaN).toFixed(4)}, ` +
    `advantage mean ${mean(advantages).toFixed(4)} ` +
    `(min ${Math.min(...advantages).toFixed(4)}, max ${Math.max(...advantages).toFixed(4)})`
}

/** True when `url` (an `import.meta.url`) is the script node was started with. */
export const isMain = (url: string): boolean => process.argv[1] !== undefined && fileURLToPath(url) === process.argv[1]
