/**
 * The embedded engine (default): an in-process {@link Engine} over a seeded language model of the tokenizer's
 * vocabulary, with latency on Effect's Clock.
 *
 * **Details**
 * - Output is a pure function of (engine seed, prompt ids, sampling params, request seed). A request without
 *   `sampling.seed` gets the next value of a per-engine counter, so a run is reproducible when requests arrive in the
 *   same order (as they do under TestClock).
 * - The draw for a token is keyed on its absolute position in the sequence (and the token before it), not on its
 *   index in this request's output: a generation aborted after `k` tokens and resumed from `prompt ++ partial` with
 *   `max_new_tokens − k` and the same seed yields exactly the tokens and logprobs of the uninterrupted generation.
 * - `updateWeights` advances the version, then aborts every running generation (each reports the version it started
 *   on; an attempt started after the update, even one resumed while the update is aborting, reports the new one).
 * - `pauseGeneration` (any mode: there is no scheduler to keep requests in) aborts every running generation and holds
 *   new ones until `resumeGeneration(version)`, which sets the version (default: the next integer).
 * - Logprobs are `log q(id)` under the temperature-scaled distribution, before top-k/top-p (SGLang's default; see
 *   src/engine/Sampling.ts); at temperature 1 they are the model's own log-probabilities.
 * - With a policy (`--embedded-policy`) and a request that carries its conversation, the policy's text is the output:
 *   its tokens plus eos, truncated by max new tokens / stop strings / stop ids, scored by the model (teacher-forced).
 * - Latency: prefill takes `uncached prompt tokens / prefillTokensPerSecond`, then token `i` appears after
 *   `(i + 1) / decodeTokensPerSecond`. `abort(rid)` ends the pending generate with the tokens that appeared so far.
 *   A speed of 0 or `Infinity` means no latency.
 */
import { Clock, Deferred, Duration, Effect, Fiber, Latch, Layer, Result } from "effect"
import * as BigramModel from "../../src/engine/BigramModel.ts"
import * as ContextLengthError from "../../src/engine/ContextLengthError.ts"
import * as Decoder from "../../src/engine/Decoder.ts"
import * as Sampling from "../../src/engine/Sampling.ts"
import * as SglangWire from "../../src/engine/sglang/SglangWire.ts"
import * as Stop from "../../src/engine/Stop.ts"
import * as WeightVersion from "../../src/engine/WeightVersion.ts"
import type * as HookSpec from "../../src/hooks/HookSpec.ts"
import * as PackedIds from "../../src/ids/PackedIds.ts"
import * as StableIds from "../../src/ids/StableIds.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as Instruments from "../observability/Instruments.ts"
import * as FairScheduler from "../platform/FairScheduler.ts"
import * as Hooks from "../platform/Hooks.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as EmbeddedAdapters from "./EmbeddedAdapters.ts"
import * as Engine from "./Engine.ts"

/** An embedded policy: the text the "model" says for a request. */
export type Policy = (request: Engine.PolicyRequest) => string | Promise<string>

export interface EmbeddedEngineOptions {
  /** Engine seed (default 0). */
  readonly seed?: number | undefined
  readonly policy?: Policy | undefined
  /** Prompt tokens per second (default 20000; 0 or Infinity: instant). */
  readonly prefillTokensPerSecond?: number | undefined
  /** Generated tokens per second (default 200; 0 or Infinity: instant). */
  readonly decodeTokensPerSecond?: number | undefined
  /** Context window; a prompt + max_new_tokens reaching it fails with SGLang's ContextLengthError wording. */
  readonly maxContextLength?: number | undefined
  /** Initial weight version (default "0"). */
  readonly weightVersion?: string | undefined
  /**
   * Wait once per token (and once for the prefill) instead of once per generation: the timeline this engine had
   * before, kept as the reference of the differential test (test/engine/EmbeddedEngine.test.ts). Same tokens; equal
   * wake times can order differently and an abort at a token's due instant may keep it or not.
   */
  readonly perTokenWaits?: boolean | undefined
  /**
   * Compare every prompt in full with its Session's last sequence to find the cached prefix, as this engine did before
   * it skipped the part of a prompt known unchanged (a view of the same stable buffer as the Session's previous
   * prompt, src/ids/StableIds.ts): the reference of the differential test (test/engine/EmbeddedEngine.prefix.test.ts).
   * Same results.
   */
  readonly fullPrefixMatch?: boolean | undefined
  /**
   * The KV pool it reports to admission as `max_total_num_tokens` (`--embedded-kv-tokens`, default 262144); its used
   * tokens are its running attempts' prompts and outputs (each output is computed when the attempt starts).
   */
  readonly kvTokens?: number | undefined
  /** Shape of the model (eos probability, favoured set size, ...). */
  readonly model?: Omit<BigramModel.ModelOptions, "seed" | "vocabSize" | "eosTokenId"> | undefined
}

