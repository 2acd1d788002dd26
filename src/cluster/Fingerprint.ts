/**
 * The settings that change samples, compared between the controller and a runner (docs/scale-out.md "One
 * configuration"): a runner whose tokenizer, engine, parsers, agent command or sampling differ from the controller's
 * would produce different samples for the same seed, so it refuses the controller's Sessions naming the flag.
 *
 * **Details**
 * The fingerprint is the JSON text of each such setting, keyed by field; the controller sends it with every Session,
 * and the runner compares it with its own. Settings that may differ per machine (the agent's working directory, the
 * gateway's host and port, output paths) are not part of it. Of the cross-step modes, a runner compares what its
 * generation gate does with them (`derivedFields`): `--partial-rollout` and `--fully-async` park and retain a Group at
 * a step boundary alike on a runner; the early close and the final backfill of fully async are the controller's.
 */
import { Option, Schema } from "effect"
import * as FlagTable from "../config/FlagTable.ts"
import type * as Settings from "../config/Settings.ts"
import * as ClusterError from "./ClusterError.ts"

/** The fields whose values change what a Session samples. */
export const sampleFields = [
  "inputKey",
  "labelKey",
  "metadataKey",
  "multimodalKeys",
  "applyChatTemplateKwargs",
  "agentCommand",
  "agentEnv",
  "agentTimeout",
  "agenticToolCallParser",
  "agenticReasoningParser",
  "strictMatch",
  "engine",
  "sglangUrls",
  "sglangRouterUrl",
  "sglangEnableDeterministicInference",
  "tokenizer",
  "multimodalTrainInputs",
  "embeddedPolicy",
  "rolloutTemperature",
  "rolloutTopP",
  "rolloutTopK",
  "rolloutMaxResponseLen",
  "rolloutMaxContextLen",
  "rolloutStop",
  "rolloutStopTokenIds",
  "rolloutSkipSpecialTokens",
  "rolloutSeed",
  "evalTemperature",
  "evalTopP",
  "evalTopK",
  "evalMaxResponseLen",
  "evalMaxContextLen",
  "agenticAllowSpecialTokens",
  "agenticFailUnparsedTurns",
  // The runners' generation gates protect Sessions by this (partial rollout).
  "partialRolloutMaxAbortedCount"
] as const satisfies ReadonlyArray<keyof Settings.RolloutSettings>

/**
 * Entries derived from several settings, keyed by a name of their own: what a runner's Sessions do with them.
 * `retainsAcrossSteps`: the runner's generation gate parks and keeps Groups at a step boundary (`--partial-rollout` or
 * `--fully-async`: the same on a runner).
 */
export const derivedFields = {
  retainsAcrossSteps: {
    flags: "--partial-rollout / --fully-async",
    value: (settings: Settings.RolloutSettings): boolean => settings.partialRollout || settings.fullyAsync
  }
} as const

const compared: ReadonlyArray<string> = [...sampleFields, ...Object.keys(derivedFields)]

const flagsOf = (field: string): string =>
  field in derivedFields ? derivedFields[field as keyof typeof derivedFields].flags : FlagTable.flagOf(field)

/** Field → JSON text of its value. */
export type Fingerprint = Readonly<Record<string, string>>

/** The fingerprint of `settings`. */
export const of = (settings: Settings.RolloutSettings): Fingerprint =>
  Object.fromEntries([
    ...sampleFields.map((field) => [field, JSON.stringify(settings[field] ?? null)]),
    ...Object.entries(derivedFields).map(([field, derived]) => [field, JSON.stringify(derived.value(settings))])
  ])

/**
 * The first setting where the runner's fingerprint differs from the controller's, as a message naming its flag;
 * `undefined` when they agree.
 */
export const mismatch = (
  controller: Fingerprint,
  runner: Fingerprint,
  names: { readonly ours: string; readonly theirs: string } = { ours: "this runner", theirs: "the controller" }
): string | undefined => {
  const field = differingField(controller, runner)
  if (field === undefined) return undefined
  const flag = flagsOf(field)
  return `${flag}: ${names.ours} has ${runner[field] ?? "null"}, ${names.theirs} ${controller[field] ?? "null"}; ` +
    "every runner must read the controller's configuration (the same --config and sample-changing flags), or its " +
    "samples would differ"
}

/** The first sample-changing field (or derived entry) whose values differ; `undefined` when they agree. */
export const differingField = (a: Fingerprint, b: Fingerprint): string | undefined =>
  compared.find((field) => (a[field] ?? "null") !== (b[field] ?? "null"))

/**
 * A fingerprint as one JSON text: how `PollRunner` carries the controller's settings (one string to check, encode and
 * decode a message instead of a record of ~36 pairs, each checked, encoded and decoded on its own).
 */
export const toText = (fingerprint: Fingerprint): string => JSON.stringify(fingerprint)

const decodeText = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Record(Schema.String, Schema.String)))

/**
 * A reader of fingerprint texts (`toText`) that keeps the last one read (a controller sends the same text every
 * time): the fingerprint, or `undefined` when the text is not one.
 */
export const textReader = (): (text: string) => Fingerprint | undefined => {
  let last: { readonly text: string; readonly fingerprint: Fingerprint | undefined } | undefined
  return (text) => {
    if (last?.text !== text) last = { text, fingerprint: Option.getOrUndefined(decodeText(text)) }
    return last.fingerprint
  }
}

/**
 * Why a runner refuses the Groups a message would start when it cannot read the controller's settings text (a
 * controller of another version): the Sessions fail `SettingsUnreadable`, naming the runner and the fix.
 */
export const unreadable = (runner: string, text: string): ClusterError.SessionFailedError =>
  new ClusterError.SessionFailedError({
    type: "SettingsUnreadable",
    detail: `runner ${runner} could not read the controller's settings (${text.slice(0, 120)}): run the controller ` +
      "and every runner at the same relax-agentic version"
  })
