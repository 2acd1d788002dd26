/**
 * `relax-agentic check`: run one Session of the harness and report the launch checks of "Prepare Your Agent" and the
 * required external-agent capacity.
 */
import { Data, Effect, Layer, Result } from "effect"
import { readFileSync } from "node:fs"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as Forests from "../../layers/generation/Forests.ts"
import * as Generation from "../../layers/generation/Generation.ts"
import * as Files from "../../layers/rollout/Files.ts"
import * as Sessions from "../../layers/schedule/Sessions.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as Tokenizer from "../../layers/tokenizer/Tokenizer.ts"
import * as VisionInputs from "../../layers/vision/VisionInputs.ts"
import * as AdmissionOptions from "../admission/AdmissionOptions.ts"
import * as Settings from "../config/Settings.ts"
import * as Reward from "../credit/Reward.ts"
import * as Export from "../forest/Export.ts"
import * as Forest from "../forest/Forest.ts"
import { engineLayer } from "../index.ts"
import * as OutputPaths from "../rollout/OutputPaths.ts"
import * as Capacity from "../schedule/Capacity.ts"
import * as Dataset from "../schedule/Dataset.ts"
import * as SessionInput from "../session/SessionInput.ts"
import type * as SessionOutput from "../session/SessionOutput.ts"
import * as Thrown from "../Thrown.ts"

/** One launch check of "Prepare Your Agent". */
export interface Requirement {
  readonly name: string
  readonly passed: boolean
  readonly detail: string
}

/** What `relax-agentic check` found. */
export interface CheckReport {
  readonly sessionId: string
  readonly row: number
  readonly requirements: ReadonlyArray<Requirement>
  /** Response turns committed to the Session's SessionForest. */
  readonly turns: number
  readonly requests: number
  /** The agent's log tail (stdout + stderr), for a failed run. */
  readonly logTail: string
  readonly capacity: Capacity.CapacityReport
}

/** A check that could not start its Session (bad flags, dataset, hooks, port). */
export class CheckStartupError extends Data.TaggedError("CheckStartupError")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

const startup = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new CheckStartupError({ detail: error.message }))

/** The capacity table of the guide for these settings. */
export const capacityOf = (settings: Settings.RolloutSettings): Capacity.CapacityReport =>
  // Eval runs only with --eval-interval (layers/rollout/Rollout.ts), so datasets alone add no Eval Sessions.
  Settings.capacity(settings.evalInterval === undefined ? { ...settings, evalDatasets: [] } : settings)

/** The tokenizer, engine and gateway stack one check Session talks to. */
const checkStack = (settings: Settings.RolloutSettings) =>
  Effect.gen(function*() {
    const parsers = yield* startup(Effect.fromResult(Generation.Generation.optionsOf(settings)))
    const tokenizer = settings.tokenizer === undefined
      ? Tokenizer.Tokenizer.layer
      : Tokenizer.Tokenizer.fromDirectory(settings.tokenizer)
    // A check answers quickly: a server still starting is waited for 10 seconds, not the rollout's 10 minutes
    // (unless --sglang-startup-timeout says otherwise).
    const engine = engineLayer(settings, { cwd: process.cwd(), sglangDefaults: { startupTimeout: "10 seconds" } })
    // The vision training inputs are checked against the tokenizer's processor, as a rollout does at startup.
    const vision = VisionInputs.VisionInputs.layer(settings.multimodalTrainInputs).pipe(Layer.provideMerge(tokenizer))
    const core = Layer.mergeAll(Forests.Forests.layer, Sessions.Sessions.layer, engine).pipe(
      Layer.provideMerge(vision)
    )
    const generation = Generation.Generation.layer(parsers).pipe(Layer.provideMerge(core))
    return Gateway.Gateway.layer({ host: settings.host, port: settings.port }).pipe(Layer.provideMerge(generation))
  })

const readRow = (settings: Settings.RolloutSettings, row: number) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => readFileSync(settings.promptData, "utf8"),
      catch: (error) =>
        new CheckStartupError({
          detail: `--prompt-data: cannot read ${settings.promptData}: ${Thrown.messageOf(error)}`
        })
    })
    const rows = yield* startup(Effect.fromResult(Dataset.parse(text, settings.promptData)))
    const data = rows[row]
    if (data === undefined) {
      return yield* new CheckStartupError({
        detail: `--row: ${row} is out of range; ${settings.promptData} has ${rows.length} row(s)`
      })
    }
    return yield* startup(Effect.fromResult(SessionInput.fromRow(data, row, {
      inputKey: settings.inputKey,
      metadataKey: settings.metadataKey,
      ...(settings.labelKey === undefined ? {} : { labelKey: settings.labelKey }),
      ...(settings.multimodalKeys === undefined ? {} : { multimodalKeys: settings.multimodalKeys })
    })))
  })