/** Latency-free options, for unit tests. */
export const instant: EmbeddedEngineOptions = { prefillTokensPerSecond: 0, decodeTokensPerSecond: 0 }

const wordLike = /^Ġ?[a-z]{2,10}$/
const punctuation = new Set([".", ",", "Ċ", "?", "!"])
const pools = new WeakMap<Tokenizer.TokenizerShape, ReadonlyArray<number>>()

/** Word-like tokens of the vocabulary, so sampled text reads like (nonsense) words. */
const favouredPool = (tokenizer: Tokenizer.TokenizerShape): ReadonlyArray<number> => {
  let pool = pools.get(tokenizer)
  if (pool === undefined) {
    const ids: Array<number> = []
    for (let id = 0; id < tokenizer.vocabSize; id++) {
      const token = tokenizer.idToToken(id)
      if (
        token !== undefined && !tokenizer.specialTokenIds.has(id) && (wordLike.test(token) || punctuation.has(token))
      ) {
        ids.push(id)
      }
    }
    pool = ids.length > 0 ? ids : Array.from({ length: tokenizer.vocabSize }, (_, id) => id)
    pools.set(tokenizer, pool)
  }
  return pool
}

/** The model an engine with these options uses over `tokenizer` (tests recompute logprobs with it). */
export const modelFor = (tokenizer: Tokenizer.TokenizerShape, options: EmbeddedEngineOptions = {}): BigramModel.Model =>
  BigramModel.make({
    favouredPool: favouredPool(tokenizer),
    ...options.model,
    seed: options.seed ?? 0,
    vocabSize: tokenizer.vocabSize,
    eosTokenId: tokenizer.eosTokenId
  })

const perToken = (tokensPerSecond: number | undefined, fallback: number): number => {
  const speed = tokensPerSecond ?? fallback
  return speed > 0 && Number.isFinite(speed) ? 1 / speed : 0
}

const secondsToDuration = (seconds: number): Duration.Duration => Duration.nanos(BigInt(Math.round(seconds * 1e9)))

/** A running generation: whether it was aborted, and the child fiber of the wait it is in, if any. */
interface Running {
  /** Its Session (the prefix-cache key). */
  readonly sessionKey: string
  /** Its Session was closed while it ran: it leaves no prefix-cache entry behind. */
  closed: boolean
  aborted: boolean
  /** The KV tokens it holds: its prompt, and its output once computed. */
  kvTokens: number
  /** Aborted by a weight update or a pause (not a failure). */
  byUpdate: boolean
  sleeping: Fiber.Fiber<void> | undefined
}

/** Abort a running generation: its next check returns what appeared so far, a wait in progress ends at once. */
const abortRun = (run: Running, byUpdate = false): void => {
  run.aborted = true
  run.byUpdate ||= byUpdate
  run.sleeping?.interruptUnsafe()
}

/**
 * A Session's entry in the embedded prefix cache: the last sequence seen as a chain of packed parts (its output, `ids`,
 * after its prompt, `up`), and where that prompt came from: the stamp of the stable buffer it was a view of
 * (src/ids/StableIds.ts; 0 when none) and the view's byte offset.
 *
 * **Details**
 * The prompt is the forest's own chain (the lineage's last node, `GenerateRequest.inputChain`: shared, no copy and no
 * array of its parts; docs/performance.md, section 3), or one packed copy of a prompt that comes without it; the entry
 * itself is the output's link after it.
 */
