/**
 * The arithmetic example (examples/arithmetic) as the command-line tests run it: its directory and the flags of its
 * README's command line.
 */
import * as Path from "node:path"

/** The repository root. */
export const root = Path.join(import.meta.dirname, "..", "..")

/** examples/arithmetic. */
export const dir = Path.join(root, "examples", "arithmetic")

/** One step, its samples and debug dumps written into `out`. */
export const oneStepInto = (out: string): Array<string> => [
  "--num-rollout",
  "1",
  "--output-dir",
  out,
  "--save-debug-rollout-data",
  Path.join(out, "debug_{rollout_id}.jsonl")
]

/** `rollout` of the example's config (`npm start`'s) for one step into `out`, then `extra`. */
export const oneStep = (out: string, extra: ReadonlyArray<string> = []): Array<string> => [
  "rollout",
  "--config",
  Path.join(dir, "rollout.json"),
  ...oneStepInto(out),
  ...extra
]

/**
 * The example's flags: its training data, a Group shape (default 4 prompts × 4 samples), its agent, its embedded
 * policy, the qwen25 / qwen3 parsers and its reward key.
 */
export const flags = (
  shape: { readonly rolloutBatchSize: number; readonly nSamplesPerPrompt: number } = {
    rolloutBatchSize: 4,
    nSamplesPerPrompt: 4
  }
): Array<string> => [
  "--prompt-data",
  Path.join(dir, "data", "train.jsonl"),
  "--rollout-batch-size",
  String(shape.rolloutBatchSize),
  "--n-samples-per-prompt",
  String(shape.nSamplesPerPrompt),
  "--agent-cwd",
  dir,
  "--agent-command",
  "bash run_agent_app.sh",
  "--embedded-policy",
  Path.join(dir, "policy.ts#policy"),
  "--agentic-tool-call-parser",
  "qwen25",
  "--agentic-reasoning-parser",
  "qwen3",
  "--reward-key",
  "score"
]
