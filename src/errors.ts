/**
 * Every tagged error the pure domain can raise, in one place for callers that branch on `_tag`.
 *
 * **Details**
 * Each error is defined next to the code that raises it (so a module and its failures read together); this module
 * only re-exports them. Errors raised by services (engine, tokenizer, hooks, sessions) live in their `layers/` files.
 */
export { AdvantageError, CreditConfigError, GroupRewardError, NormalizationError, RewardError } from "./credit/errors.ts"
export { ContextLengthError, ExportError, ForestInvariantError, ForestNotFound } from "./forest/errors.ts"
export {
  EngineFailure,
  type GenerationError,
  ImageRejected,
  SessionDiscarded,
  TemplateRejected,
  UnusableResponse
} from "./generation/errors.ts"
export { HookSpecError } from "./hooks/HookSpec.ts"
export { DumpLineError } from "./inspect/Dump.ts"
export { UnknownParserError } from "./parsers/registry.ts"
export { CanonicalError } from "./protocol/canonical.ts"
export { GatewayError, ProtocolError } from "./protocol/errors.ts"
export { BatchingError } from "./schedule/Batching.ts"
export { DatasetError } from "./schedule/Dataset.ts"
export { AgentExecutionError, AgentSpecError, SessionInputError, SessionOutputError } from "./session/errors.ts"
export { TemplateError } from "./template/ChatTemplate.ts"
