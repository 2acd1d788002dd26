/**
 * Required external-agent capacity (the guide's "Configure Runtime Behavior" table): how many agent slots a shared
 * executor needs so that Group startup cannot deadlock at the all-session first-request barrier.
 *
 * **Details**
 * ```
 * T      = agentic_concurrency * n_samples_per_prompt
 * G_d    = dataset d's n_samples_per_eval_prompt
 * C_d    = explicit agentic_eval_concurrency or ceil(T / G_d)
 * E_d    = C_d * G_d
 * E_peak = max(E_d across Eval datasets)
 * ```
 * Eval datasets run serially, so their peak is `E_peak`, not the sum. Train sessions stay resident during Eval with
 * `--agentic-prelaunch`, `--partial-rollout` or `--fully-async`; then train and Eval overlap (`T + E_peak`).
 */

export interface EvalDatasetInput {
  readonly name: string
  /** `--n-samples-per-eval-prompt` for this dataset (G_d). */
  readonly nSamplesPerEvalPrompt: number
}

export interface CapacityInput {
  /** Resident training Groups (`--agentic-concurrency`, already defaulted). */
  readonly agenticConcurrency: number
  readonly nSamplesPerPrompt: number
  /** `--agentic-eval-concurrency`, when given explicitly. */
  readonly agenticEvalConcurrency?: number | undefined
  readonly evalDatasets: ReadonlyArray<EvalDatasetInput>
  /** Any of `--agentic-prelaunch`, `--partial-rollout`, `--fully-async`. */
  readonly trainResidentDuringEval: boolean
  /** Which of those flags are on, for the report. */
  readonly residentBecause?: ReadonlyArray<string> | undefined
  /** `--agent-max-slots`: the executor's hard concurrency limit, when known. */
  readonly agentMaxSlots?: number | undefined
}

export interface EvalCapacity {
  readonly name: string
  /** G_d */
  readonly groupSize: number
  /** C_d: resident Eval prompt Groups. */
  readonly concurrency: number
  /** E_d = C_d * G_d: Eval sessions resident at once. */
  readonly sessions: number
}

export type SlotRule = "T" | "max(T, E_peak)" | "T + E_peak"

export interface CapacityReport {
  /** T: resident training sessions. */
  readonly trainSessions: number
  readonly evals: ReadonlyArray<EvalCapacity>
  /** E_peak (0 without Eval). */
  readonly evalPeak: number
  readonly evalEnabled: boolean
  readonly trainResidentDuringEval: boolean
  /** The flags that keep training Sessions resident (`--partial-rollout`, ...). */
  readonly residentBecause: ReadonlyArray<string>
  readonly rule: SlotRule
  readonly requiredSlots: number
  readonly agentMaxSlots: number | undefined
  /** Set when `agentMaxSlots` is below `requiredSlots`. */
  readonly warning: string | undefined
}

/** C_d: the explicit `--agentic-eval-concurrency`, or `ceil(T / G_d)`. */
export const evalConcurrency = (
  trainSessions: number,
  groupSize: number,
  explicit?: number | undefined
): number => explicit ?? Math.ceil(trainSessions / groupSize)

/** Compute the guide's capacity table. */
export const compute = (input: CapacityInput): CapacityReport => {
  const trainSessions = input.agenticConcurrency * input.nSamplesPerPrompt
  const evals = input.evalDatasets.map((d): EvalCapacity => {
    const concurrency = evalConcurrency(trainSessions, d.nSamplesPerEvalPrompt, input.agenticEvalConcurrency)
    return {
      name: d.name,
      groupSize: d.nSamplesPerEvalPrompt,
      concurrency,
      sessions: concurrency * d.nSamplesPerEvalPrompt
    }
  })
  const evalPeak = evals.reduce((peak, e) => Math.max(peak, e.sessions), 0)
  const evalEnabled = evals.length > 0
  const rule: SlotRule = !evalEnabled ? "T" : input.trainResidentDuringEval ? "T + E_peak" : "max(T, E_peak)"
  const requiredSlots = rule === "T"
    ? trainSessions
    : rule === "T + E_peak"
    ? trainSessions + evalPeak
    : Math.max(trainSessions, evalPeak)
  const warning = input.agentMaxSlots !== undefined && input.agentMaxSlots < requiredSlots
    ? `--agent-max-slots ${input.agentMaxSlots} is below the required ${requiredSlots} external agent slots ` +
      `(${rule}); Group startup can deadlock at the all-session first-request barrier. ` +
      `Raise the executor's limit, or lower --agentic-concurrency / --agentic-eval-concurrency (Groups) or ` +
      `--n-samples-per-prompt / --n-samples-per-eval-prompt (Sessions per Group).`
    : undefined
  return {
    trainSessions,
    evals,
    evalPeak,
    evalEnabled,
    trainResidentDuringEval: input.trainResidentDuringEval,
    residentBecause: input.residentBecause ?? [],
    rule,
    requiredSlots,
    agentMaxSlots: input.agentMaxSlots,
    warning
  }
}

/** The report as the plain-text table `relax-agentic check` prints. */
export const render = (report: CapacityReport): string => {
  const lines = [
    "Required external-agent capacity",
    `  T (agentic_concurrency * n_samples_per_prompt) = ${report.trainSessions}`
  ]
  for (const e of report.evals) {
    lines.push(`  eval ${e.name}: G_d = ${e.groupSize}, C_d = ${e.concurrency}, E_d = ${e.sessions}`)
  }
  if (report.evalEnabled) lines.push(`  E_peak = ${report.evalPeak}`)
  lines.push(
    `  Eval enabled: ${report.evalEnabled ? "Yes" : "No"}; train sessions resident during Eval: ` +
      `${report.evalEnabled ? (report.trainResidentDuringEval ? "Yes" : "No") : "-"}` +
      (report.evalEnabled && report.residentBecause.length > 0 ? ` (${report.residentBecause.join(", ")})` : "")
  )
  lines.push(`  required slots: external_slots >= ${report.rule} = ${report.requiredSlots}`)
  if (report.agentMaxSlots !== undefined) lines.push(`  --agent-max-slots = ${report.agentMaxSlots}`)
  if (report.warning !== undefined) lines.push(`WARNING: ${report.warning}`)
  return lines.join("\n")
}