const textOf = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value ?? "")

const observedText = (forest: Forest.Forest): string =>
  [...forest.nodes.values()]
    .flatMap((node) => node.kind === "obs" ? node.messages.map((message) => textOf(message.content)) : [])
    .join("\n")

const responseTurns = (forest: Forest.Forest): number =>
  [...forest.nodes.values()].filter((node) => node.kind === "resp").length

const describeReward = (
  output: SessionOutput.AgentOutput,
  settings: Settings.RolloutSettings
): { readonly passed: boolean; readonly detail: string } => {
  const rewards = output.kind === "implicit"
    ? (output.reward === undefined ? [] : [output.reward])
    : output.records.flatMap((record) => record.reward === undefined ? [] : [record.reward])
  const hasMetadata = output.kind === "implicit" ? output.metadata !== undefined : output.records.length > 0
  const present = rewards.filter((reward): reward is Reward.PresentReward => reward !== null)
  if (present.length === 0) {
    if (settings.customRmPath !== undefined || settings.agenticCustomAdvantagePath !== undefined) {
      return {
        passed: hasMetadata,
        detail: hasMetadata
          ? "no reward written; credit comes from --custom-rm-path / --agentic-custom-advantage-path"
          : "RELAX_OUTPUT_JSON is missing or empty: write metadata (and reward) before exiting"
      }
    }
    return {
      passed: false,
      detail: "no reward in RELAX_OUTPUT_JSON: write {\"reward\": ...} (or configure --custom-rm-path)"
    }
  }
  const primary = Reward.primaryValue(present[0]!, settings.rewardKey)
  return Result.isSuccess(primary)
    ? {
      passed: true,
      detail: `reward ${JSON.stringify(present[0])}` +
        (typeof present[0] === "number" ? "" : ` → ${primary.success} (--reward-key ${settings.rewardKey})`) +
        (output.kind === "explicit" ? `; ${output.records.length} explicit record(s)` : "")
    }
    : { passed: false, detail: primary.failure }
}

/**
 * Run one Session of the harness against a gateway over the configured engine (embedded by default) and check the
 * five requirements of "Prepare Your Agent": it accepts the input, calls a model endpoint, completes a run (turn
 * count reported), writes a final result, and exits without error. Before the agent starts, `--output-dir` and the
 * first step's `--save-debug-rollout-data` directories are created and proved writable, as `rollout` does.
 */
