/**
 * The steps `Generation.match` and `Generation.observe` of a model request (layers/generation/Generation.ts): the
 * parent state in the Session's SessionForest, then the request's unmatched messages committed under it as an
 * observation with its tokens (docs/sessionforest.md "Matching a request", "Observation tokens").
 */
import { Effect, Result } from "effect"
import * as ForestCommit from "../../src/forest/Commit.ts"
import * as Drift from "../../src/forest/Drift.ts"
import * as Forest from "../../src/forest/Forest.ts"
import * as Matching from "../../src/forest/Matching.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import type * as Canonical from "../../src/protocol/Canonical.ts"
import type * as ChatTemplate from "../../src/template/ChatTemplate.ts"
import * as ObservationDelta from "../../src/template/ObservationDelta.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import type * as Sessions from "../schedule/Sessions.ts"
import * as Images from "./Images.ts"
import type * as StepContext from "./StepContext.ts"

/**
 * The parent state: the longest committed prefix of the request (with the reasoning tolerance unless strict).
 * Synchronous: the drift metric is updated with the request's context (`Metric.update` without its own step).
 */
export function* match(
  core: StepContext.Core,
  request: StepContext.RequestRun,
  forest: Forest.Forest,
  state: Canonical.State,
  known: Matching.KnownState | undefined
) {
  const { session } = request
  const matched = Matching.match(forest, state, { strict: core.options.strictMatch ?? false, known })
  if (matched.tolerated) session.counters.toleratedMatches++
  // Drift: the echoed history diverged from a committed response here (docs/outputs.md, `rollout/drift/...`).
  const drift = Drift.ofRequest(forest, matched.parent, matched.suffix)
  if (drift !== undefined) {
    const counts = session.counters.drift ??= new Map()
    counts.set(drift.cause, (counts.get(drift.cause) ?? 0) + 1)
    Instruments.drift({ cause: drift.cause }).updateUnsafe(1, request.context)
  }
  return matched
}

/**
 * Observation delta tokens (docs/sessionforest.md, "Observation tokens"): the full prompt at the root, the
 * dummy-prefix delta deeper down. A plain text is encoded with `encodeAsync`, so a huge message is tokenized off
 * the event loop; a text with marked agent literals (rare) is encoded in place.
 */
const observationTokens = (
  core: StepContext.Core,
  forest: Forest.Forest,
  matched: Matching.Match,
  state: Canonical.State
): Effect.Effect<ReadonlyArray<number>, ChatTemplate.TemplateError> => {
  const root = Forest.isRoot(forest, matched.parent)
  const encoding = root
    ? ObservationDelta.rootPlan(
      core.tokenizer,
      matched.suffix,
      state.tools,
      state.chat_template_kwargs,
      core.encodeOptions
    )
    : ObservationDelta.deltaPlan(
      core.tokenizer,
      matched.suffix,
      state.tools,
      state.chat_template_kwargs,
      core.encodeOptions
    )
  if (Result.isFailure(encoding)) return Effect.fail(encoding.failure)
  const toEncode = encoding.success
  if (toEncode.marker !== undefined) return Effect.sync(() => ObservationDelta.encodePlan(core.tokenizer, toEncode))
  if (!root) {
    return Effect.map(core.tokenizer.encodeAsync(toEncode.text), (ids) => ObservationDelta.planIds(toEncode, ids))
  }
  // A root observation is the whole rendered prompt (a plan without a skip): a Group's Sessions share it.
  const kept = core.promptIds.get(toEncode.text)
  return kept !== undefined
    ? Effect.succeed(kept)
    : Effect.map(
      core.tokenizer.encodeAsync(toEncode.text),
      (ids) => core.promptIds.keep(toEncode.text, ObservationDelta.planIds(toEncode, ids))
    )
}

/** Observations of at least this many ids are packed in a task before the commit's (a 1 MB message: ~250,000). */
const PACK_APART_IDS = 64 * 1024

/**
 * A long observation's ids packed for the forest, then the next task: packing and committing a 1 MB message's ids in
 * one task was ~15 ms of it (docs/performance.md, section 3, "Issue 41, the 1 MB message").
 */
const packApart = (tokens: ReadonlyArray<number>): Effect.Effect<PackedIds.PackedIds> =>
  Effect.suspend(() => {
    const packed = PackedIds.pack(tokens)
    return Effect.as(FairScheduler.continueAsTask, packed)
  })

/** Commit the request's new messages (if any) under the matched parent; returns the state to generate from. */
export function* observe(
  core: StepContext.Core,
  session: Sessions.SessionEntry,
  forest: Forest.Forest,
  matched: Matching.Match,
  state: Canonical.State
) {
  if (matched.suffix.length === 0) return matched.parent
  const tokens = yield* observationTokens(core, forest, matched, state)
  // Images get their processor-expanded training tokens; context limits count those (docs/runtime.md, "Model requests").
  const media = ForestCommit.mediaOf(matched.suffix)
  const firstImage = ForestCommit.mediaOf(state.messages).length - media.length
  const train = yield* Images.expandObservation(core.tokenizer, tokens, media, core.visionInputs, firstImage).pipe(
    Effect.mapError((detail) => new GenerationError.ImageRejectedError({ detail }))
  )
  return yield* core.forests.observe(forest, {
    parent: matched.parent,
    rolloutId: session.rolloutId(),
    messages: matched.suffix,
    tokens,
    packed: tokens.length < PACK_APART_IDS ? undefined : yield* packApart(tokens),
    train,
    tools: state.tools,
    chatTemplateKwargs: state.chat_template_kwargs,
    maxContextLen: session.maxContextLen ?? null
  })
}
