/**
 * `relax-agentic rescore <output-dir>`: recompute the rewards and credit of a run's saved training samples with
 * another reward function or custom advantage (docs/debugging.md "Rescore"), and write new sample files, metrics and
 * a summary.
 */
import { Console, Effect, Option } from "effect"
import { Argument, Command } from "effect/cli"
import * as Rescore from "../../layers/replay/Rescore.ts"
import * as CommandFlags from "./CommandFlags.ts"
import * as UserError from "./UserError.ts"

const flags = {
  customRmPath: CommandFlags.optionalString(
    "custom-rm-path",
    "module.ts#export: the reward function that scores every sample"
  ),
  groupRm: CommandFlags.toggle("group-rm", "Call the reward function once per Group"),
  customAdvantagePath: CommandFlags.optionalString(
    "agentic-custom-advantage-path",
    "module.ts#export: the custom advantage hook"
  ),
  dynamicSamplingFilterPath: CommandFlags.optionalString(
    "dynamic-sampling-filter-path",
    "module.ts#export: the Group filter"
  ),
  rewardKey: CommandFlags.optionalString("reward-key", "Key of an object reward's primary value"),
  keepAgentRewards: CommandFlags.toggle(
    "keep-agent-rewards",
    "Keep the recorded rewards; score only samples without one"
  ),
  disableGrpoStdNormalization: CommandFlags.toggle("disable-grpo-std-normalization", "GRPO without the std division"),
  disableRewardsNormalization: CommandFlags.toggle("disable-rewards-normalization", "Raw rewards as advantages"),
  normalizeAdvantages: CommandFlags.toggle("normalize-advantages", "Whiten the step's advantages"),
  logPassrate: CommandFlags.toggle("log-passrate", "Log rollout/passrate/pass@k"),
  outputDir: CommandFlags.optionalString("output-dir", "Where the new files go (default: <path>/rescore)")
}

/** The flags of `rescore` (docs/debugging.md; the docs test checks the pages name only flags that exist). */
export const rescoreFlagNames: ReadonlyArray<string> = CommandFlags.flagNames(flags)

/** `relax-agentic rescore <output-dir> [--custom-rm-path ...] [--group-rm] ...`. */
export const rescoreCommand = Command.make(
  "rescore",
  {
    path: Argument.String("path").pipe(Argument.withDescription("A training rollout's --output-dir")),
    ...flags
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
      }).pipe(Effect.mapError((error) => UserError.make(error.message)))
      for (const line of Rescore.reportLines(report)) yield* Console.log(line)
    })
).pipe(Command.withDescription(
  "Recompute rewards and credit of a run's saved samples (another --custom-rm-path, custom advantage, reward key): " +
    "new sample files, metrics and a summary under --output-dir."
))
