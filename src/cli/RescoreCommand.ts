/**
 * `relax-agentic rescore <output-dir>`: recompute the rewards and credit of a run's saved training samples with
 * another reward function or custom advantage (docs/debugging.md "Rescore"), and write new sample files, metrics and
 * a summary.
 */
import { Console, Effect, Option } from "effect"
import { Argument, CliError, Command, Flag } from "effect/cli"
import * as Rescore from "../../layers/replay/Rescore.ts"

const userError = (message: string) => new CliError.UserError({ cause: message, userMessage: message })

/** The flags of `rescore` (docs/debugging.md; the docs test checks the pages name only flags that exist). */
export const rescoreFlagNames: ReadonlyArray<string> = [
  "--custom-rm-path",
  "--group-rm",
  "--agentic-custom-advantage-path",
  "--dynamic-sampling-filter-path",
  "--reward-key",
  "--keep-agent-rewards",
  "--disable-grpo-std-normalization",
  "--disable-rewards-normalization",
  "--normalize-advantages",
  "--log-passrate",
  "--output-dir"
]

const hook = (name: string, description: string) =>
  Flag.optional(Flag.String(name)).pipe(Flag.withDescription(description))

const toggle = (name: string, description: string) =>
  Flag.Boolean(name).pipe(Flag.withDefault(false), Flag.withDescription(description))

/** `relax-agentic rescore <output-dir> [--custom-rm-path ...] [--group-rm] ...`. */
export const rescoreCommand = Command.make(
  "rescore",
  {
    path: Argument.String("path").pipe(Argument.withDescription("A training rollout's --output-dir")),
    customRmPath: hook("custom-rm-path", "module.ts#export: the reward function that scores every sample"),
    groupRm: toggle("group-rm", "Call the reward function once per Group"),
    customAdvantagePath: hook("agentic-custom-advantage-path", "module.ts#export: the custom advantage hook"),
    dynamicSamplingFilterPath: hook("dynamic-sampling-filter-path", "module.ts#export: the Group filter"),
    rewardKey: hook("reward-key", "Key of an object reward's primary value"),
    keepAgentRewards: toggle("keep-agent-rewards", "Keep the recorded rewards; score only samples without one"),
    disableGrpoStdNormalization: toggle("disable-grpo-std-normalization", "GRPO without the std division"),
    disableRewardsNormalization: toggle("disable-rewards-normalization", "Raw rewards as advantages"),
    normalizeAdvantages: toggle("normalize-advantages", "Whiten the step's advantages"),
    logPassrate: toggle("log-passrate", "Log rollout/passrate/pass@k"),
    outputDir: hook("output-dir", "Where the new files go (default: <path>/rescore)")
  },
  (values) =>
    Effect.gen(function*() {
      const report = yield* Rescore.rescore(values.path, {
        customRmPath: Option.getOrUndefined(values.customRmPath),
        groupRm: values.groupRm,
        customAdvantagePath: Option.getOrUndefined(values.customAdvantagePath),
        dynamicSamplingFilterPath: Option.getOrUndefined(values.dynamicSamplingFilterPath),
        rewardKey: Option.getOrUndefined(values.rewardKey),
        keepAgentRewards: values.keepAgentRewards,
        disableGrpoStdNormalization: values.disableGrpoStdNormalization,
        disableRewardsNormalization: values.disableRewardsNormalization,
        normalizeAdvantages: values.normalizeAdvantages,
        logPassrate: values.logPassrate,
        outputDir: Option.getOrUndefined(values.outputDir)
      }).pipe(Effect.mapError((error) => userError(error.message)))
      for (const line of Rescore.reportLines(report)) yield* Console.log(line)
    })
).pipe(Command.withDescription(
  "Recompute rewards and credit of a run's saved samples (another --custom-rm-path, custom advantage, reward key): " +
    "new sample files, metrics and a summary under --output-dir."
))