interface Cached extends PackedIds.Chain {
  readonly count: number
  readonly promptStamp: number
  readonly promptOffset: number
  readonly promptLength: number
}

/**
 * How many leading ids of `inputIds` (a view of the stable buffer stamped `stamp`, or 0) are known to equal the cached
 * sequence's without comparing them: the Session's previous prompt was a view of the same stable buffer from the same
 * offset, so the two agree as far as both reach, and the sequence begins with that prompt. 0 whenever in doubt.
 */
const knownPrefix = (cached: Cached, stamp: number, inputIds: ReadonlyArray<number> | Int32Array): number =>
  stamp !== 0 && stamp === cached.promptStamp && inputIds instanceof Int32Array &&
    inputIds.byteOffset === cached.promptOffset
    ? Math.min(cached.promptLength, inputIds.length, cached.count)
    : 0

/**
 * The prompt's ids as a chain to keep: the forest's (`inputChain`) when it holds exactly `inputIds`' count, else one
 * packed copy.
 */
const promptChain = (request: Engine.GenerateRequest): PackedIds.Chain => {
  const chain = request.inputChain?.()
  return chain !== undefined && PackedIds.chainLength(chain) === request.inputIds.length
    ? chain
    : { ids: PackedIds.pack(request.inputIds), up: null }
}

const invalid = (detail: string) => new Engine.EngineError({ reason: "invalid-request", detail, status: 400 })

