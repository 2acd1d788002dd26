/**
 * Every tagged error of `src/`, in one place for callers that branch on `_tag`, and `messageOf`.
 *
 * **Details**
 * Each error is defined next to the code that raises it (so a module and its failures read together); this module
 * only re-exports them, and test/errors.test.ts keeps the list complete. The entry files (`src/index.ts`, `src/cli.ts`,
 * `src/cli/`) are left out, since they import `layers/`; errors raised by services (engine, tokenizer, hooks, the
 * Session registry) live in their `layers/` files. The naming rule is docs/architecture.md "Errors".
 */
export {
  ClusterCallError,
  ConfigMismatchError,
  FleetCommandError,
  RunnerLostError,
  SessionFailedError
} from "./cluster/errors.ts"
export { RolloutConfigError } from "./config/Settings.ts"
export {
  AdvantageError,
  CreditConfigError,
  FilterError,
  GroupRewardError,
  NormalizationError,
  RewardError
} from "./credit/errors.ts"
export { ContextLengthError, ExportError, ForestInvariantError, ForestNotFoundError } from "./forest/errors.ts"
export {
  GenerationEngineError,
  type GenerationError,
  ImageRejectedError,
  UnusableResponseError
} from "./generation/errors.ts"
export { HookSpecError } from "./hooks/HookSpec.ts"
export { DumpLineError } from "./inspect/Dump.ts"
export { LoraRegistryError } from "./lora/Registry.ts"
export { UnknownParserError } from "./parsers/registry.ts"
export { CanonicalError } from "./protocol/canonical.ts"
export { GatewayError, ProtocolError } from "./protocol/errors.ts"
export { OutputPathError } from "./rollout/OutputPaths.ts"
export { BatchingError } from "./schedule/Batching.ts"
export { DatasetError } from "./schedule/Dataset.ts"
export { TooManyDroppedGroupsError } from "./schedule/DropStreak.ts"
export { ExitedBeforeFirstRequestError, RunnerDiedError } from "./schedule/GroupFailure.ts"
export { PartitionError } from "./schedule/Partitions.ts"
export {
  AgentExecutionError,
  AgentSpecError,
  SessionClosedError,
  SessionInputError,
  SessionOutputError
} from "./session/errors.ts"
export { TemplateError } from "./template/ChatTemplate.ts"
export { RolloutCallError } from "./trainer/Results.ts"

/** The text of a thrown value: an `Error`'s message, anything else as `String` writes it. */
export const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** The `code` of a Node error (`ENOENT`, `ERR_MODULE_NOT_FOUND`, …), or `undefined` when it has none. */
export const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined
