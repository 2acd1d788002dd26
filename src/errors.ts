/**
 * Every tagged error of `src/`, in one place for callers that branch on `_tag`; it only re-exports.
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
  NotHolderError,
  PlacementRefusedError,
  RunnerLostError,
  SessionFailedError
} from "./cluster/ClusterError.ts"
export { RolloutConfigError } from "./config/Settings.ts"
export { BatchingError } from "./credit/Batching.ts"
export {
  AdvantageError,
  CreditConfigError,
  FilterError,
  GroupRewardError,
  NormalizationError,
  RewardError
} from "./credit/CreditError.ts"
export { ContextLengthError } from "./engine/ContextLengthError.ts"
export { ExportError, ForestInvariantError, ForestNotFoundError } from "./forest/ForestError.ts"
export {
  GenerationEngineError,
  type GenerationError,
  ImageRejectedError,
  UnusableResponseError
} from "./generation/GenerationError.ts"
export { HookSpecError } from "./hooks/HookSpec.ts"
export { DumpLineError } from "./inspect/Dump.ts"
export { AdapterPathError } from "./lora/AdapterFiles.ts"
export { LoraRegistryError } from "./lora/LoraRegistry.ts"
export { UnknownParserError } from "./parsers/ParserRegistry.ts"
export { CanonicalError } from "./protocol/Canonical.ts"
export { GatewayError, ProtocolError } from "./protocol/ProtocolError.ts"
export { ReplayFormatError } from "./replay/Recorded.ts"
export { OutputPathError } from "./rollout/OutputPaths.ts"
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
} from "./session/SessionError.ts"
export { TemplateError } from "./template/ChatTemplate.ts"
export { codeOf, messageOf } from "./Thrown.ts"
export { RolloutCallError } from "./trainer/Results.ts"