/** Build the engine over a tokenizer. */
export const make = (
  tokenizer: Tokenizer.TokenizerShape,
  options: EmbeddedEngineOptions = {}
): Effect.Effect<Engine.EngineShape> =>
  // The held-generations gauge is exported from the start, at 0.
  Effect.map(Instruments.move(Instruments.generationsHeld, 0), () => {
    const baseModel = modelFor(tokenizer, options)
    const engineSeed = options.seed ?? 0
    // LoRA adapters: each loaded adapter is another seeded model (EmbeddedAdapters.ts).
    const adapters = EmbeddedAdapters.make(engineSeed, (seed) => modelFor(tokenizer, { ...options, seed }))
    const prefillDelay = perToken(options.prefillTokensPerSecond, 20_000)
    const decodeDelay = perToken(options.decodeTokensPerSecond, 200)
    let version = options.weightVersion ?? "0"
    let updates = 0
    let counter = 0
    const running = new Map<string, Running>()
    const kvTokens = options.kvTokens ?? 262_144
    // Closed while generation is paused for a weight push: new attempts wait here.
    const gate = Latch.makeUnsafe(true)
    const idleWaiters: Array<() => void> = []
    // Generations waiting while paused, by rid: an abort ends them with no tokens.
    const held = new Map<string, Deferred.Deferred<void>>()
    // The last sequence seen per session: the embedded stand-in for SGLang's radix prefix cache, kept until
    // `closeSession` (the Session ended). Its prompt is the forest's own packed ids (its lineage's last node: shared,
    // not copied) where the request brings them, else a packed copy (3 bytes a token); its output packed after it.
    // With it, where its prompt came from (`Cached`): a prompt that extends the previous one (a view of the same stable
    // buffer) is compared from where the previous prompt ended, so the work is that of the new ids.
    const lastSequence = new Map<string, Cached>()
    // What most requests stop on (no stop ids of their own), and how a stop string's check decodes: one each per engine.
    const eosOnly: ReadonlySet<number> = new Set([tokenizer.eosTokenId])
    const decode = (ids: ReadonlyArray<number>): string => tokenizer.decode(ids)
    const fullPrefixMatch = options.fullPrefixMatch === true

    /**
     * Sleep `duration` on the Clock, cut short by an abort: the sleep runs in a child fiber that `abort` interrupts (one
     * fiber per wait, where racing the sleep against an abort signal took two).
     */
    const sleepUnlessAborted = (duration: Duration.Duration, run: Running): Effect.Effect<void> =>
      Effect.suspend(() =>
        run.aborted ? Effect.void : Effect.flatMap(
          Effect.forkChild(Effect.sleep(duration), { startImmediately: true }),
          (sleeping) => {
            run.sleeping = sleeping
            return Effect.map(Fiber.await(sleeping), () => {
              run.sleeping = undefined
            })
          }
        )
      )

    const prefillNanos = (
      seconds: number
    ): bigint => (seconds > 0 ? Duration.toNanosUnsafe(secondsToDuration(seconds)) : 0n)
    const decodeNanos = decodeDelay > 0 ? Duration.toNanosUnsafe(secondsToDuration(decodeDelay)) : 0n

    /**
     * The generation's timeline in one wait (docs/runtime.md, "The embedded engine's timeline"): token `i` of `count`
     * is due `prefill + (i + 1) × decode` after the wait begins; one sleep until the last is due. An abort ends the
     * sleep at once and keeps the tokens due by then. Returns how many tokens appeared.
     */
    const waitOnce = (prefillSeconds: number, count: number, run: Running): Effect.Effect<number> => {
      const prefill = prefillNanos(prefillSeconds)
      const total = prefill + BigInt(count) * decodeNanos
      if (total <= 0n) return Effect.succeed(count)
      return Effect.flatMap(Clock.currentTimeMillis, (start) =>
        Effect.flatMap(sleepUnlessAborted(Duration.nanos(total), run), () =>
          !run.aborted ? Effect.succeed(count) : Effect.map(Clock.currentTimeMillis, (now) => {
            // Nanoseconds since the wait began; due times are whole nanoseconds, so half a one of slack absorbs the
            // rounding of the clock's float milliseconds (a token due at the abort's instant appeared).
            const elapsed = (now - start) * 1e6 + 0.5
            const decoding = elapsed - Number(prefill)
            return decoding < 0 ? 0 : decodeNanos === 0n
              ? count
              : Math.min(count, Math.floor(decoding / Number(decodeNanos)))
          })))
    }

    /**
     * The per-token timeline this engine had before (one wait for the prefill, then one per token), kept as the
     * reference the one-wait timeline is tested against (`perTokenWaits`). Returns how many tokens appeared.
     */
    const waitPerToken = (
      prefillSeconds: number,
      count: number,
      run: Running
    ): Effect.Effect<number> =>
      Effect.gen(function*() {
        yield* prefillSeconds > 0 ? sleepUnlessAborted(secondsToDuration(prefillSeconds), run) : Effect.void
        // As the loop had it: an abort is checked before each token and after its wait.
        let appeared = 0
        while (!run.aborted && appeared < count) {
          if (decodeDelay > 0) {
            yield* sleepUnlessAborted(secondsToDuration(decodeDelay), run)
          }
          if (!run.aborted) {
            appeared++
          }
        }
        return appeared
      })

    const policyFailed = (conversation: Engine.PolicyRequest, error: unknown): Engine.EngineError =>
      new Engine.EngineError({
        reason: "policy",
        detail: `--embedded-policy failed for session ${conversation.sessionId} turn ${conversation.turn}: ` +
          Thrown.messageOf(error),
        cause: error
      })

    const policyAnswer = (
      conversation: Engine.PolicyRequest,
      text: unknown
    ): Effect.Effect<string, Engine.EngineError> =>
      typeof text === "string" ? Effect.succeed(text) : Effect.fail(
        new Engine.EngineError({
          reason: "policy",
          detail: `--embedded-policy returned ${text === null ? "null" : typeof text} for session ` +
            `${conversation.sessionId} turn ${conversation.turn}; it must return the assistant text as a string`
        })
      )

    /**
     * The policy's text. A policy that answers synchronously (a string, or a throw) is used in place: no promise, so
     * under the TestClock the generation's timeline starts when the request does (a promise's continuation is not
     * one the clock waits for, so the clock could move on before it). A promise is awaited, and the fiber continues
     * as a task: every policy that settled in the same microtask drain resumes there.
     */
    const policyText = (
      policy: Policy,
      conversation: Engine.PolicyRequest
    ): Effect.Effect<string, Engine.EngineError> => {
      let answer: string | Promise<string>
      try {
        answer = policy(conversation)
      } catch (error) {
        return Effect.fail(policyFailed(conversation, error))
      }
      const pending = answer
      return !(pending instanceof Promise) ? policyAnswer(conversation, pending) : Effect.tryPromise({
        try: () =>
          pending,
        catch: (error) =>
          policyFailed(conversation, error)
      }).pipe(
        Effect.tap(() => FairScheduler.continueAsTask),
        Effect.flatMap((text) => policyAnswer(conversation, text))
      )
    }

    type Generated = Effect.Effect<Engine.GenerateResult, ContextLengthError.ContextLengthError | Engine.EngineError>

    /**
     * A generation once the gate is open: the request's checks and its registration run synchronously (where the
     * effect that calls this runs), then the one generator of the generation itself; no generator of its own around
     * them (issue 24's eighth pass: one effect fewer per request).
     */
    const start = (request: Engine.GenerateRequest): Generated => {
      const { inputIds, sampling } = request
      if (inputIds.length === 0) return Effect.fail(invalid("input_ids cannot be empty"))
      const verified = Sampling.verify(sampling)
      if (Result.isFailure(verified)) return Effect.fail(invalid(verified.failure))
      if (options.maxContextLength !== undefined) {
        const fits = SglangWire.checkContextLength(inputIds.length, sampling.maxNewTokens, options.maxContextLength)
        if (Result.isFailure(fits)) {
          return Effect.fail(
            new ContextLengthError.ContextLengthError({
              limit: options.maxContextLength,
              engineMessage: fits.failure
            })
          )
        }
      }
      if (running.has(request.rid)) {
        return Effect.fail(invalid(`rid ${request.rid} is already running; rids must be unique`))
      }
      const model = request.lora === undefined ? baseModel : adapters.model(request.lora)
      if (model === undefined) return Effect.fail(EmbeddedAdapters.notLoaded(request.lora ?? "", adapters.names()))
      const sessionKey = request.sessionId ?? ""
      const run: Running = {
        sessionKey,
        closed: false,
        aborted: false,
        kvTokens: inputIds.length,
        byUpdate: false,
        sleeping: undefined
      }
      running.set(request.rid, run)
      const seed = Decoder.requestSeed(engineSeed, sampling.seed, counter++)
      const criteria: Stop.Criteria = {
        maxNewTokens: sampling.maxNewTokens,
        stopTokenIds: sampling.stopTokenIds.length === 0
          ? eosOnly
          : new Set([tokenizer.eosTokenId, ...sampling.stopTokenIds]),
        stop: sampling.stop,
        decode
      }
      // A resumed attempt: its input ends with the turn's earlier output, which counts for stops and max tokens.
      const resumed = Math.max(0, Math.min(request.resumedTokens ?? 0, inputIds.length - 1))
      const turnCriteria: Stop.Criteria = resumed === 0
        ? criteria
        : { ...criteria, maxNewTokens: sampling.maxNewTokens + resumed }
      const prompt = inputIds[inputIds.length - 1] ?? tokenizer.eosTokenId
      // The version this attempt runs on: an update aborts it, so all its tokens come from this version.
      const runningVersion = version
      return Effect.gen(function*() {
        // A policy's turn: its ids and their logprobs, of which this attempt generates those after `resumed`.
        let scriptedIds: ReadonlyArray<number> | undefined
        let scriptedScores: ReadonlyArray<number> = []
        if (options.policy !== undefined && request.conversation !== undefined) {
          const text = yield* policyText(options.policy, request.conversation())
          scriptedIds = Stop.truncate([...tokenizer.encode(text), tokenizer.eosTokenId], turnCriteria).ids
          const turnPrompt = inputIds[inputIds.length - 1 - resumed] ?? tokenizer.eosTokenId
          scriptedScores = Decoder.score(model, sampling, turnPrompt, scriptedIds)
        }
        const cached = lastSequence.get(sessionKey)
        const stamp = fullPrefixMatch ? 0 : StableIds.stampOf(inputIds)
        const common = cached === undefined
          ? 0
          : PackedIds.commonPrefixOfChain(inputIds, cached, knownPrefix(cached, stamp, inputIds))
        const kept = promptChain(request)
        const cachedTokens = Math.min(common, inputIds.length - 1)
        const check = resumed === 0 ? Stop.checker(criteria) : (() => {
          const turnCheck = Stop.checker(turnCriteria)
          const earlier = Array.from({ length: resumed }, (_, i) => inputIds[inputIds.length - resumed + i] ?? 0)
          return (ids: ReadonlyArray<number>) => turnCheck([...earlier, ...ids])
        })()
        // The whole output first (it depends on no time), then the time it takes on the clock.
        const allIds: Array<number> = []
        const allLogprobs: Array<number> = []
        let finished: Stop.FinishReason | undefined = sampling.maxNewTokens <= 0
          ? { type: "length", length: sampling.maxNewTokens }
          : undefined
        let prev = prompt
        while (finished === undefined) {
          const position = allIds.length
          if (scriptedIds === undefined) {
            const step = Decoder.next(model, sampling, seed, prev, inputIds.length + position)
            allIds.push(step.id)
            allLogprobs.push(step.logprob)
          } else {
            // A scripted output always finishes (it ends with eos or was truncated where a stop criterion hit).
            const at = resumed + position
            if (at >= scriptedIds.length) break
            allIds.push(scriptedIds[at]!)
            allLogprobs.push(scriptedScores[at] ?? 0)
          }
          prev = allIds[position]!
          finished = check(allIds)
        }
        run.kvTokens = inputIds.length + allIds.length
        const prefillSeconds = (inputIds.length - cachedTokens) * prefillDelay
        const appeared = yield* (options.perTokenWaits === true
          ? waitPerToken(prefillSeconds, allIds.length, run)
          : waitOnce(prefillSeconds, allIds.length, run))
        const aborted = appeared < allIds.length || (run.aborted && finished === undefined)
        const outputIds = appeared < allIds.length ? allIds.slice(0, appeared) : allIds
        const logprobs = appeared < allIds.length ? allLogprobs.slice(0, appeared) : allLogprobs
        const finishReason: Stop.FinishReason | undefined = aborted ? { type: "abort", message: "Aborted" } : finished
        if (!run.closed) {
          lastSequence.set(sessionKey, {
            ids: PackedIds.pack(outputIds),
            up: kept,
            count: inputIds.length + outputIds.length,
            promptStamp: stamp,
            promptOffset: inputIds instanceof Int32Array ? inputIds.byteOffset : 0,
            promptLength: inputIds.length
          })
        }
        return {
          outputIds,
          logprobs: request.returnLogprob ? logprobs : [],
          finishReason: finishReason ?? { type: "stop", matched: tokenizer.eosTokenId },
          promptTokens: inputIds.length,
          cachedTokens,
          weightVersion: runningVersion,
          ...(finishReason?.type === "abort" && run.byUpdate ? { cutByUpdate: true } : {})
        } satisfies Engine.GenerateResult
      }).pipe(Effect.ensuring(Effect.sync(() => {
        running.delete(request.rid)
        if (running.size === 0) { for (const resume of idleWaiters.splice(0)) resume() }
      })))
    }

    /** Held while the gate is closed (a pause for a weight push); aborted while held, it ends with no tokens. */
    const generate = (request: Engine.GenerateRequest): Generated =>
      Effect.suspend(() =>
        Latch.isOpen(gate) ? start(request) : Effect.gen(function*() {
          const aborted = yield* Deferred.make<void>()
          held.set(request.rid, aborted)
          const opened = yield* Instruments.countedWhile(
            Instruments.generationsHeld,
            Effect.raceFirst(Effect.as(gate.await, true), Effect.as(Deferred.await(aborted), false))
          ).pipe(
            Effect.ensuring(Effect.sync(() => held.delete(request.rid)))
          )
          if (!opened) return Engine.abortedWhilePaused(request, version)
          return yield* start(request)
        })
      )

    // Every running generation has returned (an aborted one ends at its next wait).
    const drained: Effect.Effect<void> = Effect.callback<void>((resume) => {
      if (running.size === 0) return resume(Effect.void)
      idleWaiters.push(() => resume(Effect.void))
    })

    // A snapshot: an aborted generation may finish, and its caller start the next one, before this loop ends.
    const abortAll = Effect.sync(() => {
      for (const run of [...running.values()]) abortRun(run, true)
    })

    return Engine.withSpans("EmbeddedEngine", {
      generate,
      abort: (rid) =>
        Effect.sync(() => {
          const run = running.get(rid)
          if (run !== undefined) abortRun(run)
          const waiting = held.get(rid)
          if (waiting !== undefined) Deferred.doneUnsafe(waiting, Effect.void)
        }),
      weightVersion: Effect.sync(() => version),
      // The version advances before the abort: a caller that resumes as soon as its attempt is aborted (inside
      // `abortAll`) starts on the new weights, while the aborted attempts keep the version they started on.
      updateWeights: (next) =>
        Effect.suspend(() => {
          updates++
          version = next ?? WeightVersion.next(version, updates)
          const advanced = version
          return Effect.as(abortAll, advanced)
        }),
      pauseGeneration: () => Effect.andThen(gate.close, Effect.andThen(abortAll, Effect.suspend(() => drained))),
      resumeGeneration: (next) =>
        Effect.suspend(() => {
          updates++
          version = next ?? WeightVersion.next(version, updates)
          const resumed = version
          return Effect.as(gate.open, resumed)
        }),
      health: Effect.void,
      // The Session's prefix-cache sequence goes (SGLang's /close_session frees its radix-cache entries); a generation
      // of it still running keeps none either, so a long run holds sequences of live Sessions only.
      closeSession: (sessionId) =>
        Effect.sync(() => {
          lastSequence.delete(sessionId)
          for (const run of running.values()) if (run.sessionKey === sessionId) run.closed = true
        }),
      takeStepMetrics: Effect.succeed({}),
      adapters: adapters.port,
      kvSnapshot: Effect.map(Clock.currentTimeMillis, (at) => {
        let used = 0
        for (const run of running.values()) used += run.kvTokens
        return {
          at,
          workers: [{ id: "embedded", healthy: true, maxTotalNumTokens: kvTokens, usage: used / kvTokens }]
        }
      })
    })
  })