export const runCheck = (
  settings: Settings.RolloutSettings,
  options: { readonly row?: number | undefined } = {}
): Effect.Effect<CheckReport, CheckStartupError> =>
  Effect.gen(function*() {
    const row = options.row ?? 0
    const spec = yield* startup(Supervisor.resolveAgentSpec({
      command: settings.agentCommand,
      cwd: settings.agentCwd,
      env: settings.agentEnv,
      timeoutSeconds: settings.agentTimeout
    }))
    const prepared = yield* readRow(settings, row)
    // The rollout's output directories, proved writable before the agent starts (as `rollout` does at startup).
    yield* startup(Effect.forEach(OutputPaths.firstStepTargets(settings), Files.probeDirectory, { discard: true }))
    const stack = yield* checkStack(settings)
    return yield* Effect.gen(function*() {
      const gateway = yield* Gateway.Gateway
      const sessions = yield* Sessions.Sessions
      const forests = yield* Forests.Forests
      const sessionId = yield* sessions.newSessionId
      const groupId = "check:prepare_group_0"
      const counters = Sessions.emptyCounters()
      yield* forests.create(sessionId, {
        groupIndex: 0,
        index: 0,
        metadata: prepared.metadata,
        chatTemplateKwargs: settings.applyChatTemplateKwargs,
        ...(prepared.label === undefined ? {} : { label: prepared.label })
      })
      yield* sessions.register({
        sessionId,
        groupId,
        mode: "train",
        sampling: Settings.trainSampling(settings, 0),
        maxContextLen: settings.rolloutMaxContextLen,
        rolloutId: () => 0,
        awaitLease: Effect.void,
        counters
      })
      const supervisor = Supervisor.Supervisor.localProcess({ spec, baseUrl: gateway.agentBaseUrl })
      const outcome = yield* Effect.result(
        supervisor.run({ sessionId, groupId, rolloutMode: "train", input: prepared })
      )
      yield* sessions.close(sessionId)
      // As a rollout does when a Session ends (SGLang --agentic-session-lifecycle: /close_session).
      yield* (yield* Engine.Engine).closeSession(sessionId)
      const forest = yield* Effect.orDie(forests.get(sessionId))
      const turns = responseTurns(forest)

      const inputTexts = (prepared.messages ?? []).map((message) => textOf(message["content"]))
      const seen = observedText(forest)
      const missing = inputTexts.filter((text) => !seen.includes(text))
      const accepted: Requirement = {
        name: "accepts the input",
        passed: counters.requests > 0 && missing.length === 0,
        detail: counters.requests === 0
          ? "no model request arrived: does the harness read RELAX_INPUT_JSON and use RELAX_BASE_URL?"
          : prepared.messages === undefined
          ? "metadata-only task: the harness built its own messages"
          : missing.length === 0
          ? `the requests carried all ${inputTexts.length} input message(s) from RELAX_INPUT_JSON`
          : `${missing.length} input message(s) never reached the model, e.g. ${
            JSON.stringify(missing[0]!.slice(0, 80))
          }`
      }
      const called: Requirement = {
        name: "calls a supported model endpoint",
        passed: counters.requests > 0 && turns > 0,
        detail: counters.requests === 0
          ? "no request reached RELAX_BASE_URL (Chat Completions, Responses or Messages with Bearer RELAX_SESSION_ID)"
          : `${counters.requests} request(s), ${turns} response(s) committed`
      }
      const exported = Result.isSuccess(outcome)
        ? (outcome.success.output.kind === "implicit"
          ? Export.exportImplicit(forest, outcome.success.output)
          : Export.exportExplicit(forest, outcome.success.output.records, undefined, { strict: settings.strictMatch }))
        : undefined
      const completed: Requirement = {
        name: "completes a full run",
        passed: Result.isSuccess(outcome) && turns > 0 && exported !== undefined && Result.isSuccess(exported),
        detail: `${turns} turn(s)${turns > 1 ? " (multi-turn)" : ""}` +
          (exported === undefined
            ? "; the agent did not finish"
            : Result.isFailure(exported)
            ? `; export failed: ${exported.failure.message}`
            : `; export selects ${exported.success.length} training context(s)`)
      }
      const wrote: Requirement = Result.isSuccess(outcome)
        ? { name: "writes a final result", ...describeReward(outcome.success.output, settings) }
        : { name: "writes a final result", passed: false, detail: "the agent did not exit cleanly" }
      const exited: Requirement = Result.isSuccess(outcome)
        ? { name: "exits without error", passed: true, detail: "exit code 0" }
        : { name: "exits without error", passed: false, detail: outcome.failure.message.split("\n")[0] ?? "" }
      const logTail = Result.isSuccess(outcome) ?
        outcome.success.logTail :
        outcome.failure._tag === "AgentExecutionError"
        ? outcome.failure.logTail
        : ""
      return {
        sessionId,
        row,
        requirements: [accepted, called, completed, wrote, exited],
        turns,
        requests: counters.requests,
        logTail,
        capacity: capacityOf(settings)
      } satisfies CheckReport
    }).pipe(
      Effect.provide(stack),
      Effect.scoped,
      Effect.catchTag(
        "ServeError",
        (error) =>
          Effect.fail(new CheckStartupError({ detail: `--host/--port: the gateway cannot listen: ${error.message}` }))
      ),
      Effect.catchTag("RolloutConfigError", (error) => Effect.fail(new CheckStartupError({ detail: error.message })))
    )
  }).pipe(
    Effect.catchTags({
      TokenizerLoadError: (error) => Effect.fail(new CheckStartupError({ detail: `--tokenizer: ${error.message}` })),
      EngineError: (error) => Effect.fail(new CheckStartupError({ detail: `--engine: ${error.message}` })),
      HookSpecError: (error) => Effect.fail(new CheckStartupError({ detail: error.message })),
      HookLoadError: (error) => Effect.fail(new CheckStartupError({ detail: error.message }))
    })
  )

/** The report as `relax-agentic check` prints it. */
export const renderCheck = (report: CheckReport, settings: Settings.RolloutSettings): string => {
  const lines = [
    `Launch checks: one Session (row ${report.row} of ${settings.promptData}) of ${
      JSON.stringify(settings.agentCommand)
    } ` +
    `in ${settings.agentCwd ?? "."} on the ${settings.engine} engine`
  ]
  for (const requirement of report.requirements) {
    lines.push(`  [${requirement.passed ? "PASS" : "FAIL"}] ${requirement.name}: ${requirement.detail}`)
  }
  const failed = report.requirements.filter((requirement) => !requirement.passed).length
  if (failed > 0 && report.logTail.trim().length > 0) {
    lines.push("  agent log (tail):", ...report.logTail.trimEnd().split("\n").slice(-20).map((line) => `    ${line}`))
  }
  lines.push(
    failed === 0 ? "All launch checks passed." : `${failed} launch check(s) failed.`,
    "",
    Capacity.render(report.capacity),
    "",
    AdmissionOptions.describe(Settings.admission(settings))
  )
  return lines.join("\n")
}