/** Wrap a loaded hook as a policy that checks it returns a string. */
const asPolicy = (spec: string, hook: Hooks.HookFunction): Policy => async (request) => {
  const text = await hook(request)
  if (typeof text !== "string") {
    throw new TypeError(
      `${spec} returned ${text === null ? "null" : typeof text}, expected the assistant text as a string`
    )
  }
  return text
}

export class EmbeddedEngine {
  /** The `Engine` service backed by the embedded model (needs the `Tokenizer`). */
  static readonly layer = (
    options: EmbeddedEngineOptions = {}
  ): Layer.Layer<Engine.Engine, never, Tokenizer.Tokenizer> =>
    Layer.effect(
      Engine.Engine,
      Effect.gen(function*() {
        return yield* make(yield* Tokenizer.Tokenizer, options)
      })
    )

  /** Load `--embedded-policy <module>[#export]` (relative to `cwd`). */
  static readonly loadPolicy = (
    spec: string,
    cwd?: string
  ): Effect.Effect<Policy, HookSpec.HookSpecError | Hooks.HookLoadError> =>
    Effect.map(Hooks.load("--embedded-policy", spec, cwd), (hook) => asPolicy(spec, hook))

  /** The engine's model, for recomputing logprobs independently. */
  static readonly modelFor = modelFor
  static readonly make = make
  static readonly instant = instant
}

/** Seconds a generation takes under `options` (for simulations that predict generation times). */
export const generationSeconds = (
  options: EmbeddedEngineOptions,
  uncachedPromptTokens: number,
  outputTokens: number
): number =>
  uncachedPromptTokens * perToken(options.prefillTokensPerSecond, 20_000) +
  outputTokens * perToken(options.decodeTokensPerSecond, 200)
